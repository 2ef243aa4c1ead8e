// The cluster_memory strategy: the bins are cut into C slices, one per block
// of a thread-block cluster, and each update goes to the owning block's
// shared memory through distributed shared memory (Hopper). One copy of the
// bins per cluster, so up to C × 227 KB of bins stay on chip; at the end each
// block flushes its slice with one global atomic per non-identity bin.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/histogram_elements.cuh"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

namespace cg = cooperative_groups;

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

/// Pre: launched in clusters of p.cluster blocks (1: one block holds every
/// bin); dynamic shared memory of ceil(bins / p.cluster) stored bins;
/// blockDim.x a multiple of 32.
template <class Items, class Out, class Op>
__global__ void __launch_bounds__(1024) cluster_memory_kernel(Items items, Out* out, Op op, privatized_params p) {
  using S = stored_t<Items>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  S* local = reinterpret_cast<S*>(shared_raw);
  const int C = p.cluster;
  const std::int64_t slice = (p.bins + C - 1) / C;  // bins held in this block
  const S identity = stored_identity<Items>(op);
  for (std::int64_t k = threadIdx.x; k < slice; k += blockDim.x) local[k] = identity;
  if (C > 1) cg::this_cluster().sync();  // peers' bins ready before remote updates
  else __syncthreads();

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

  if (C > 1) cg::this_cluster().sync();  // every update, local or remote, done
  else __syncthreads();

  const std::int64_t first = static_cast<std::int64_t>(cg::this_cluster().block_rank()) * slice;
  for (std::int64_t k = threadIdx.x; k < slice && first + k < p.bins; k += blockDim.x)
    flush_bin<Items>(out + first + k, local[k], op);
  // No barrier needed here: every remote update ended before the one above.
}

}  // namespace tally::kernels::histogram
