// The kernels around a deterministic index_add (fixed-point sums in int64
// scratch, see index_add.hpp): the largest finite |src| (for the derived
// scale), the slots of a call whose sums are kept per first row, and the
// conversion of the exact sums into the output, each element rounded once.
#pragma once

#include <cmath>
#include <cstdint>

#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/row_scatter.hpp"
#include "tally/core/types.hpp"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/kernels/index_add_common.cuh"

namespace tally::kernels::index_add {

/// words->largest_bits = max over every src element (rows with bad indices
/// included) of the bits of its finite |value| as a double. Grid-stride over
/// the rows × cols elements.
template <class I, class V>
__global__ void __launch_bounds__(kThreads)
    largest_row_magnitude_kernel(::tally::detail::row_scatter<I, V> p, histogram::fixed_point_words* words) {
  const std::int64_t total = p.rows * p.cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long largest = 0;
  if (e < total)
    for (element_walk at(e, step, p.cols); e < total; e += step, at.advance()) {
      const double v = fabs(convert<double>(p.src[at.row * p.src_stride + at.col]));
      if (isfinite(v)) largest = max(largest, static_cast<unsigned long long>(__double_as_longlong(v)));
    }
  // Non-negative doubles order like their bit patterns.
  for (int offset = 16; offset > 0; offset /= 2) largest = max(largest, __shfl_down_sync(kFull, largest, offset));
  if ((threadIdx.x & 31) == 0 && largest != 0) atomicMax(&words->largest_bits, largest);
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
      *o = ::tally::detail::add_rounded(*o, ::tally::detail::fixed_point_to<V>(sums[slot * p.cols + j], s));
    }
  }
}

}  // namespace tally::kernels::index_add
