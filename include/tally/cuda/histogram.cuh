// The GPU backend of histograms and scatter-reduce (histogram.hpp): picks a
// plan (dispatch/histogram_strategy.hpp), sizes the grid from occupancy and
// launches one kernel, in stream order, without waiting, except to report
// errors found on the device in checked mode (bad scatter indices, values
// outside the fixed-point contract), which reads a flag back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/dispatch/histogram_strategy.hpp"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/kernels/histogram_global.cuh"
#include "tally/cuda/kernels/histogram_privatized.cuh"
#include "tally/cuda/workspace.hpp"
#include "tally/histogram.hpp"

namespace tally::detail {

namespace gpu_histogram {

namespace hk = tally::kernels::histogram;

/// Elements per launch: privatised counts are 32-bit.
inline constexpr std::int64_t kSliceElements = std::int64_t(1) << 31;
/// Fewest elements per thread worth a block (small inputs use fewer blocks).
inline constexpr std::int64_t kElementsPerThread = 16;

/// Scratch layout of one call (drawn once per call, see call_scratch in
/// histogram.hpp): the zeroed words hold the error flags and the derived
/// scale; then, for a deterministic call, the fixed-point sums of `bins`
/// bins; then, for histogram_range, the staged levels.
inline std::size_t sums_bytes(std::int64_t bins) { return (static_cast<std::size_t>(bins) * 8 + 255) / 256 * 256; }

/// The whole call's scratch, drawn from the workspace once. Never call
/// workspace::get twice in one algorithm call: growing frees the old block.
inline char* draw_scratch(const gpu_backend& gpu, std::size_t bytes) {
  return static_cast<char*>(scratch_for(gpu).get(bytes, gpu.stream));
}

struct error_words {
  unsigned long long bad_position;  ///< total - i of the first out-of-range element
  hk::fixed_point_words fixed;
};

inline error_words* error_words_of(void* scratch) { return static_cast<error_words*>(scratch); }

inline std::int64_t grid_limit(std::int64_t n, int threads) {
  return std::max<std::int64_t>(1, (n + threads * kElementsPerThread - 1) / (threads * kElementsPerThread));
}

template <class Items>
Items slice_of(const Items& items, std::int64_t first, std::int64_t count) {
  Items part = items;
  part.a += first;
  if constexpr (!Items::unit) part.b += first;
  part.n = count;
  return part;
}

/// The privatised kernel for `plan`: the register-counter variant when the
/// plan asks for per-thread counters (counting only), else the shared one.
template <bool Distributed, class Items, class Out, class Op>
auto privatized_kernel_for(int registers) {
  if constexpr (!Distributed && Items::unit) {
    switch (registers) {
      case 1: return hk::privatized_kernel<false, 1, Items, Out, Op>;
      case 2: return hk::privatized_kernel<false, 2, Items, Out, Op>;
      case 4: return hk::privatized_kernel<false, 4, Items, Out, Op>;
      case 8: return hk::privatized_kernel<false, 8, Items, Out, Op>;
      default: break;
    }
  }
  return hk::privatized_kernel<Distributed, 0, Items, Out, Op>;
}

/// Launches the privatised kernel for `plan`; returns false when the device
/// cannot hold one cluster of that shape (the caller falls back to global atomics).
template <bool Distributed, class Items, class Out, class Op>
bool launch_privatized(const gpu_backend& gpu, const Items& items, Out* out, const Op& op, histogram_plan& plan,
                       std::int64_t bins, hk::out_of_range_report report, const histogram_options& opts) {
  const auto kernel = privatized_kernel_for<Distributed, Items, Out, Op>(plan.registers);
  const device_info& dev = current_device_info();
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(plan.shared_bytes)));
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kPrivatizedThreads);
  config.dynamicSmemBytes = plan.shared_bytes;
  config.stream = gpu.stream;
  cudaLaunchAttribute attribute{};
  int cluster = plan.cluster;
  std::int64_t grid = 0;
  while (cluster > 1) {
    if (cluster > 8) TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    config.gridDim = dim3(cluster);
    int clusters = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    if (clusters > 0) {
      grid = static_cast<std::int64_t>(clusters) * cluster;
      break;
    }
    // Too large for this device: a smaller cluster, if the bins still fit.
    if (Distributed) {
      const auto slice = (bins + cluster / 2 - 1) / (cluster / 2);
      if (slice * static_cast<std::int64_t>(sizeof(hk::stored_t<Items>)) >
          static_cast<std::int64_t>(dev.shared_memory_per_block_optin) - 1024)
        return false;
      plan.shared_bytes = static_cast<std::size_t>(slice * sizeof(hk::stored_t<Items>));
      config.dynamicSmemBytes = plan.shared_bytes;
      TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(plan.shared_bytes)));
    }
    cluster /= 2;
  }
  if (cluster <= 1) {
    if (Distributed) return false;
    config.attrs = nullptr;
    config.numAttrs = 0;
    int per_sm = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPrivatizedThreads, plan.shared_bytes));
    if (per_sm == 0) return false;
    grid = static_cast<std::int64_t>(per_sm) * dev.sm_count;
  }
  plan.cluster = std::max(cluster, 1);
  // Small inputs: fewer blocks (whole clusters; a distributed grid keeps whole clusters too).
  grid = std::min(grid, (grid_limit(items.n, kPrivatizedThreads) + plan.cluster - 1) / plan.cluster * plan.cluster);
  if (opts.grid_blocks > 0) grid = (opts.grid_blocks + plan.cluster - 1) / plan.cluster * plan.cluster;
  config.gridDim = dim3(static_cast<unsigned>(grid));
  const hk::aggregation mode = plan.aggregate ? hk::aggregation::always : hk::aggregation::never;
  const hk::privatized_params params{bins, plan.copies, plan.cluster, mode, report};
  TALLY_CUDA(cudaLaunchKernelEx(&config, kernel, items, out, op, params));
  TALLY_CUDA_LAUNCHED("tally::kernels::histogram::privatized_kernel");
  return true;
}

template <class Items, class Out, class Op>
void launch_global(const gpu_backend& gpu, const Items& items, Out* out, const Op& op, const histogram_plan& plan,
                   std::int64_t bins, hk::out_of_range_report report, const histogram_options& opts) {
  const auto kernel = hk::global_kernel<Items, Out, Op>;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGlobalThreads, 0));
  std::int64_t grid = std::max(per_sm, 1) * static_cast<std::int64_t>(current_device_info().sm_count);
  grid = std::min(grid, grid_limit(items.n, kGlobalThreads));
  if (opts.grid_blocks > 0) grid = opts.grid_blocks;
  const hk::aggregation mode = !plan.aggregate ? hk::aggregation::never
                               : plan.sampled  ? hk::aggregation::sampled
                                               : hk::aggregation::always;
  kernel<<<static_cast<unsigned>(grid), kGlobalThreads, 0, gpu.stream>>>(items, out, op, bins, mode, report);
  TALLY_CUDA_LAUNCHED("tally::kernels::histogram::global_kernel");
}

}  // namespace gpu_histogram

template <class Out>
void fill_zero(const gpu_backend& gpu, Out* out, std::int64_t n) {
  if (n > 0) TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(n) * sizeof(Out), gpu.stream));
}

template <class L>
staged_levels<L> stage_levels(const gpu_backend& gpu, const L* levels, std::int64_t num_levels,
                              const histogram_options& opts) {
  const std::size_t reserve = opts.deterministic ? gpu_histogram::sums_bytes(num_levels - 1) : 0;
  char* base = gpu_histogram::draw_scratch(gpu, reserve + static_cast<std::size_t>(num_levels) * sizeof(L));
  L* staged = reinterpret_cast<L*>(base + workspace::kZeroedBytes + reserve);
  TALLY_CUDA(cudaMemcpyAsync(staged, levels, static_cast<std::size_t>(num_levels) * sizeof(L),
                             cudaMemcpyHostToDevice, gpu.stream));
  return {staged, base};
}

template <class Items, class Out, class Op>
void execute_scatter(const gpu_backend& gpu, const Items& items, std::int64_t bins, Out* out, const Op& op,
                     const histogram_options& opts, const char* function, call_scratch scratch) {
  namespace hk = tally::kernels::histogram;
  using namespace gpu_histogram;
  using S = hk::stored_t<Items>;
  const device_info& dev = current_device_info();
  histogram_problem problem;
  problem.n = items.n;
  problem.bins = bins;
  problem.slot_bytes = sizeof(S);
  problem.shared_atomics = !(sizeof(S) == 16 && !std::is_same_v<Op, plus>);  // 128-bit CAS: global only
  problem.sm_count = dev.sm_count;
  problem.shared_per_block = dev.shared_memory_per_block_optin;
  problem.shared_per_sm = dev.shared_memory_per_sm;
  problem.clusters = dev.major >= 9;
  problem.counting = Items::unit;
  histogram_plan plan = choose_histogram_plan(problem, opts.strategy, function);

  const bool reporting = items.report_out_of_range && opts.checks == check_mode::checked;
  if (reporting && !scratch) scratch = draw_scratch(gpu, 0);
  error_words* words = reporting ? error_words_of(scratch) : nullptr;
  for (std::int64_t first = 0; first < items.n; first += kSliceElements) {
    const Items part = slice_of(items, first, std::min(kSliceElements, items.n - first));
    const hk::out_of_range_report report{words ? &words->bad_position : nullptr, first, items.n};
    bool launched = true;
    if (plan.strategy == histogram_strategy::shared_memory)
      launched = launch_privatized<false>(gpu, part, out, op, plan, bins, report, opts);
    else if (plan.strategy == histogram_strategy::cluster_memory)
      launched = launch_privatized<true>(gpu, part, out, op, plan, bins, report, opts);
    if (!launched) {
      if (opts.strategy != histogram_strategy::automatic)
        throw_invalid_argument(function, "options.strategy",
                               std::string("is ") + to_string(opts.strategy) + " but this device cannot launch it");
      plan = plan_global(true, true);
    }
    if (plan.strategy == histogram_strategy::aggregated_atomics ||
        plan.strategy == histogram_strategy::plain_atomics)
      launch_global(gpu, part, out, op, plan, bins, report, opts);
  }
  if (opts.chosen) *opts.chosen = plan.strategy;

  if (reporting) {
    // Checked mode only: wait for the flag. The unchecked mode never gets here.
    unsigned long long position = 0;
    TALLY_CUDA(cudaMemcpyAsync(&position, &words->bad_position, sizeof(position), cudaMemcpyDeviceToHost, gpu.stream));
    TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
    if (position != 0) {
      TALLY_CUDA(cudaMemsetAsync(&words->bad_position, 0, sizeof(position), gpu.stream));
      const std::int64_t i = items.n - static_cast<std::int64_t>(position);
      typename Items::first_type index{};
      TALLY_CUDA(cudaMemcpyAsync(&index, items.a + i, sizeof(index), cudaMemcpyDeviceToHost, gpu.stream));
      TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
      throw_bad_index(function, i, static_cast<long long>(index), bins);
    }
  }
}

template <class A, class B, class Key, class V>
void run_deterministic(const gpu_backend& gpu, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options& opts, const char* function,
                       call_scratch scratch) {
  namespace hk = tally::kernels::histogram;
  using namespace gpu_histogram;
  // Drawn once for the whole call (stage_levels may have drawn it already,
  // with room for the sums): execute_scatter below gets the same block.
  char* base = scratch ? static_cast<char*>(scratch) : draw_scratch(gpu, sums_bytes(bins));
  error_words* words = error_words_of(base);
  auto* sums = reinterpret_cast<long long*>(base + workspace::kZeroedBytes);
  TALLY_CUDA(cudaMemsetAsync(sums, 0, static_cast<std::size_t>(bins) * sizeof(long long), gpu.stream));
  const int blocks = 4 * current_device_info().sm_count;

  const bool derive = opts.fixed_point_bits == kDeriveFixedPointScale;
  const int* bits_on_device = nullptr;
  if (derive) {
    hk::largest_magnitude_kernel<<<blocks, 256, 0, gpu.stream>>>(b, n, &words->fixed);
    TALLY_CUDA_LAUNCHED("tally::kernels::histogram::largest_magnitude_kernel");
    // The headroom is computed here on the host and passed down, so the
    // device never evaluates it (see fixed_point_headroom_bits).
    hk::derive_scale_kernel<><<<1, 1, 0, gpu.stream>>>(fixed_point_headroom_bits(n), &words->fixed);
    TALLY_CUDA_LAUNCHED("tally::kernels::histogram::derive_scale_kernel");
    bits_on_device = &words->fixed.bits;
  }
  const int bits = derive ? 0 : opts.fixed_point_bits;
  const fixed_point_value quantize{bits, bits_on_device, fixed_point_headroom_bits(n), &words->fixed.bad};
  scatter_items<A, B, Key, fixed_point_value> items{report_out_of_range, a, b, n, key, quantize};
  try {
    execute_scatter(gpu, items, bins, sums, plus{}, opts, function, base);
  } catch (...) {
    cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream);  // leave the zeroed bytes zero
    throw;
  }
  hk::fixed_point_finish_kernel<<<blocks, 256, 0, gpu.stream>>>(sums, bins, bits_on_device, bits, out);
  TALLY_CUDA_LAUNCHED("tally::kernels::histogram::fixed_point_finish_kernel");
  unsigned bad = 0;
  if (opts.checks == check_mode::checked) {
    TALLY_CUDA(cudaMemcpyAsync(&bad, &words->fixed.bad, sizeof(bad), cudaMemcpyDeviceToHost, gpu.stream));
  }
  TALLY_CUDA(cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream));
  if (opts.checks == check_mode::checked) {
    TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
    if (bad) throw_fixed_point_range(function, derive ? 0 : bits, n);
  }
}

}  // namespace tally::detail
