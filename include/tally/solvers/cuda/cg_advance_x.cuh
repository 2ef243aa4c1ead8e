// x brought up to date a vector at a time: x += α·p with the update's
// rounding (detail::advanced_x), for the update and for the graph mode's
// march, which adds the α·p a lagging x still lacks (cg_control::lag_x).
#pragma once

#include "tally/cuda/device/vector_load.cuh"
#include "tally/solvers/detail/cg_rows.hpp"

namespace tally::solvers::kernels {

/// x[0, V) += α·p, each element by detail::advanced_x; moved whole where
/// `aligned` (device::vector_aligned<T, V> of the caller's x), element by
/// element otherwise. Plain loads: the kernels that call it write x. Pre:
/// no other thread reads or writes x[0, V) while it runs. Post: x[0, V)
/// holds the bits the row-by-row update gives.
template <class T, int V>
__device__ __forceinline__ void advance_x_vector(T* x, const device::vector_of<T, V>& p, T alpha, bool aligned) {
  auto value = aligned ? device::load_vector<T, V, true, false>(x) : device::load_vector<T, V, false, false>(x);
#pragma unroll
  for (int k = 0; k < V; ++k) value.v[k] = detail::advanced_x(value.v[k], p.v[k], alpha);
  if (aligned)
    device::store_vector<T, V, true>(x, value);
  else
    device::store_vector<T, V, false>(x, value);
}

}  // namespace tally::solvers::kernels
