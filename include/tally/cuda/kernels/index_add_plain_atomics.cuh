// The plain_atomics strategy of index_add: one atomic per element, threads
// over the rows × cols elements in row-major order (consecutive threads take
// consecutive columns, so a warp's atomics are coalesced within a row). What
// PyTorch's index_add_ does; kept for comparison.
#pragma once

#include <cstdint>

#include "tally/core/row_scatter.hpp"
#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/index_add_common.cuh"

namespace tally::kernels::index_add {

/// out[index[i]·out_stride + j] ⊕= src[i·src_stride + j] for every element,
/// grid-stride. A row whose index lies outside [0, out_rows) is recorded
/// once (by the thread of its column 0) and skipped.
template <class I, class V, class Values, class Sink>
__global__ void __launch_bounds__(kThreads) plain_atomics_kernel(::tally::detail::row_scatter<I, V> p, Values values,
                                                                 Sink sink, histogram::out_of_range_report report) {
  const std::int64_t total = p.rows * p.cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  for (element_walk at(e, step, p.cols); e < total; e += step, at.advance()) {
    const std::int64_t i = at.row, j = at.col;
    const auto key = static_cast<std::int64_t>(p.index[i]);
    if (key >= 0 && key < p.out_rows) {
      if (j == 0) sink.touch(key);
      sink.add(key, j, values(p.src[i * p.src_stride + j]));
    } else if (j == 0) {
      report.record(i);
    }
  }
}

}  // namespace tally::kernels::index_add
