// Thrust's reduce and inner_product on a stream. Thrust returns the value to
// the host, so each call waits for the stream: that is the cost a Thrust user
// pays, and what the table shows.
#include <memory>

#include <thrust/execution_policy.h>
#include <thrust/inner_product.h>
#include <thrust/reduce.h>

#include "compare.hpp"
#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"

namespace tally::bench {

namespace {
constexpr const char* kThrustNote = "returns to the host: each call waits for the stream";
}  // namespace

template <class T>
reduce_peer thrust_sum(const T* x, std::int64_t n, cudaStream_t stream) {
  auto last = std::make_shared<T>();
  reduce_peer call;
  call.p.name = "thrust";
  call.p.reset = [=] { *last = poisoned<T>(); };
  call.p.run = [=] { *last = thrust::reduce(thrust::cuda::par.on(stream), x, x + n, T(0)); };
  call.result = [=] { return static_cast<double>(*last); };
  call.p.note = kThrustNote;
  return call;
}

template <class T>
reduce_peer thrust_dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream) {
  auto last = std::make_shared<T>();
  reduce_peer call;
  call.p.name = "thrust";
  call.p.reset = [=] { *last = poisoned<T>(); };
  call.p.run = [=] { *last = thrust::inner_product(thrust::cuda::par.on(stream), x, x + n, y, T(0)); };
  call.result = [=] { return static_cast<double>(*last); };
  call.p.note = kThrustNote;
  return call;
}

template reduce_peer thrust_sum<float>(const float*, std::int64_t, cudaStream_t);
template reduce_peer thrust_sum<double>(const double*, std::int64_t, cudaStream_t);
template reduce_peer thrust_sum<int>(const int*, std::int64_t, cudaStream_t);
template reduce_peer thrust_dot<float>(const float*, const float*, std::int64_t, cudaStream_t);
template reduce_peer thrust_dot<double>(const double*, const double*, std::int64_t, cudaStream_t);

}  // namespace tally::bench
