// Seed 002's classic shared-memory reductions, written from the seed's
// description (NVIDIA's "reduce0/1/2" teaching kernels): one element per
// thread loaded into shared memory, a tree in shared memory with a barrier
// per level, one partial per block. The seed stops at per-block partials;
// to give a full sum the same kernel runs again over the partials until a
// single block remains, as the classic sample does.
#include <string>

#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"

namespace tally::bench {

namespace {

constexpr int kThreads = 256;

template <class T, seed002_kernel K>
__global__ void __launch_bounds__(kThreads) seed002_block_sum(const T* in, std::int64_t count, T* out) {
  __shared__ T sdata[kThreads];
  const unsigned tid = threadIdx.x;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + tid;
  sdata[tid] = i < count ? in[i] : T(0);  // the seed assumes full blocks; the tail loads zeros
  __syncthreads();
  if constexpr (K == seed002_kernel::interleaved_modulo) {
    for (unsigned s = 1; s < kThreads; s *= 2) {
      if (tid % (2 * s) == 0) sdata[tid] += sdata[tid + s];  // tid + s < kThreads: tid is a multiple of 2s
      __syncthreads();
    }
  } else if constexpr (K == seed002_kernel::interleaved_strided) {
    for (unsigned s = 1; s < kThreads; s *= 2) {
      const unsigned index = 2 * s * tid;
      if (index < kThreads) sdata[index] += sdata[index + s];  // index + s < kThreads: index is a multiple of 2s
      __syncthreads();
    }
  } else {
    for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
      if (tid < s) sdata[tid] += sdata[tid + s];
      __syncthreads();
    }
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

template <class T, seed002_kernel K>
void launch_pass(const T* in, std::int64_t count, T* out, std::int64_t blocks, cudaStream_t stream) {
  seed002_block_sum<T, K><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, count, out);
  detail::check_launch("seed002_block_sum");
}

template <class T>
void launch_pass(seed002_kernel k, const T* in, std::int64_t count, T* out, std::int64_t blocks, cudaStream_t stream) {
  switch (k) {
    case seed002_kernel::interleaved_modulo:
      return launch_pass<T, seed002_kernel::interleaved_modulo>(in, count, out, blocks, stream);
    case seed002_kernel::interleaved_strided:
      return launch_pass<T, seed002_kernel::interleaved_strided>(in, count, out, blocks, stream);
    case seed002_kernel::sequential:
      return launch_pass<T, seed002_kernel::sequential>(in, count, out, blocks, stream);
  }
}

std::int64_t blocks_for(std::int64_t count) { return (count + kThreads - 1) / kThreads; }

}  // namespace

const char* to_string(seed002_kernel k) {
  switch (k) {
    case seed002_kernel::interleaved_modulo:
      return "interleaved %";
    case seed002_kernel::interleaved_strided:
      return "interleaved strided";
    case seed002_kernel::sequential:
      return "sequential";
  }
  return "?";
}

template <class T>
reduce_peer seed002_sum(seed002_kernel k, const T* x, std::int64_t n, T* out, cudaStream_t stream) {
  if (n < 1) throw tally::error("seed002_sum: n must be >= 1");
  if (blocks_for(n) > 0x7FFFFFFF)
    throw tally::error("seed002_sum: n = " + std::to_string(n) + " needs too many blocks");
  // Ping-pong buffers for the partials: a holds the first pass's, b the
  // second's; later passes alternate (each pass at most shrinks the count).
  const std::int64_t a_count = blocks_for(n), b_count = blocks_for(a_count);
  auto a = detail::device_allocation(static_cast<std::size_t>(a_count) * sizeof(T));
  auto b = detail::device_allocation(static_cast<std::size_t>(b_count) * sizeof(T));
  reduce_peer call;
  call.p.name = std::string("seed002 ") + to_string(k);
  call.p.note = "passes of one-element-per-thread blocks until one block is left";
  call.p.run = [=] {
    T* const pa = static_cast<T*>(a.get());
    T* const pb = static_cast<T*>(b.get());
    const T* in = x;
    std::int64_t count = n;
    for (;;) {
      const std::int64_t blocks = blocks_for(count);
      T* dst = blocks == 1 ? out : (in == pa ? pb : pa);
      launch_pass(k, in, count, dst, blocks, stream);
      if (blocks == 1) break;
      in = dst;
      count = blocks;
    }
  };
  detail::device_result(call, out, stream);
  return call;
}

template reduce_peer seed002_sum<float>(seed002_kernel, const float*, std::int64_t, float*, cudaStream_t);
template reduce_peer seed002_sum<double>(seed002_kernel, const double*, std::int64_t, double*, cudaStream_t);
template reduce_peer seed002_sum<int>(seed002_kernel, const int*, std::int64_t, int*, cudaStream_t);

}  // namespace tally::bench
