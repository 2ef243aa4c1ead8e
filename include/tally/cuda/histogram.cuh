// The GPU backend of histograms and scatter-reduce (histogram.hpp; the hooks
// are described in core/scatter_calls.hpp). A call plans (dispatch/
// histogram_strategy.hpp), lays out and draws its scratch once (dispatch/
// histogram_scratch.hpp), and launches one kernel per slice of 2^31 elements
// (dispatch/histogram_launch.cuh), plus two small kernels around a
// deterministic sum whose bins do not fit a block; all in stream order,
// without waiting, except to report errors found on the device in checked
// mode (bad scatter indices, values outside the fixed-point contract), which
// reads the error words back -- unless histogram_options::errors is given,
// where they are copied for the caller on the device instead.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include <cuda_runtime.h>

#include "tally/core/scatter_calls.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/dispatch/histogram_launch.cuh"
#include "tally/cuda/dispatch/histogram_scratch.hpp"
#include "tally/cuda/dispatch/histogram_shapes.cuh"
#include "tally/cuda/dispatch/histogram_strategy.hpp"
#include "tally/cuda/dispatch/pointer_checks.hpp"
#include "tally/cuda/kernels/histogram_errors.cuh"
#include "tally/cuda/kernels/histogram_float_sums.cuh"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

namespace gpu_histogram {

/// The plan for scattering `items` into `bins` bins on the current device.
template <class Items, class Op>
histogram_plan plan_scatter(const Items& items, std::int64_t bins, const histogram_options& opts,
                            const char* function) {
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
  problem.cooperative = dev.cooperative_launch;
  problem.counting = Items::unit;
  return choose_histogram_plan(problem, opts.strategy, function);
}

/// Bytes of the hot-key table and its sample a plan needs (hot_keys with elements only).
inline std::size_t hot_table_bytes(const histogram_plan& plan, std::int64_t n) {
  return plan.strategy == histogram_strategy::hot_keys && n > 0
             ? (hk::kHotTableWords + hk::kHotSample) * sizeof(unsigned)
             : 0;
}

/// Bytes of the key's host tables to copy (histogram_range's levels), 0 for other keys.
template <class Items>
std::size_t staged_bytes(const Items& items) {
  if constexpr (is_staged_key_v<decltype(items.key)>) return items.n > 0 ? static_cast<std::size_t>(items.key.staged_bytes()) : 0;
  else return 0;
}

/// The items with their key's host tables copied to `scratch` in stream order.
template <class Items>
Items stage(const gpu_backend& gpu, Items items, const scatter_scratch& scratch) {
  if constexpr (is_staged_key_v<decltype(items.key)>) {
    if (items.n == 0) return items;
    using L = std::remove_cv_t<std::remove_pointer_t<decltype(items.key.levels)>>;
    TALLY_CUDA(cudaMemcpyAsync(scratch.levels, items.key.levels, static_cast<std::size_t>(items.key.staged_bytes()),
                               cudaMemcpyHostToDevice, gpu.stream));
    items.key = items.key.staged_at(static_cast<const L*>(scratch.levels));
  }
  return items;
}

template <class Items>
Items slice_of(const Items& items, std::int64_t first, std::int64_t count) {
  Items part = items;
  part.a += first;
  if constexpr (!Items::unit) part.b += first;
  part.n = count;
  return part;
}

/// Throws the error for a forced strategy this device cannot launch.
[[noreturn]] inline void throw_cannot_launch(const char* function, histogram_strategy s) {
  throw_invalid_argument(function, "options.strategy",
                         std::string("is ") + to_string(s) + " but this device cannot launch it");
}

/// Runs `plan` over every slice of `items` (scratch: the call's, for rows
/// and error words). Returns the strategy that ran.
template <class Items, class Out, class Op>
histogram_strategy scatter_slices(const gpu_backend& gpu, const Items& items, std::int64_t bins, Out* out,
                                  const Op& op, histogram_plan plan, const scatter_scratch& scratch, bool reporting,
                                  const histogram_options& opts, const char* function) {
  for (std::int64_t first = 0; first < items.n; first += kSliceElements) {
    const Items part = slice_of(items, first, std::min(kSliceElements, items.n - first));
    const hk::out_of_range_report report{reporting ? &scratch.words->bad_position : nullptr, first, items.n};
    bool launched = true;
    if (plan.strategy == histogram_strategy::shared_memory) {
      if (plan.registers == 0) {
        launched = launch_shared_memory(gpu, part, out, op, plan, bins, report, opts, scratch);
      } else if constexpr (Items::unit) {
        launched = launch_register_counts(gpu, part, out, op, plan, bins, report, opts);
      }
    } else if (plan.strategy == histogram_strategy::cluster_memory) {
      launched = launch_cluster_memory(gpu, part, out, op, plan, bins, report, opts);
    }
    if (!launched) {
      if (opts.strategy != histogram_strategy::automatic) throw_cannot_launch(function, opts.strategy);
      plan = plan_global(true, true);
    }
    if (plan.strategy == histogram_strategy::hot_keys)
      launch_hot_keys(gpu, part, out, op, bins, report, opts, scratch.hot);
    if (plan.strategy == histogram_strategy::aggregated_atomics ||
        plan.strategy == histogram_strategy::plain_atomics)
      launch_global_atomics(gpu, part, out, op, plan, bins, report, opts);
  }
  return plan.strategy;
}

/// What a checked call recorded in its error words.
struct recorded_errors {
  std::int64_t position;  ///< the first element (row) with a bad index, or -1
  long long index;        ///< that element's index (when position >= 0)
  bool fixed_point_bad;   ///< a value broke the fixed-point contract
};

/// Reads the error words back (waiting for the stream) and leaves them zero;
/// `index` (device memory, n entries) gives the bad element's index.
template <class Index>
recorded_errors read_recorded_errors(const gpu_backend& gpu, hk::error_words* words, const Index* index,
                                     std::int64_t n) {
  hk::error_words seen{};
  TALLY_CUDA(cudaMemcpyAsync(&seen, words, sizeof(seen), cudaMemcpyDeviceToHost, gpu.stream));
  TALLY_CUDA(cudaMemsetAsync(words, 0, sizeof(*words), gpu.stream));
  TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  const std::int64_t position = seen.bad_position != 0 ? n - static_cast<std::int64_t>(seen.bad_position) : -1;
  Index bad_index{};
  if (position >= 0) {
    TALLY_CUDA(cudaMemcpyAsync(&bad_index, index + position, sizeof(bad_index), cudaMemcpyDeviceToHost, gpu.stream));
    TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  }
  return {position, static_cast<long long>(bad_index), seen.fixed.bad != 0};
}

/// Ends a call that may have recorded errors in the error words: checked
/// calls report them (into opts.errors on the device, or by reading them
/// back and handing them to `throw_errors`, which throws as the caller names
/// its arguments), and every call leaves the words zero. reporting: bad
/// indices were recorded; deterministic: the fixed-point words were used.
template <class Index, class ThrowErrors>
void finish_reports(const gpu_backend& gpu, const scatter_scratch& scratch, const Index* index, std::int64_t n,
                    bool reporting, bool deterministic, const histogram_options& opts,
                    const ThrowErrors& throw_errors) {
  hk::error_words* words = scratch.words;
  if (opts.checks == check_mode::checked && opts.errors) {
    launch("launch of tally::kernels::histogram::publish_errors_kernel", launch_config(1, 1, 0, gpu.stream),
           hk::publish_errors_kernel<>, words, n, opts.errors);
    return;
  }
  if (opts.checks != check_mode::checked || !(reporting || deterministic)) {
    if (deterministic) TALLY_CUDA(cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream));
    return;
  }
  throw_errors(read_recorded_errors(gpu, words, index, n));
}

/// The errors of a histogram or scatter_reduce: throw_data_errors, a bad value
/// named `values`.
inline auto scatter_data_errors(const char* function, const char* values, const histogram_options& opts,
                                std::int64_t bins, std::int64_t n) {
  return [=, &opts](const recorded_errors& seen) {
    throw_data_errors(function, values, opts, seen.position, seen.index, bins, seen.fixed_point_bad, n);
  };
}

/// A checked call that reads its error words back waits for the stream,
/// which a stream being captured into a CUDA graph cannot do: refused before
/// anything is recorded, pointing at the form that does not wait.
inline void refuse_waiting_capture(const gpu_backend& gpu, const char* function) {
  if (stream_is_captured(gpu.stream))
    throw_invalid_argument(function, "options.errors",
                           "is null, so this checked call waits for the stream to report errors in the data, which "
                           "a stream being captured into a CUDA graph cannot do; give options.errors (device "
                           "memory, never waits) or check_mode::unchecked");
}

/// After a call failed part-way: its error words back to zero (best effort:
/// the call is already failing).
inline void clear_words(const gpu_backend& gpu, const scatter_scratch& scratch) {
  if (scratch.words) (void)cudaMemsetAsync(scratch.words, 0, sizeof(*scratch.words), gpu.stream);
}

/// execute_scatter, its data errors thrown by `throw_errors` (finish_reports).
/// Half and bfloat16 outputs (index_add's single columns; plus, items of
/// float values, no clear) are summed in a float scratch of `bins` values
/// (kernels/histogram_float_sums.cuh), then each reached element rounded once.
template <class Items, class V, class Op, class ThrowErrors>
void scatter_reporting(const gpu_backend& gpu, const Items& items, std::int64_t bins, V* out, const Op& op,
                       const histogram_options& opts, const char* function, bool clear,
                       const ThrowErrors& throw_errors) {
  constexpr bool through_float = is_low_precision_v<V>;
  using Out = std::conditional_t<through_float, float, V>;
  static_assert(!through_float || (std::is_same_v<Op, plus> && std::is_same_v<typename Items::value_type, float>));
  const histogram_plan plan = plan_scatter<Items, Op>(items, bins, opts, function);  // may throw: nothing written yet
  const bool reporting = items.report_out_of_range && opts.checks == check_mode::checked;
  if (reporting && !opts.errors) refuse_waiting_capture(gpu, function);
  scatter_scratch_needs needs;
  needs.words = reporting || (opts.checks == check_mode::checked && opts.errors);
  needs.rows = items.n > 0 && writes_rows<Items, Out>(plan) ? rows_bytes(plan) : 0;
  needs.sums = through_float && items.n > 0 ? static_cast<std::size_t>(bins) * sizeof(float) : 0;
  needs.hot = hot_table_bytes(plan, items.n);
  needs.levels = staged_bytes(items);
  const scatter_scratch scratch =
      carve_scatter_scratch(scratch_for(gpu), scatter_scratch_layout::of(needs), gpu.stream);
  try {
    const Items staged = stage(gpu, items, scratch);
    if (clear && bins > 0) TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(bins) * sizeof(V), gpu.stream));
    Out* target = nullptr;
    const int blocks = through_float ? 4 * current_device_info().sm_count : 0;
    if constexpr (through_float) {
      target = reinterpret_cast<float*>(static_cast<void*>(scratch.sums));
      if (items.n > 0 && bins > 0)
        launch("launch of tally::kernels::histogram::negative_zeros_kernel", launch_config(blocks, 256, 0, gpu.stream),
               hk::negative_zeros_kernel<>, target, bins);
    } else {
      target = out;
    }
    const histogram_strategy ran =
        scatter_slices(gpu, staged, bins, target, op, plan, scratch, reporting, opts, function);
    if constexpr (through_float) {
      if (items.n > 0 && bins > 0)
        launch("launch of tally::kernels::histogram::float_sums_finish_kernel",
               launch_config(blocks, 256, 0, gpu.stream), hk::float_sums_finish_kernel<V>,
               static_cast<const float*>(target), bins, out);
    }
    if (opts.chosen) *opts.chosen = ran;
  } catch (...) {
    clear_words(gpu, scratch);
    throw;
  }
  finish_reports(gpu, scratch, items.a, items.n, reporting, false, opts, throw_errors);
}

/// run_deterministic, its data errors thrown by `throw_errors` (finish_reports).
template <class A, class B, class Key, class V, class ThrowErrors>
void deterministic_reporting(const gpu_backend& gpu, const A* a, const B* b, std::int64_t n, std::int64_t bins,
                             Key key, V* out, bool report_out_of_range, const histogram_options& opts,
                             const char* function, bool clear, const ThrowErrors& throw_errors) {
  using Items = scatter_items<A, B, Key, fixed_point_value>;
  const bool derive = opts.fixed_point_bits == kDeriveFixedPointScale;
  const int bits = derive ? 0 : opts.fixed_point_bits;
  const int headroom = fixed_point_headroom_bits(n);
  const bool reporting = report_out_of_range && opts.checks == check_mode::checked;
  Items items{report_out_of_range, a, b, n, key, fixed_point_value::with_bits(bits, headroom, nullptr)};
  const histogram_plan plan = plan_scatter<Items, plus>(items, bins, opts, function);  // may throw
  if (opts.checks == check_mode::checked && !opts.errors) refuse_waiting_capture(gpu, function);
  // One launch when the bins fit a block: the kernel derives the scale, sums
  // the int64 rows and writes the floating-point output itself. Otherwise
  // (or when the device cannot hold that kernel): exact int64 sums in
  // scratch, then one conversion (always for half and bfloat16 outputs,
  // index_add's single columns, which the one-launch kernel does not write).
  constexpr bool float_out = std::is_floating_point_v<V>;
  const bool one_launch =
      float_out && plan.strategy == histogram_strategy::shared_memory && n > 0 && n <= kSliceElements;
  scatter_scratch_needs needs;
  needs.words = true;
  needs.rows = one_launch && writes_rows<Items, V>(plan) ? rows_bytes(plan) : 0;
  needs.sums = n > 0 ? static_cast<std::size_t>(bins) * sizeof(long long) : 0;
  needs.hot = hot_table_bytes(plan, n);
  needs.levels = staged_bytes(items);
  const scatter_scratch scratch =
      carve_scatter_scratch(scratch_for(gpu), scatter_scratch_layout::of(needs), gpu.stream);
  hk::error_words* words = scratch.words;
  try {
    items = stage(gpu, items, scratch);
    items.value.bad = &words->fixed.bad;
    if (clear && bins > 0) TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(bins) * sizeof(V), gpu.stream));
    bool done = n == 0;
    if constexpr (float_out) {
      if (one_launch) {
        const hk::out_of_range_report report{reporting ? &words->bad_position : nullptr, 0, n};
        done = launch_shared_memory(gpu, items, out, plus{}, plan, bins, report, opts, scratch,
                                    {derive ? &words->fixed : nullptr, headroom, bits});
        if (done && opts.chosen) *opts.chosen = plan.strategy;
        if (!done && opts.strategy != histogram_strategy::automatic) throw_cannot_launch(function, opts.strategy);
      }
    }
    if (!done) {
      TALLY_CUDA(cudaMemsetAsync(scratch.sums, 0, static_cast<std::size_t>(bins) * sizeof(long long), gpu.stream));
      const int blocks = 4 * current_device_info().sm_count;
      const int* bits_on_device = nullptr;
      if (derive) {
        launch("launch of tally::kernels::histogram::largest_magnitude_kernel", launch_config(blocks, 256, 0, gpu.stream),
               hk::largest_magnitude_kernel<B>, b, n, &words->fixed);
        // The headroom is computed here on the host and passed down, so the
        // device never evaluates it (see fixed_point_headroom_bits).
        launch("launch of tally::kernels::histogram::derive_scale_kernel", launch_config(1, 1, 0, gpu.stream),
               hk::derive_scale_kernel<>, headroom, &words->fixed);
        bits_on_device = &words->fixed.bits;
        items.value.scale_on_device = &words->fixed.scale;
      }
      const histogram_strategy ran =
          scatter_slices(gpu, items, bins, scratch.sums, plus{}, plan, scratch, reporting, opts, function);
      if (opts.chosen) *opts.chosen = ran;
      launch("launch of tally::kernels::histogram::fixed_point_finish_kernel", launch_config(blocks, 256, 0, gpu.stream),
             hk::fixed_point_finish_kernel<V>, static_cast<const long long*>(scratch.sums), bins, bits_on_device, bits,
             out);
    }
  } catch (...) {
    clear_words(gpu, scratch);
    throw;
  }
  finish_reports(gpu, scratch, a, n, reporting, true, opts, throw_errors);
}

}  // namespace gpu_histogram

template <class T>
void check_backend_memory(const gpu_backend&, const char* function, const char* argument, const T* p, std::int64_t n) {
  check_device_pointer(function, argument, p, n);
}

template <class Items, class Out, class Op>
void execute_scatter(const gpu_backend& gpu, const Items& items, std::int64_t bins, Out* out, const Op& op,
                     const histogram_options& opts, const char* function, bool clear) {
  gpu_histogram::scatter_reporting(gpu, items, bins, out, op, opts, function, clear,
                                   gpu_histogram::scatter_data_errors(function, nullptr, opts, bins, items.n));
}

template <class A, class B, class Key, class V>
void run_deterministic(const gpu_backend& gpu, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options& opts, const char* function,
                       const char* values, bool clear) {
  gpu_histogram::deterministic_reporting(gpu, a, b, n, bins, key, out, report_out_of_range, opts, function, clear,
                                         gpu_histogram::scatter_data_errors(function, values, opts, bins, n));
}

}  // namespace tally::detail
