// The kernels around a deterministic index_add (fixed-point sums in int64
// scratch, see index_add.hpp): the largest finite |src| (for the derived
// scale), the slots of a call whose sums are kept per first row, and the
// conversion of the exact sums into the output, each element rounded once.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/row_scatter.hpp"
#include "tally/core/types.hpp"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/kernels/index_add_common.cuh"

namespace tally::kernels::index_add {

/// words->largest_bits = max over every src element (rows with bad indices
/// included) of the bits of its finite |value| as a double. Grid-stride over
/// the rows' 16-byte chunks (kChunk<V> values a thread at a time: one
/// value a thread made this kernel instruction-bound, 2.2 ms for 10^9
/// bfloat16). Magnitudes of float, half and bfloat16 are compared as floats
/// and widened once at the end (exact: the same double as widening each).
template <class I, class V>
__global__ void __launch_bounds__(kThreads)
    largest_row_magnitude_kernel(::tally::detail::row_scatter<I, V> p, histogram::fixed_point_words* words) {
  constexpr int W = kChunk<V>;
  using M = std::conditional_t<std::is_same_v<V, double>, double, float>;
  using Bits = std::conditional_t<std::is_same_v<M, double>, unsigned long long, unsigned>;
  const std::int64_t chunks = (p.cols + W - 1) / W;  // a row's chunks
  const std::int64_t total = p.rows * chunks;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  Bits largest = 0;  // non-negative floating-point values order like their bit patterns
  if (q < total)
    for (element_walk at(q, step, chunks); q < total; q += step, at.advance()) {
      const std::int64_t c = at.col * W;
      const int count = p.cols - c < W ? static_cast<int>(p.cols - c) : W;
      V v[W]{};
      load_chunk(p.src + at.row * p.src_stride + c, count, v);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        const M m = fabs(convert<M>(v[e]));
        Bits bits;
        memcpy(&bits, &m, sizeof(M));
        if (e < count && isfinite(m)) largest = max(largest, bits);
      }
    }
  for (int offset = 16; offset > 0; offset /= 2) largest = max(largest, __shfl_down_sync(kFull, largest, offset));
  if ((threadIdx.x & 31) == 0 && largest != 0) {
    M m;
    memcpy(&m, &largest, sizeof(M));
    atomicMax(&words->largest_bits, static_cast<unsigned long long>(__double_as_longlong(static_cast<double>(m))));
  }
}

/// slot_of[k] = the first row whose index is k, for every k some row names
/// (slot_of starts all ones). Grid-stride over the rows.
template <class I>
__global__ void __launch_bounds__(kThreads)
    first_rows_kernel(const I* index, std::int64_t rows, std::int64_t out_rows, unsigned long long* slot_of) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < rows;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const auto k = static_cast<std::int64_t>(index[i]);
    if (k >= 0 && k < out_rows) atomicMin(slot_of + k, static_cast<unsigned long long>(i));
  }
}

/// out[key·out_stride + j] = out + (sums[slot·cols + j]·2^-s rounded once to
/// V), rounded once more, for every slot that holds a reached output row:
/// slot = key with touched[key] set (slot_of null), or slot = row r with
/// slot_of[index[r]] == r. s from *bits_on_device (derived) or `bits`.
/// Grid-stride over slots × cols.
template <class I, class V>
__global__ void __launch_bounds__(kThreads)
    fixed_point_rows_finish_kernel(::tally::detail::row_scatter<I, V> p, const long long* sums, std::int64_t slots,
                                   const unsigned* touched, const unsigned long long* slot_of,
                                   const int* bits_on_device, int bits, V* out) {
  const int s = bits_on_device ? *bits_on_device : bits;
  const std::int64_t total = slots * p.cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  for (element_walk at(e, step, p.cols); e < total; e += step, at.advance()) {
    const std::int64_t slot = at.row, j = at.col;
    std::int64_t key = slot;
    bool live;
    if (slot_of) {
      key = static_cast<std::int64_t>(p.index[slot]);
      live = key >= 0 && key < p.out_rows && slot_of[key] == static_cast<unsigned long long>(slot);
    } else {
      live = touched[slot] != 0;
    }
    if (live) {
      V* o = out + key * p.out_stride + j;
      *o = ::tally::detail::add_fixed_point(*o, sums[slot * p.cols + j], s);
    }
  }
}

}  // namespace tally::kernels::index_add
