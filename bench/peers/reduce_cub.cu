// CUB's device-wide sum and a CUB dot product (TransformReduce over indices).
#include <climits>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>

#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"

namespace tally::bench {

namespace {
/// Calls f(count) with n as an int when it fits, as most CUB users would pass
/// it (CUB then uses 32-bit offsets), else as a 64-bit integer.
template <class F>
cudaError_t with_item_count(std::int64_t n, const F& f) {
  if (n <= INT_MAX) return f(static_cast<int>(n));
  return f(n);
}
}  // namespace

template <class T>
reduce_peer cub_sum(const T* x, std::int64_t n, T* out, cudaStream_t stream) {
  // Size the temporary storage once, outside what is timed.
  std::size_t bytes = 0;
  TALLY_CUDA(
      with_item_count(n, [&](auto count) { return cub::DeviceReduce::Sum(nullptr, bytes, x, out, count, stream); }));
  auto storage = detail::device_allocation(bytes);
  reduce_peer call;
  call.p.name = "cub";
  call.p.run = [=] {
    std::size_t size = bytes;  // CUB takes it by reference
    TALLY_CUDA(with_item_count(
        n, [&](auto count) { return cub::DeviceReduce::Sum(storage.get(), size, x, out, count, stream); }));
  };
  detail::device_result(call, out, stream);
  return call;
}

namespace {
/// i ↦ x[i]·y[i]: CUB reads both inputs through the index.
template <class T>
struct product_at {
  const T* x;
  const T* y;
  __host__ __device__ T operator()(std::int64_t i) const { return x[i] * y[i]; }
};
}  // namespace

template <class T>
reduce_peer cub_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream) {
  thrust::counting_iterator<std::int64_t> indices(0);
  std::size_t bytes = 0;
  TALLY_CUDA(with_item_count(n, [&](auto count) {
    return cub::DeviceReduce::TransformReduce(nullptr, bytes, indices, out, count, ::cuda::std::plus<>{},
                                              product_at<T>{x, y}, T(0), stream);
  }));
  auto storage = detail::device_allocation(bytes);
  reduce_peer call;
  call.p.name = "cub";
  call.p.run = [=] {
    std::size_t size = bytes;
    TALLY_CUDA(with_item_count(n, [&](auto count) {
      return cub::DeviceReduce::TransformReduce(storage.get(), size, indices, out, count, ::cuda::std::plus<>{},
                                                product_at<T>{x, y}, T(0), stream);
    }));
  };
  detail::device_result(call, out, stream);
  call.p.note = "TransformReduce over a counting iterator";
  return call;
}

template reduce_peer cub_sum<float>(const float*, std::int64_t, float*, cudaStream_t);
template reduce_peer cub_sum<double>(const double*, std::int64_t, double*, cudaStream_t);
template reduce_peer cub_sum<int>(const int*, std::int64_t, int*, cudaStream_t);
template reduce_peer cub_dot<float>(const float*, const float*, std::int64_t, float*, cudaStream_t);
template reduce_peer cub_dot<double>(const double*, const double*, std::int64_t, double*, cudaStream_t);

}  // namespace tally::bench
