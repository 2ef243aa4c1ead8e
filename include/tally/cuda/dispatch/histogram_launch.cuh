// Launching the histogram kernel of a plan (one per strategy, kernels/
// histogram_*.cuh) over one slice of the elements. Each launcher shapes the
// grid (histogram_shapes.cuh), launches with cudaLaunchKernelEx and checks
// that launch's status, and returns false when the device cannot hold the
// kernel in that shape (the caller then falls back to global atomics).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "tally/core/histogram_options.hpp"
#include "tally/cuda/dispatch/histogram_scratch.hpp"
#include "tally/cuda/dispatch/histogram_shapes.cuh"
#include "tally/cuda/dispatch/histogram_strategy.hpp"
#include "tally/cuda/kernels/histogram_cluster_memory.cuh"
#include "tally/cuda/kernels/histogram_global_atomics.cuh"
#include "tally/cuda/kernels/histogram_hot_keys.cuh"
#include "tally/cuda/kernels/histogram_registers.cuh"
#include "tally/cuda/kernels/histogram_shared_memory.cuh"
#include "tally/cuda/launch.cuh"

namespace tally::detail {

namespace hk = tally::kernels::histogram;

/// Fixed-point arguments of a deterministic shared_memory launch
/// (hk::shared_memory_params): derive the scale in the kernel (words non-null),
/// or use the given scale_bits.
struct fixed_point_launch {
  hk::fixed_point_words* derive = nullptr;
  int headroom_bits = 0;
  int scale_bits = 0;
};

/// shared_memory_kernel (packed counters when plan.packed), as a cooperative
/// grid when it writes rows (writes_rows, into `rows`).
template <class Items, class Out, class Op>
bool launch_shared_memory(const gpu_backend& gpu, const Items& items, Out* out, const Op& op,
                          const histogram_plan& plan, std::int64_t bins, hk::out_of_range_report report,
                          const histogram_options& opts, const scatter_scratch& rows, fixed_point_launch fixed = {}) {
  const auto run = [&](auto kernel) {
    // Rows and a grid barrier only where they pay or are needed: packed
    // counters (10^5 bins: 132 blocks × 10^5 flush atomics cost more than the
    // rows) and the deterministic kernel that converts to floating point
    // (every row must be summed first). Elsewhere each block flushes its bins
    // with coalesced global atomics, which measured faster than the barrier
    // (H100, int32 counts: 10^4 bins 36.3 µs flushing, 45.8 µs with rows).
    const bool with_rows = writes_rows<Items, Out>(plan);
    const launch_shape shape = shape_shared_memory(kernel, plan, items.n, with_rows ? rows.rows_bytes : 0, opts);
    if (shape.grid == 0) return false;
    cudaLaunchConfig_t config = launch_config(dim3(static_cast<unsigned>(shape.grid)), dim3(shape.threads),
                                              shape.shared_bytes, gpu.stream);
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    config.attrs = &attribute;
    config.numAttrs = with_rows ? 1 : 0;  // cooperative: all blocks resident for the barrier
    const hk::aggregation mode = plan.aggregate ? hk::aggregation::always : hk::aggregation::never;
    const hk::shared_memory_params params{bins,        plan.copies, mode,
                                     report,      with_rows ? rows.rows : nullptr,
                                     plan.stride, fixed.derive, fixed.headroom_bits,
                                     fixed.scale_bits, plan.thread_private};
    launch("launch of tally::kernels::histogram::shared_memory_kernel", config, kernel, items, out, op, params);
    return true;
  };
  if constexpr (Items::unit) {
    if (plan.packed) return run(hk::shared_memory_kernel<true, Items, Out, Op>);
  }
  return run(hk::shared_memory_kernel<false, Items, Out, Op>);
}

/// register_counts_kernel for plan.registers counters (counting only).
template <class Items, class Out, class Op>
bool launch_register_counts(const gpu_backend& gpu, const Items& items, Out* out, const Op& op,
                            const histogram_plan& plan, std::int64_t bins, hk::out_of_range_report report,
                            const histogram_options& opts) {
  static_assert(Items::unit, "register counters count");
  const auto run = [&](auto kernel) {
    const launch_shape shape = shape_register_counts(kernel, plan, items.n, opts);
    if (shape.grid == 0) return false;
    const cudaLaunchConfig_t config = launch_config(dim3(static_cast<unsigned>(shape.grid)), dim3(shape.threads),
                                                    shape.shared_bytes, gpu.stream);
    const hk::privatized_params params{bins, 1, hk::aggregation::never, report};
    launch("launch of tally::kernels::histogram::register_counts_kernel", config, kernel, items, out, op, params);
    return true;
  };
  switch (plan.registers) {
    case 1: return run(hk::register_counts_kernel<1, Items, Out, Op>);
    case 2: return run(hk::register_counts_kernel<2, Items, Out, Op>);
    case 4: return run(hk::register_counts_kernel<4, Items, Out, Op>);
    default: return run(hk::register_counts_kernel<8, Items, Out, Op>);
  }
}

/// cluster_memory_kernel in clusters of plan.cluster blocks, or fewer where
/// the device cannot hold that many.
template <class Items, class Out, class Op>
bool launch_cluster_memory(const gpu_backend& gpu, const Items& items, Out* out, const Op& op,
                           const histogram_plan& plan, std::int64_t bins, hk::out_of_range_report report,
                           const histogram_options& opts) {
  const auto kernel = hk::cluster_memory_kernel<Items, Out, Op>;
  const launch_shape shape = shape_cluster_memory(kernel, plan, bins, sizeof(hk::stored_t<Items>), items.n, opts);
  if (shape.grid == 0) return false;
  cudaLaunchConfig_t config = launch_config(dim3(static_cast<unsigned>(shape.grid)), dim3(shape.threads),
                                            shape.shared_bytes, gpu.stream);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(shape.cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  const hk::aggregation mode = plan.aggregate ? hk::aggregation::always : hk::aggregation::never;
  const hk::privatized_params params{bins, shape.cluster, mode, report};
  launch("launch of tally::kernels::histogram::cluster_memory_kernel", config, kernel, items, out, op, params);
  return true;
}

/// global_atomics_kernel (aggregated_atomics or plain_atomics).
template <class Items, class Out, class Op>
void launch_global_atomics(const gpu_backend& gpu, const Items& items, Out* out, const Op& op,
                           const histogram_plan& plan, std::int64_t bins, hk::out_of_range_report report,
                           const histogram_options& opts) {
  const auto kernel = hk::global_atomics_kernel<Items, Out, Op>;
  const launch_shape shape = shape_global_atomics(kernel, items.n, opts);
  const hk::aggregation mode = !plan.aggregate ? hk::aggregation::never
                               : plan.sampled  ? hk::aggregation::sampled
                                               : hk::aggregation::always;
  const cudaLaunchConfig_t config =
      launch_config(dim3(static_cast<unsigned>(shape.grid)), dim3(shape.threads), 0, gpu.stream);
  launch("launch of tally::kernels::histogram::global_atomics_kernel", config, kernel, items, out, op, bins, mode,
         report);
}

/// The hot keys of `items` (sample_keys_kernel into hk::kHotSample words
/// after the table, find_hot_keys_kernel into the table's hk::kHotTableWords
/// words of scratch), then hot_keys_kernel. Pre: plan_hot_keys's conditions
/// (fits_hot_keys); items.n > 0.
template <class Items, class Out, class Op>
void launch_hot_keys(const gpu_backend& gpu, const Items& items, Out* out, const Op& op, std::int64_t bins,
                     hk::out_of_range_report report, const histogram_options& opts, unsigned* table) {
  unsigned* sample = table + hk::kHotTableWords;
  launch("launch of tally::kernels::histogram::sample_keys_kernel",
         launch_config(hk::kHotSample / hk::kSampleBlockThreads, hk::kSampleBlockThreads, 0, gpu.stream),
         hk::sample_keys_kernel<Items>, items, bins, sample);
  const auto find = hk::find_hot_keys_kernel<>;
  TALLY_CUDA(cudaFuncSetAttribute(find, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(hk::kSketchBytes)));
  launch("launch of tally::kernels::histogram::find_hot_keys_kernel",
         launch_config(1, hk::kHotSampleThreads, hk::kSketchBytes, gpu.stream), find,
         static_cast<const unsigned*>(sample), table);
  const auto kernel = hk::hot_keys_kernel<Items, Out, Op>;
  const std::size_t sums_bytes = hk::kHotSlots * sizeof(hk::stored_t<Items>);
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(sums_bytes)));
  const launch_shape shape = shape_hot_keys(kernel, items.n, sums_bytes, opts);
  const cudaLaunchConfig_t config =
      launch_config(dim3(static_cast<unsigned>(shape.grid)), dim3(shape.threads), sums_bytes, gpu.stream);
  launch("launch of tally::kernels::histogram::hot_keys_kernel", config, kernel, items, out, op,
         hk::hot_keys_params{bins, table, report});
}

}  // namespace tally::detail
