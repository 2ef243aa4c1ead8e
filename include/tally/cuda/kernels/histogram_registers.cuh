// The shared_memory strategy for counting into at most 8 bins
// (plan.registers): each thread keeps its own counters in registers, counter
// b adding (key == b) for b < Registers (unrolled: no indexed register array,
// no shared-memory atomic and no match per element); at the end each warp
// sums its lanes' counters with __reduce_add_sync and lane 0 adds the sums to
// the block's shared counts, which the block flushes with one atomic per bin.
#pragma once

#include <cstdint>

#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/histogram_elements.cuh"

namespace tally::kernels::histogram {

/// Pre: counting items; Registers >= p.bins; dynamic shared memory of
/// p.bins counters; blockDim.x a multiple of 32. p.cluster and p.mode are unused.
template <int Registers, class Items, class Out, class Op>
__global__ void __launch_bounds__(1024) register_counts_kernel(Items items, Out* out, Op op, privatized_params p) {
  static_assert(Registers > 0 && Items::unit, "register counters count");
  using S = stored_t<Items>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  S* local = reinterpret_cast<S*>(shared_raw);
  const S identity = stored_identity<Items>(op);
  for (std::int64_t k = threadIdx.x; k < p.bins; k += blockDim.x) local[k] = identity;
  __syncthreads();

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
  __syncthreads();

  for (std::int64_t k = threadIdx.x; k < p.bins; k += blockDim.x) flush_bin<Items>(out + k, local[k], op);
}

}  // namespace tally::kernels::histogram
