// Launching the index_add kernels (kernels/index_add_*.cuh): grids from
// occupancy (as many blocks as the device holds at once, fewer for small
// calls; histogram_options::grid_blocks forces a count), each launch checked.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "tally/core/histogram_options.hpp"
#include "tally/core/row_scatter.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/index_add_aggregated_atomics.cuh"
#include "tally/cuda/kernels/index_add_plain_atomics.cuh"
#include "tally/cuda/launch.cuh"

namespace tally::detail {

namespace iak = tally::kernels::index_add;

/// Blocks of iak::kThreads for `kernel` with `threads` threads' worth of
/// work: at most as many as are resident at once (the kernels are
/// grid-stride), at least one.
template <class Kernel>
unsigned index_add_grid(Kernel kernel, std::int64_t threads, const histogram_options& opts) {
  if (opts.grid_blocks > 0) return static_cast<unsigned>(opts.grid_blocks);
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, iak::kThreads, 0));
  const std::int64_t resident = std::max(per_sm, 1) * static_cast<std::int64_t>(current_device_info().sm_count);
  const std::int64_t wanted = (threads + iak::kThreads - 1) / iak::kThreads;
  return static_cast<unsigned>(std::clamp<std::int64_t>(wanted, 1, resident));
}

/// Threads' worth of work of the aggregated kernel: a warp per task of 32
/// rows × a tile of columns.
template <class V>
std::int64_t aggregated_threads(std::int64_t rows, std::int64_t cols) {
  const std::int64_t tile = iak::tile_columns<V>(cols);
  return (rows + 31) / 32 * ((cols + tile - 1) / tile) * 32;
}

/// Runs `strategy` (aggregated_atomics or plain_atomics) over every row of p.
/// Pre: p.rows > 0, p.cols > 0.
template <class I, class V, class Op, class Values, class Sink>
void launch_index_add(const gpu_backend& gpu, const row_scatter<I, V>& p, const Op& op, const Values& values,
                      const Sink& sink, histogram_strategy strategy, kernels::histogram::out_of_range_report report,
                      const histogram_options& opts) {
  if (strategy == histogram_strategy::plain_atomics) {
    const auto kernel = iak::plain_atomics_kernel<I, V, Values, Sink>;
    const unsigned grid = index_add_grid(kernel, p.rows * p.cols, opts);
    launch("launch of tally::kernels::index_add::plain_atomics_kernel",
           launch_config(dim3(grid), dim3(iak::kThreads), 0, gpu.stream), kernel, p, values, sink, report);
  } else {
    const auto kernel = iak::aggregated_rows_kernel<I, V, Op, Values, Sink>;
    const unsigned grid = index_add_grid(kernel, aggregated_threads<V>(p.rows, p.cols), opts);
    launch("launch of tally::kernels::index_add::aggregated_rows_kernel",
           launch_config(dim3(grid), dim3(iak::kThreads), 0, gpu.stream), kernel, p, op, values, sink, report);
  }
}

}  // namespace tally::detail
