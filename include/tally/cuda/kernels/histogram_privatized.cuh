// Scatter kernels that accumulate in shared memory, then flush to the output
// with one global atomic per non-identity bin (the replicated shared_memory
// kernel for larger bin counts is histogram_partials.cuh).
//
// Registers (strategy shared_memory, counting into at most 8 bins): each
// thread keeps its own counters in registers, counter b adding (key == b)
// for b < Registers (unrolled: no indexed register array, no shared-memory
// atomic and no match per element); at the end each warp sums its lanes'
// counters with __reduce_add_sync and lane 0 adds the sums to the block's
// shared counts, which the block flushes with one atomic per bin.
//
// Distributed (strategy cluster_memory): the bins are cut into C slices, one
// per block of the cluster, and each update goes to the owning block's
// shared memory through distributed shared memory (Hopper). One copy of the
// bins per cluster, so up to C × 227 KB of bins stay on chip.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "tally/cuda/kernels/histogram_elements.cuh"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

namespace cg = cooperative_groups;

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

/// Launch parameters of the privatised kernels (uniform across the grid).
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

/// Key -> the owning cluster block's bin, through distributed shared memory.
template <class S>
struct locate_peer {
  static constexpr bool shared = false;  // possibly a peer's memory: the generic atomics
  S* local;
  std::int64_t slice;
  __device__ S* operator()(std::int64_t key) const {
    const auto rank = static_cast<unsigned>(key / slice);
    return cg::this_cluster().map_shared_rank(local + (key - rank * slice), rank);
  }
};

/// Registers > 0: the register-counter variant (counting, one block, no
/// cluster; Registers >= p.bins). Else Distributed: one slice of the bins
/// per block of the cluster.
template <bool Distributed, int Registers, class Items, class Out, class Op>
__global__ void __launch_bounds__(1024) privatized_kernel(Items items, Out* out, Op op, privatized_params p) {
  static_assert((Registers > 0 && Items::unit && !Distributed) || (Registers == 0 && Distributed),
                "register counters (counting, one block) or distributed bins");
  using S = stored_t<Items>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  S* local = reinterpret_cast<S*>(shared_raw);
  const int C = p.cluster;
  // Bins held in this block: all of them, or one slice when distributed.
  const std::int64_t slice = Distributed ? (p.bins + C - 1) / C : p.bins;
  const S identity = stored_identity<Items>(op);
  for (std::int64_t k = threadIdx.x; k < slice; k += blockDim.x) local[k] = identity;
  if (C > 1) cg::this_cluster().sync();  // peers' bins ready before remote updates
  else __syncthreads();

  if constexpr (Registers > 0) {
    unsigned count[Registers];
#pragma unroll
    for (int b = 0; b < Registers; ++b) count[b] = 0;
    for_each_element(items, [&](bool has, std::int64_t i, std::int64_t key, const auto&) {
      const bool valid = has && key >= 0 && key < p.bins;
      if (has && !valid) p.report.record(i);
      const unsigned k = valid ? static_cast<unsigned>(key) : ~0u;
#pragma unroll
      for (int b = 0; b < Registers; ++b) count[b] += (k == static_cast<unsigned>(b)) ? 1u : 0u;
    });
    // Every lane gets here together (for_each_element visits in lockstep).
#pragma unroll
    for (int b = 0; b < Registers; ++b) {
      const unsigned total = __reduce_add_sync(0xffffffffu, count[b]);
      if ((threadIdx.x & 31) == 0 && total != 0 && b < p.bins) atomicAdd(local + b, total);
    }
  } else {
    atomic_sink<S, Op, Items::unit, locate_peer<S>> sink{{local, slice}, op, p.mode, p.bins <= 0xffffffffLL};
    for_each_element(items, [&](bool has, std::int64_t i, std::int64_t key, const auto& b) {
      const bool valid = has && key >= 0 && key < p.bins;
      if (has && !valid) p.report.record(i);
      typename Items::value_type v{};
      if constexpr (!Items::unit) {
        if (valid) v = items.value(b);
      }
      sink.add(valid, key, v);
    });
  }

  if (C > 1) cg::this_cluster().sync();  // every update, local or remote, done
  else __syncthreads();

  const std::int64_t first = Distributed ? static_cast<std::int64_t>(cg::this_cluster().block_rank()) * slice : 0;
  for (std::int64_t k = threadIdx.x; k < slice && first + k < p.bins; k += blockDim.x)
    flush_bin<Items>(out + first + k, local[k], op);
  // No barrier needed here: every remote update ended before the one above.
}

}  // namespace tally::kernels::histogram
