// The shared_memory strategy (bins that fit one block; counting into at most
// 8 bins uses histogram_registers.cuh instead), in up to three phases:
//
//   0. Deterministic calls with a derived scale only: the largest |value|
//      over the grid (atomicMax of its bits), then a grid barrier, after
//      which every block derives the same scale s.
//   1. Each block counts its share of the elements into private bins in
//      shared memory (`copies` copies for few bins, warp w using copy
//      w % copies; or packed 16-bit counters, histogram_packed.cuh). Then
//      either it flushes them with one coalesced global atomic per bin
//      (p.partials null: no barrier, an ordinary launch), or it writes them,
//      summed over its copies, as one row of `partials` in global memory.
//   2. Rows only (a cooperative launch, all blocks resident): after a grid
//      barrier the rows are summed bin by bin across the grid
//      (histogram_combine.cuh) and each total lands in the output once.
//
// Rows serve two cases (measured on H100, 10^7 samples): packed counters at
// 10^5 bins, where 132 blocks × 10^5 flush atomics took 77.6 µs against
// 60.0 µs with rows; and the deterministic kernel, which must see every
// row before converting a bin's int64 sum to floating point (phase 2 does
// it, so no int64 staging array and no conversion launch). For 32-bit bins
// the flush atomics win (10^4 bins: 36.3 µs against 45.8 µs with rows and
// the barrier).
#pragma once

#include <cooperative_groups.h>
#include <cuda/annotated_ptr>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tally/core/fixed_point.hpp"
#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/scatter.hpp"
#include "tally/cuda/device/warp_reduce.cuh"
#include "tally/cuda/kernels/histogram_combine.cuh"
#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/histogram_elements.cuh"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/kernels/histogram_packed.cuh"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

/// Launch parameters of shared_memory_kernel (uniform across the grid).
struct shared_memory_params {
  std::int64_t bins;
  int copies;           ///< private copies per block (1 when packed)
  aggregation mode;     ///< warp aggregation before shared-memory atomics
  out_of_range_report report;
  void* partials;       ///< gridDim.x rows of `stride` stored bins, 16-byte aligned
  std::int64_t stride;  ///< stored bins per row and per copy: bins rounded up to 16 bytes
  /// Deterministic calls: derive the fixed-point scale in phase 0 (null: the
  /// scale is the one in the items' fixed_point_value).
  fixed_point_words* derive;
  int headroom_bits;    ///< fixed_point_headroom_bits(n of the whole call)
  int scale_bits;       ///< fixed point with a given scale: s (the items hold 2^s)
  /// Few bins, summing values: every thread has its own bins in shared
  /// memory (bin k of thread t at private[k · blockDim.x + t], after the
  /// stride of block totals), updated without atomics; lanes touch
  /// consecutive words whatever their keys, so there are no bank conflicts
  /// and no contention, where shared atomics on one double or int64 per bin
  /// would retry CAS loops (sm_90 has no 64-bit shared atomic add).
  bool thread_private;
};

using ::tally::detail::is_fixed_point_v;

/// Stored bin type of a row: 16-bit when packed, else as the shared copies.
template <bool Packed, class Items>
using row_t = std::conditional_t<Packed, std::uint16_t, stored_t<Items>>;

/// Phase 0: words->largest_bits = max over the grid of the bits of |v| for
/// finite values (non-negative doubles order like their bits). Forward grid
/// strides, four loads in flight per thread, loaded with the L2 evict-last
/// hint so that the values read last are still in L2 when phase 1 revisits
/// them (for_each_element<true>).
template <class B>
__device__ __forceinline__ void grid_largest_magnitude(const B* values, std::int64_t n, fixed_point_words* words) {
  constexpr int U = 4;
  const cuda::annotated_ptr<const B, cuda::access_property::persisting> b(values);
  unsigned long long largest = 0;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i0 = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i0 < n; i0 += U * threads) {
    B v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = i0 + u * threads < n ? b[i0 + u * threads] : B(0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const double m = std::fabs(static_cast<double>(v[u]));
      if (isfinite(m)) largest = max(largest, static_cast<unsigned long long>(__double_as_longlong(m)));
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) largest = max(largest, __shfl_down_sync(0xffffffffu, largest, offset));
  if ((threadIdx.x & 31) == 0 && largest != 0) atomicMax(&words->largest_bits, largest);
}

/// Pre: cooperative launch (all blocks resident); dynamic shared memory of
/// copies × stride stored bins (Packed: stride / 2 words); blockDim.x a
/// multiple of 32. Packed requires counting items.
template <bool Packed, class Items, class Out, class Op>
__global__ void __launch_bounds__(1024) shared_memory_kernel(Items items, Out* out, Op op, shared_memory_params p) {
  static_assert(!Packed || Items::unit, "packed 16-bit counters count; they do not sum values");
  namespace cg = cooperative_groups;
  using S = stored_t<Items>;
  using Row = row_t<Packed, Items>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const cg::grid_group grid = cg::this_grid();

  int scale_bits = p.scale_bits;  // fixed point: s
  if constexpr (is_fixed_point_v<Items>) {
    if (p.derive) {
      grid_largest_magnitude(items.b, items.n, p.derive);
      grid.sync();
      scale_bits = ::tally::detail::derived_fixed_point_bits(
          __longlong_as_double(static_cast<long long>(__ldcg(&p.derive->largest_bits))), p.headroom_bits);
      items.value.scale = ldexp(1.0, scale_bits);
      items.value.scale_on_device = nullptr;
    }
  }

  // Phase 1: private bins.
  const int warp = threadIdx.x >> 5;
  const bool narrow = p.bins <= 0xffffffffLL;
  const auto visit_with = [&](auto& sink) {
    const auto visit = [&](bool has, std::int64_t i, std::int64_t key, const auto& b) {
      const bool valid = has && key >= 0 && key < p.bins;
      if (has && !valid) p.report.record(i);
      typename Items::value_type v{};
      if constexpr (!Items::unit) {
        if (valid) v = items.value(b);
      }
      sink.add(valid, key, v);
    };
    // After phase 0: revisit (backward, evict-first), see for_each_element.
    if constexpr (is_fixed_point_v<Items>) {
      if (p.derive) for_each_element<true>(items, visit);
      else for_each_element(items, visit);
    } else {
      for_each_element(items, visit);
    }
  };
  if constexpr (Packed) {
    auto* words = reinterpret_cast<unsigned*>(shared_raw);
    const std::int64_t count = p.stride / 2;
    for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) words[k] = 0;
    __syncthreads();
    packed_sink<Out> sink{{words, out, p.bins}};
    visit_with(sink);
    __syncthreads();
    // Packed counters always write rows (see the top of this file).
    auto* row = reinterpret_cast<unsigned*>(static_cast<Row*>(p.partials) + blockIdx.x * p.stride);
    for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) __stcg(row + k, words[k]);
  } else {
    S* local = reinterpret_cast<S*>(shared_raw);
    const S identity = stored_identity<Items>(op);
    const std::int64_t held = p.stride * p.copies + (p.thread_private ? p.bins * blockDim.x : 0);
    for (std::int64_t k = threadIdx.x; k < held; k += blockDim.x) local[k] = identity;
    __syncthreads();
    if (p.thread_private) {
      S* mine = local + p.stride + threadIdx.x;
      struct private_sink {
        S* mine;
        unsigned step;
        Op op;
        __device__ __forceinline__ void add(bool valid, std::int64_t key, const S& v) {
          if (valid) mine[key * step] = op(mine[key * step], v);
        }
      } sink{mine, blockDim.x, op};
      visit_with(sink);
      __syncthreads();
      // Block totals into local[0, bins): warp w sums bins w, w + warps, ...
      const int lane = threadIdx.x & 31;
      for (std::int64_t k = warp; k < p.bins; k += blockDim.x >> 5) {
        const S* bin = local + p.stride + k * blockDim.x;
        S total = identity;
        for (unsigned t = lane; t < blockDim.x; t += 32) total = op(total, bin[t]);
        total = device::warp_reduce(total, op);
        if (lane == 0) local[k] = total;
      }
    } else {
      atomic_sink<S, Op, Items::unit, locate_direct<S, true>> sink{{local + (warp % p.copies) * p.stride}, op, p.mode,
                                                                    narrow};
      visit_with(sink);
    }
    __syncthreads();
    if (p.partials == nullptr) {
      // Few bins: no rows; one global atomic per bin per block (no barrier).
      for (std::int64_t k = threadIdx.x; k < p.bins; k += blockDim.x) {
        S sum = local[k];
        for (int c = 1; c < p.copies; ++c) {
          if constexpr (Items::unit) sum += local[c * p.stride + k];
          else sum = op(sum, local[c * p.stride + k]);
        }
        flush_bin<Items>(out + k, sum, op);
      }
      return;
    }
    S* row = static_cast<S*>(p.partials) + blockIdx.x * p.stride;
    for (std::int64_t k = threadIdx.x; k < p.stride; k += blockDim.x) {
      S sum = local[k];
      for (int c = 1; c < p.copies; ++c) {
        if constexpr (Items::unit) sum += local[c * p.stride + k];
        else sum = op(sum, local[c * p.stride + k]);
      }
      row[k] = sum;
    }
  }
  grid.sync();
  if constexpr (is_fixed_point_v<Items>) {
    // Every block read it before the barrier above: leave the zeroed word zero.
    if (p.derive && blockIdx.x == 0 && threadIdx.x == 0) p.derive->largest_bits = 0;
  }

  // Phase 2: sum the rows into the output.
  const Row* rows = static_cast<const Row*>(p.partials);
  const int count = static_cast<int>(gridDim.x);
  if constexpr (Items::unit) {
    combine_rows(rows, count, p.stride, p.bins, 0u, plus{}, [&](std::int64_t k, unsigned total) {
      if (total != 0) out[k] = out[k] + static_cast<Out>(total);
    });
  } else if constexpr (is_fixed_point_v<Items> && std::is_floating_point_v<Out>) {
    // out[k] plus sum · 2^-s for every bin, as fixed_point_finish_kernel does.
    combine_rows(rows, count, p.stride, p.bins, 0ll, plus{}, [&](std::int64_t k, long long total) {
      out[k] = ::tally::detail::add_fixed_point(out[k], total, scale_bits);
    });
  } else {
    const S identity = stored_identity<Items>(op);
    combine_rows(rows, count, p.stride, p.bins, identity, op, [&](std::int64_t k, const S& total) {
      if (!same_bits(total, identity)) out[k] = op(out[k], static_cast<Out>(total));
    });
  }
}

}  // namespace tally::kernels::histogram
