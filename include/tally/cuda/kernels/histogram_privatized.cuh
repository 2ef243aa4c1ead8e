// Scatter kernels that accumulate in shared memory, then flush to the output
// with one global atomic per non-identity bin.
//
// Replicated (strategy shared_memory): every block holds the whole set of
// bins, `copies` times (warp w uses copy w % copies) so that few bins do not
// make every warp of the block contend for the same words. With a cluster of
// C blocks the flush is shared out: block r of the cluster sums slice r of
// the bins over all C blocks' copies (read through distributed shared
// memory) and flushes that slice, so the output sees one atomic per bin per
// cluster instead of per block.
//
// Registers (strategy shared_memory, counting into at most 16 bins): each
// thread keeps its own counters in registers, counter b adding (key == b)
// for b < Registers (unrolled: no indexed register array, no shared-memory
// atomic and no match per element); at the end each warp sums its lanes'
// counters with __reduce_add_sync and lane 0 adds the sums to the block's
// single shared copy, which is flushed as in the replicated kernel.
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
  int copies;       ///< private copies per block (replicated), 1 when distributed
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

/// Registers > 0: the register-counter variant (counting, not distributed;
/// Registers ≥ p.bins).
template <bool Distributed, int Registers, class Items, class Out, class Op>
__global__ void __launch_bounds__(1024) privatized_kernel(Items items, Out* out, Op op, privatized_params p) {
  static_assert(Registers == 0 || (Items::unit && !Distributed), "register counters: counting, replicated only");
  using S = stored_t<Items>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  S* local = reinterpret_cast<S*>(shared_raw);
  const int C = p.cluster;
  // Bins held per copy in this block: all of them, or one slice when distributed.
  const std::int64_t slice = Distributed ? (p.bins + C - 1) / C : p.bins;
  const S identity = stored_identity<Items>(op);
  for (std::int64_t k = threadIdx.x; k < slice * p.copies; k += blockDim.x) local[k] = identity;
  if (C > 1) cg::this_cluster().sync();  // peers' bins ready before remote updates
  else __syncthreads();

  const int warp = threadIdx.x >> 5;
  const auto visit_with = [&](auto& sink) {
    for_each_element(items, [&](bool has, std::int64_t i, std::int64_t key, const auto& b) {
      const bool valid = has && key >= 0 && key < p.bins;
      if (has && !valid) p.report.record(i);
      typename Items::value_type v{};
      if constexpr (!Items::unit) {
        if (valid) v = items.value(b);
      }
      sink.add(valid, key, v);
    });
  };
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
  } else if constexpr (Distributed) {
    struct locate_peer {
      S* local;
      std::int64_t slice;
      __device__ S* operator()(std::int64_t key) const {
        const auto rank = static_cast<unsigned>(key / slice);
        return cg::this_cluster().map_shared_rank(local + (key - rank * slice), rank);
      }
    };
    atomic_sink<S, Op, Items::unit, locate_peer> sink{{local, slice}, op, p.mode, p.bins <= 0xffffffffLL};
    visit_with(sink);
  } else {
    atomic_sink<S, Op, Items::unit, locate_direct<S>> sink{{local + (warp % p.copies) * slice}, op, p.mode,
                                                            p.bins <= 0xffffffffLL};
    visit_with(sink);
  }

  if (C > 1) cg::this_cluster().sync();
  else __syncthreads();

  if constexpr (Distributed) {
    const std::int64_t first = static_cast<std::int64_t>(cg::this_cluster().block_rank()) * slice;
    for (std::int64_t k = threadIdx.x; k < slice && first + k < p.bins; k += blockDim.x)
      flush_bin<Items>(out + first + k, local[k], op);
  } else {
    // Block r of the cluster flushes bins [r·share, (r+1)·share), summed over
    // every copy of every block in the cluster.
    const unsigned rank = C > 1 ? cg::this_cluster().block_rank() : 0;
    const std::int64_t share = (p.bins + C - 1) / C;
    const std::int64_t first = rank * share;
    const std::int64_t last = first + share < p.bins ? first + share : p.bins;
    for (std::int64_t k = first + threadIdx.x; k < last; k += blockDim.x) {
      S sum = identity;
      for (int q = 0; q < C; ++q) {
        const S* bins = C > 1 ? cg::this_cluster().map_shared_rank(local, q) : local;
        for (int c = 0; c < p.copies; ++c) {
          if constexpr (Items::unit) sum += bins[c * slice + k];
          else sum = op(sum, bins[c * slice + k]);
        }
      }
      flush_bin<Items>(out + k, sum, op);
    }
  }
  if (C > 1) cg::this_cluster().sync();  // peers may still read this block's bins
}

}  // namespace tally::kernels::histogram
