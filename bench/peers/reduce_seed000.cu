// Seed 000's reduction, as the seed wrote it: a grid-stride loop with int
// indices, a warp-shuffle sum, and one atomicAdd per warp into the output.
// The output accumulates, so each call zeroes it first (cudaMemsetAsync),
// and that memset is part of the timed call. Templated on the element type;
// the seed's double version is seed000_warp_atomic_sum<double>.
#include <climits>
#include <string>

#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"

namespace tally::bench {

namespace {

template <class T>
__device__ T seed000_warp_sum(T val) {
  for (int offset = (warpSize >> 1); offset > 0; offset >>= 1) val += __shfl_down_sync(0xffffffff, val, offset);
  return val;
}

template <class T>
__global__ void seed000_warp_atomic_sum(const T* in, T* out, int N) {
  T sum = T(0);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += blockDim.x * gridDim.x) sum += in[i];
  sum = seed000_warp_sum(sum);
  if ((threadIdx.x & (warpSize - 1)) == 0) atomicAdd(out, sum);
}

}  // namespace

template <class T>
reduce_peer seed000_sum(const T* x, std::int64_t n, T* out, int blocks, cudaStream_t stream) {
  // The seed's int index must not overflow on its last grid stride.
  if (n + static_cast<std::int64_t>(blocks) * kSeed000Threads > INT_MAX)
    throw tally::error("seed000_sum: n = " + std::to_string(n) + " overflows the seed's int indices");
  const int count = static_cast<int>(n);
  reduce_peer call;
  call.p.name = "seed000";
  call.p.run = [=] {
    TALLY_CUDA(cudaMemsetAsync(out, 0, sizeof(T), stream));
    seed000_warp_atomic_sum<T><<<blocks, kSeed000Threads, 0, stream>>>(x, out, count);
    detail::check_launch("seed000_warp_atomic_sum");
  };
  detail::device_result(call, out, stream);
  call.p.note = "includes the cudaMemsetAsync that zeroes the output";
  return call;
}

template reduce_peer seed000_sum<float>(const float*, std::int64_t, float*, int, cudaStream_t);
template reduce_peer seed000_sum<double>(const double*, std::int64_t, double*, int, cudaStream_t);
template reduce_peer seed000_sum<int>(const int*, std::int64_t, int*, int, cudaStream_t);

}  // namespace tally::bench
