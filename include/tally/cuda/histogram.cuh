// The GPU backend of histograms and scatter-reduce (histogram.hpp): picks a
// plan (dispatch/histogram_strategy.hpp), sizes the grid from occupancy and
// launches one kernel, in stream order, without waiting, except to report
// errors found on the device in checked mode (bad scatter indices, values
// outside the fixed-point contract), which reads a flag back.
//
// Scratch of one call, drawn from the workspace once (see call_scratch in
// histogram.hpp), after the workspace's zeroed words (error flags, the
// derived scale's maximum):
//   [partial rows of the shared_memory kernel][int64 sums][staged levels]
// Callers that draw before the plan exists (histogram_range's levels, the
// deterministic sums) reserve rows_reserve(bins, deterministic) for the rows.
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
#include "tally/cuda/kernels/histogram_partials.cuh"
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

/// Bytes of the deterministic int64 sums of `bins` bins (scratch layout above).
inline std::size_t sums_bytes(std::int64_t bins) { return (static_cast<std::size_t>(bins) * 8 + 255) / 256 * 256; }

/// Bytes reserved for partial rows by callers that draw the call's scratch
/// before the plan (histogram_range, deterministic calls): rows serve the
/// deterministic kernel (int64 bins) and packed counters (bins beyond
/// 32-bit counters in a block); other plans flush with atomics.
inline std::size_t rows_reserve(std::int64_t bins, bool deterministic) {
  const int sms = current_device_info().sm_count;
  std::size_t bytes = 0;
  if (deterministic) bytes = partials_reserve(bins, 8, sms);
  else if (padded_bytes(bins, 4) > static_cast<std::int64_t>(kMaxSharedBytes)) bytes = partials_reserve(bins, 2, sms);
  return (bytes + 255) / 256 * 256;
}

/// Where a call's partial rows go: `bytes` bytes at `rows` (16-byte aligned).
struct rows_region {
  void* rows = nullptr;
  std::size_t bytes = 0;
};

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

/// The privatised kernel for `plan`: distributed bins, or (counting) the
/// register-counter kernel for plan.registers counters.
template <bool Distributed, class Items, class Out, class Op>
auto privatized_kernel_for(int registers) {
  if constexpr (Distributed) {
    return hk::privatized_kernel<true, 0, Items, Out, Op>;
  } else {
    static_assert(Items::unit, "register counters count");
    switch (registers) {
      case 1: return hk::privatized_kernel<false, 1, Items, Out, Op>;
      case 2: return hk::privatized_kernel<false, 2, Items, Out, Op>;
      case 4: return hk::privatized_kernel<false, 4, Items, Out, Op>;
      default: return hk::privatized_kernel<false, 8, Items, Out, Op>;
    }
  }
}

/// Whether the shared_memory kernel writes rows (see launch_partials).
template <class Items, class Out>
bool writes_rows(const histogram_plan& plan) {
  if (plan.strategy != histogram_strategy::shared_memory || plan.registers > 0) return false;
  return plan.packed || (kernels::histogram::is_fixed_point_v<Items> && std::is_floating_point_v<Out>);
}

/// Launch shape of partials_kernel: blocks resident together (cooperative),
/// at most kMaxPrivatizedBlocksPerSm per SM, rows within `rows.bytes`.
struct partials_shape {
  int threads = kPrivatizedThreads;
  std::int64_t grid = 0;  ///< 0: the kernel cannot be resident on this device
};

template <class Kernel>
partials_shape shape_partials(Kernel kernel, const histogram_plan& plan, std::int64_t n, std::size_t rows_bytes,
                              const histogram_options& opts) {
  const device_info& dev = current_device_info();
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(plan.shared_bytes)));
  partials_shape shape;
  // Large rows: 1024-thread blocks, so fewer rows to write and read back.
  shape.threads = plan.row_bytes >= kWideRowBytes && !plan.thread_private ? 1024 : kPrivatizedThreads;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, shape.threads, plan.shared_bytes));
  if (per_sm == 0 && shape.threads > kPrivatizedThreads) {  // (thread_private plans are sized for kPrivatizedThreads)
    shape.threads = kPrivatizedThreads;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, shape.threads, plan.shared_bytes));
  }
  const std::int64_t resident =
      static_cast<std::int64_t>(std::min(per_sm, kMaxPrivatizedBlocksPerSm)) * dev.sm_count;
  std::int64_t grid = std::min(resident, grid_limit(n, shape.threads));
  // A forced grid too must be resident all at once (the kernel may have a
  // grid barrier), and have a row for every block.
  if (opts.grid_blocks > 0) grid = std::min<std::int64_t>(opts.grid_blocks, resident);
  if (rows_bytes > 0) grid = std::min<std::int64_t>(grid, static_cast<std::int64_t>(rows_bytes / plan.row_bytes));
  shape.grid = std::max<std::int64_t>(grid, resident > 0 ? 1 : 0);
  return shape;
}

/// Rows the shared_memory plan needs at most (a call that draws its own scratch).
inline std::size_t partials_bytes(const histogram_plan& plan) {
  const auto most = plan.row_bytes * static_cast<std::size_t>(current_device_info().sm_count) *
                    kMaxPrivatizedBlocksPerSm;
  return std::min(most, std::max(kPartialsCap, plan.row_bytes * current_device_info().sm_count));
}

/// Launches partials_kernel (packed counters when plan.packed), as a
/// cooperative grid when it writes rows (writes_rows). derive, headroom_bits
/// and scale_bits: deterministic calls (partials_params). Returns false when
/// the device cannot hold one block of it.
template <class Items, class Out, class Op>
bool launch_partials(const gpu_backend& gpu, const Items& items, Out* out, const Op& op, const histogram_plan& plan,
                     std::int64_t bins, hk::out_of_range_report report, const histogram_options& opts,
                     rows_region rows, hk::fixed_point_words* derive = nullptr, int headroom_bits = 0,
                     int scale_bits = 0) {
  const auto launch = [&](auto kernel) {
    const partials_shape shape = shape_partials(kernel, plan, items.n, rows.bytes, opts);
    if (shape.grid == 0) return false;
    // Rows and a grid barrier only where they pay or are needed: packed
    // counters (10^5 bins: 132 blocks × 10^5 flush atomics cost more than the
    // rows) and the deterministic kernel that converts to floating point
    // (every row must be summed first). Elsewhere each block flushes its bins
    // with coalesced global atomics, which measured faster than the barrier
    // (H100, int32 counts: 10^4 bins 36.3 µs flushing, 45.8 µs with rows).
    const bool with_rows = writes_rows<Items, Out>(plan);
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(shape.grid));
    config.blockDim = dim3(static_cast<unsigned>(shape.threads));
    config.dynamicSmemBytes = plan.shared_bytes;
    config.stream = gpu.stream;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    config.attrs = &attribute;
    config.numAttrs = with_rows ? 1 : 0;  // cooperative: all blocks resident for the barrier
    const hk::aggregation mode = plan.aggregate ? hk::aggregation::always : hk::aggregation::never;
    const hk::partials_params params{bins,          plan.copies, mode,          report,    with_rows ? rows.rows : nullptr,
                                     plan.stride,   derive,      headroom_bits, scale_bits,
                                     plan.thread_private};
    TALLY_CUDA(cudaLaunchKernelEx(&config, kernel, items, out, op, params));
    TALLY_CUDA_LAUNCHED("tally::kernels::histogram::partials_kernel");
    return true;
  };
  if constexpr (Items::unit) {
    if (plan.packed) return launch(hk::partials_kernel<true, Items, Out, Op>);
  }
  return launch(hk::partials_kernel<false, Items, Out, Op>);
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
  const hk::privatized_params params{bins, plan.cluster, mode, report};
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

/// The plan for scattering `items` into `bins` bins on the current device.
template <class Items, class Op>
histogram_plan plan_scatter(const Items& items, std::int64_t bins, const histogram_options& opts,
                            const char* function) {
  using S = kernels::histogram::stored_t<Items>;
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
  problem.cooperative = dev.cooperative_launch;
  problem.counting = Items::unit;
  return choose_histogram_plan(problem, opts.strategy, function);
}

/// The partial rows of a plan that writes them: in the caller's scratch
/// (which reserved rows_reserve(bins, deterministic) bytes right after the
/// zeroed words), or drawn now, which makes `scratch` the call's scratch.
/// Empty for plans without rows.
template <class Items, class Out>
rows_region rows_for(const gpu_backend& gpu, const histogram_plan& plan, std::int64_t bins, bool deterministic,
                     call_scratch& scratch) {
  if (!writes_rows<Items, Out>(plan)) return {};
  if (scratch) return {static_cast<char*>(scratch) + workspace::kZeroedBytes, rows_reserve(bins, deterministic)};
  const std::size_t bytes = partials_bytes(plan);
  scratch = draw_scratch(gpu, bytes);
  return {static_cast<char*>(scratch) + workspace::kZeroedBytes, bytes};
}

/// Throws the error for a forced strategy this device cannot launch.
[[noreturn]] inline void throw_cannot_launch(const char* function, histogram_strategy s) {
  throw_invalid_argument(function, "options.strategy",
                         std::string("is ") + to_string(s) + " but this device cannot launch it");
}

/// Reads back the first out-of-range position a checked call recorded and
/// throws for it (waits for the stream).
template <class Items>
void report_bad_index(const gpu_backend& gpu, const Items& items, std::int64_t bins, error_words* words,
                      const char* function) {
  unsigned long long position = 0;
  TALLY_CUDA(cudaMemcpyAsync(&position, &words->bad_position, sizeof(position), cudaMemcpyDeviceToHost, gpu.stream));
  TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  if (position == 0) return;
  TALLY_CUDA(cudaMemsetAsync(&words->bad_position, 0, sizeof(position), gpu.stream));
  const std::int64_t i = items.n - static_cast<std::int64_t>(position);
  typename Items::first_type index{};
  TALLY_CUDA(cudaMemcpyAsync(&index, items.a + i, sizeof(index), cudaMemcpyDeviceToHost, gpu.stream));
  TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  throw_bad_index(function, i, static_cast<long long>(index), bins);
}

}  // namespace gpu_histogram

template <class Out>
void fill_zero(const gpu_backend& gpu, Out* out, std::int64_t n) {
  if (n > 0) TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(n) * sizeof(Out), gpu.stream));
}

template <class L>
staged_levels<L> stage_levels(const gpu_backend& gpu, const L* levels, std::int64_t num_levels,
                              const histogram_options& opts) {
  using namespace gpu_histogram;
  const std::int64_t bins = num_levels - 1;
  const std::size_t before = rows_reserve(bins, opts.deterministic) + (opts.deterministic ? sums_bytes(bins) : 0);
  char* base = draw_scratch(gpu, before + static_cast<std::size_t>(num_levels) * sizeof(L));
  L* staged = reinterpret_cast<L*>(base + workspace::kZeroedBytes + before);
  TALLY_CUDA(cudaMemcpyAsync(staged, levels, static_cast<std::size_t>(num_levels) * sizeof(L),
                             cudaMemcpyHostToDevice, gpu.stream));
  return {staged, base};
}

template <class Items, class Out, class Op>
void execute_scatter(const gpu_backend& gpu, const Items& items, std::int64_t bins, Out* out, const Op& op,
                     const histogram_options& opts, const char* function, call_scratch scratch) {
  namespace hk = tally::kernels::histogram;
  using namespace gpu_histogram;
  histogram_plan plan = plan_scatter<Items, Op>(items, bins, opts, function);
  const rows_region rows = rows_for<Items, Out>(gpu, plan, bins, hk::is_fixed_point_v<Items>, scratch);
  const bool reporting = items.report_out_of_range && opts.checks == check_mode::checked;
  if (reporting && !scratch) scratch = draw_scratch(gpu, 0);
  error_words* words = reporting ? error_words_of(scratch) : nullptr;
  for (std::int64_t first = 0; first < items.n; first += kSliceElements) {
    const Items part = slice_of(items, first, std::min(kSliceElements, items.n - first));
    const hk::out_of_range_report report{words ? &words->bad_position : nullptr, first, items.n};
    bool launched = true;
    if (plan.strategy == histogram_strategy::shared_memory) {
      if (plan.registers == 0) {
        launched = launch_partials(gpu, part, out, op, plan, bins, report, opts, rows);
      } else if constexpr (Items::unit) {
        launched = launch_privatized<false>(gpu, part, out, op, plan, bins, report, opts);
      }
    } else if (plan.strategy == histogram_strategy::cluster_memory) {
      launched = launch_privatized<true>(gpu, part, out, op, plan, bins, report, opts);
    }
    if (!launched) {
      if (opts.strategy != histogram_strategy::automatic) throw_cannot_launch(function, opts.strategy);
      plan = plan_global(true, true);
    }
    if (plan.strategy == histogram_strategy::aggregated_atomics ||
        plan.strategy == histogram_strategy::plain_atomics)
      launch_global(gpu, part, out, op, plan, bins, report, opts);
  }
  if (opts.chosen) *opts.chosen = plan.strategy;
  // Checked mode only: wait for the flag. The unchecked mode never gets here.
  if (reporting) report_bad_index(gpu, items, bins, words, function);
}

template <class A, class B, class Key, class V>
void run_deterministic(const gpu_backend& gpu, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options& opts, const char* function,
                       call_scratch scratch) {
  namespace hk = tally::kernels::histogram;
  using namespace gpu_histogram;
  // Drawn once for the whole call (stage_levels may have drawn it already,
  // with room for the rows and the sums): execute_scatter below gets the same block.
  char* base = scratch ? static_cast<char*>(scratch) : draw_scratch(gpu, rows_reserve(bins, true) + sums_bytes(bins));
  error_words* words = error_words_of(base);
  const bool derive = opts.fixed_point_bits == kDeriveFixedPointScale;
  const int bits = derive ? 0 : opts.fixed_point_bits;
  const int headroom = fixed_point_headroom_bits(n);
  const auto finish = [&] {
    // Checked mode reads the flag back; the words are left zero either way.
    unsigned bad = 0;
    if (opts.checks == check_mode::checked) {
      TALLY_CUDA(cudaMemcpyAsync(&bad, &words->fixed.bad, sizeof(bad), cudaMemcpyDeviceToHost, gpu.stream));
    }
    TALLY_CUDA(cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream));
    if (opts.checks == check_mode::checked) {
      TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
      if (bad) throw_fixed_point_range(function, derive ? 0 : bits, n);
    }
  };

  // One launch when the bins fit a block: the kernel derives the scale,
  // sums the int64 rows and writes the floating-point output itself.
  {
    const auto quantize = fixed_point_value::with_bits(bits, headroom, &words->fixed.bad);
    scatter_items<A, B, Key, fixed_point_value> items{report_out_of_range, a, b, n, key, quantize};
    const histogram_plan plan = plan_scatter<decltype(items), plus>(items, bins, opts, function);
    if (plan.strategy == histogram_strategy::shared_memory && n <= kSliceElements) {
      const bool reporting = report_out_of_range && opts.checks == check_mode::checked;
      const hk::out_of_range_report report{reporting ? &words->bad_position : nullptr, 0, n};
      call_scratch drawn = base;
      if (launch_partials(gpu, items, out, plus{}, plan, bins, report, opts, rows_for<decltype(items), V>(gpu, plan, bins, true, drawn),
                          derive ? &words->fixed : nullptr, headroom, bits)) {
        if (opts.chosen) *opts.chosen = plan.strategy;
        try {
          if (reporting) report_bad_index(gpu, items, bins, words, function);
        } catch (...) {
          cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream);  // leave the zeroed bytes zero
          throw;
        }
        finish();
        return;
      }
      if (opts.strategy != histogram_strategy::automatic) throw_cannot_launch(function, opts.strategy);
    }
  }

  // Otherwise: exact int64 sums in scratch, then one conversion.
  auto* sums = reinterpret_cast<long long*>(base + workspace::kZeroedBytes + rows_reserve(bins, true));
  TALLY_CUDA(cudaMemsetAsync(sums, 0, static_cast<std::size_t>(bins) * sizeof(long long), gpu.stream));
  const int blocks = 4 * current_device_info().sm_count;
  const int* bits_on_device = nullptr;
  const double* scale_on_device = nullptr;
  if (derive) {
    hk::largest_magnitude_kernel<<<blocks, 256, 0, gpu.stream>>>(b, n, &words->fixed);
    TALLY_CUDA_LAUNCHED("tally::kernels::histogram::largest_magnitude_kernel");
    // The headroom is computed here on the host and passed down, so the
    // device never evaluates it (see fixed_point_headroom_bits).
    hk::derive_scale_kernel<><<<1, 1, 0, gpu.stream>>>(headroom, &words->fixed);
    TALLY_CUDA_LAUNCHED("tally::kernels::histogram::derive_scale_kernel");
    bits_on_device = &words->fixed.bits;
    scale_on_device = &words->fixed.scale;
  }
  auto quantize = fixed_point_value::with_bits(bits, headroom, &words->fixed.bad);
  quantize.scale_on_device = scale_on_device;
  scatter_items<A, B, Key, fixed_point_value> items{report_out_of_range, a, b, n, key, quantize};
  try {
    execute_scatter(gpu, items, bins, sums, plus{}, opts, function, base);
  } catch (...) {
    cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream);  // leave the zeroed bytes zero
    throw;
  }
  hk::fixed_point_finish_kernel<<<blocks, 256, 0, gpu.stream>>>(sums, bins, bits_on_device, bits, out);
  TALLY_CUDA_LAUNCHED("tally::kernels::histogram::fixed_point_finish_kernel");
  finish();
}

}  // namespace tally::detail
