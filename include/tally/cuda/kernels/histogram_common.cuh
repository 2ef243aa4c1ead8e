// What every scatter kernel shares: how out-of-range keys are recorded, the
// type the privatised bins are stored in, and the flush of a private bin to
// the output.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/operators.hpp"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

/// Where a kernel records out-of-range keys (scatter_reduce, checked mode):
/// *position = max over bad elements of total - (first + i), so the first
/// bad element of the whole call wins across launches. Null: not reporting.
struct out_of_range_report {
  unsigned long long* position;
  std::int64_t first;  ///< this launch's first element in the call
  std::int64_t total;  ///< elements in the call
  __device__ __forceinline__ void record(std::int64_t i) const {
    if (position) atomicMax(position, static_cast<unsigned long long>(total - (first + i)));
  }
};

/// Launch parameters of the register-counter and cluster kernels (uniform across the grid).
struct privatized_params {
  std::int64_t bins;
  int cluster;      ///< blocks per cluster (1: no cluster)
  aggregation mode;
  out_of_range_report report;
};

/// The stored type of the privatised bins: 32-bit counts for counting
/// (launches never exceed 2^32 elements), the value type otherwise.
template <class Items>
using stored_t = std::conditional_t<Items::unit, unsigned, typename Items::value_type>;

/// The flush contribution of a stored partial to the output.
template <class Items, class Out, class S, class Op>
__device__ __forceinline__ void flush_bin(Out* out, const S& s, const Op& op) {
  if constexpr (Items::unit) {
    if (s != 0) combine_atomically(out, static_cast<Out>(s), plus{});
  } else {
    if (!same_bits(s, op.template identity<S>())) combine_atomically(out, static_cast<Out>(s), op);
  }
}

template <class Items, class Op>
__device__ __forceinline__ stored_t<Items> stored_identity(const Op& op) {
  if constexpr (Items::unit) return 0u;
  else return op.template identity<stored_t<Items>>();
}

}  // namespace tally::kernels::histogram
