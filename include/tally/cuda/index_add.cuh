// The GPU backend of index_add (index_add.hpp; the hooks are described in
// core/index_add_calls.hpp). A call draws its scratch once
// (dispatch/index_add_scratch.hpp) and launches one kernel
// (dispatch/index_add_launch.cuh), or, for sorted_rows, the key pass, CUB's
// radix sort and the run kernel (kernels/index_add_sorted.cuh); a
// deterministic call adds the kernels around its int64 sums
// (kernels/index_add_fixed_point.cuh), or, for ordered sums, the sorted
// runs' two finishing passes (kernels/index_add_ordered.cuh). Single-column
// sums under the automatic strategy are scatter-adds and run as the histogram
// family does (cuda/histogram.cuh). All in stream
// order, without waiting, except to report errors found on the device in
// checked mode (bad indices, values outside the fixed-point contract), which
// reads the error words back -- unless histogram_options::errors is given,
// where they are copied for the caller on the device instead.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include "tally/core/fixed_point.hpp"
#include "tally/core/index_add_calls.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/dispatch/index_add_launch.cuh"
#include "tally/cuda/dispatch/index_add_scratch.hpp"
#include "tally/cuda/histogram.cuh"
#include "tally/cuda/kernels/histogram_errors.cuh"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"
#include "tally/cuda/kernels/index_add_fixed_point.cuh"
#include "tally/cuda/kernels/index_add_ordered.cuh"
#include "tally/cuda/kernels/index_add_sorted.cuh"
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

namespace gpu_index_add {

/// The strategy that runs (core/index_add_calls.hpp has rejected the ones
/// index_add does not have): automatic takes sorted_rows where it fits and
/// pays (core/index_add_sums.hpp), warp-aggregated atomics elsewhere. A
/// forced sorted_rows the call cannot take is an error naming
/// options.strategy.
template <class I, class V>
histogram_strategy strategy_of(const row_scatter<I, V>& p, const histogram_options& opts) {
  switch (opts.strategy) {
    case histogram_strategy::plain_atomics: return histogram_strategy::plain_atomics;
    case histogram_strategy::sorted_rows:
      if (!sorted_rows_fit(p.rows, p.out_rows))
        throw_invalid_argument(kIndexAdd, "options.strategy",
                               "is sorted_rows, which needs rows <= 2^32 - 1 and out_rows < 2^32 - 1 (got rows = " +
                                   std::to_string(p.rows) + ", out_rows = " + std::to_string(p.out_rows) + ")");
      return histogram_strategy::sorted_rows;
    case histogram_strategy::automatic:
      if (p.out_rows > 0 && sorted_rows_fit(p.rows, p.out_rows) &&
          sorted_rows_pay(p.rows, p.cols, sizeof(V)))
        return histogram_strategy::sorted_rows;
      return histogram_strategy::aggregated_atomics;
    default: return histogram_strategy::aggregated_atomics;
  }
}

/// The bits a sorted_rows sort needs: those of out_rows (the mark of a row
/// out of range), at least one.
inline int sort_end_bit(std::int64_t out_rows) {
  return std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(out_rows))));
}

/// Bytes of CUB's temporary storage for sorting `rows` keys.
inline std::size_t sort_temp_bytes(std::int64_t rows, int end_bit, cudaStream_t stream) {
  std::size_t bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const unsigned*>(nullptr),
                                             static_cast<unsigned*>(nullptr), static_cast<const unsigned*>(nullptr),
                                             static_cast<unsigned*>(nullptr), static_cast<std::uint32_t>(rows), 0,
                                             end_bit, stream),
             "cub::DeviceRadixSort::SortPairs (index_add sorted_rows, sizing)");
  return bytes;
}

/// sorted_rows' first steps: keys and row numbers (rows out of range
/// recorded, keyed out_rows), then their radix sort (CUB) into scratch.keys[1]
/// and scratch.rows_of[1]. Pre: p.rows > 0, sorted_rows_fit.
template <class I, class V>
void sort_rows_by_key(const gpu_backend& gpu, const row_scatter<I, V>& p, const sorted_rows_scratch& scratch,
                      std::size_t temp_bytes, const index_add_options& opts) {
  const kernels::histogram::out_of_range_report report{p.report_out_of_range ? &scratch.words->bad_position : nullptr,
                                                       0, p.rows};
  const auto keys = iak::sort_keys_kernel<I>;
  launch("launch of tally::kernels::index_add::sort_keys_kernel",
         launch_config(dim3(index_add_grid(keys, p.rows, opts)), dim3(iak::kThreads), 0, gpu.stream), keys, p.index,
         p.rows, p.out_rows, scratch.keys[0], scratch.rows_of[0], report);
  std::size_t bytes = temp_bytes;
  check_cuda(cub::DeviceRadixSort::SortPairs(scratch.temp, bytes, scratch.keys[0], scratch.keys[1],
                                             scratch.rows_of[0], scratch.rows_of[1],
                                             static_cast<std::uint32_t>(p.rows), 0, sort_end_bit(p.out_rows),
                                             gpu.stream),
             "cub::DeviceRadixSort::SortPairs (index_add sorted_rows)");
}

/// The run kernel (kernels/index_add_sorted.cuh) over the sorted rows.
template <class I, class V, class Runs>
void launch_sorted_runs(const gpu_backend& gpu, const row_scatter<I, V>& p, const sorted_rows_scratch& scratch,
                        const Runs& runs, const index_add_options& opts) {
  const int group = iak::sorted_group<V>(p.cols);
  auto kernel = iak::sorted_rows_kernel<I, V, Runs, iak::kSortedUnroll>;
  if constexpr (sizeof(V) == 2) {  // wider values never take the narrow unroll: no kernel built for it
    if (iak::sorted_unroll<V>(group) == iak::kSortedUnrollNarrowValues)
      kernel = iak::sorted_rows_kernel<I, V, Runs, iak::kSortedUnrollNarrowValues>;
  }
  const std::int64_t tiles = iak::sorted_tiles<V>(p.cols, group);
  launch("launch of tally::kernels::index_add::sorted_rows_kernel",
         launch_config(dim3(index_add_grid(kernel, iak::sorted_tasks(p.rows) * tiles * group, opts)),
                       dim3(iak::kThreads), 0, gpu.stream),
         kernel, p, static_cast<const unsigned*>(scratch.keys[1]), static_cast<const unsigned*>(scratch.rows_of[1]),
         runs, group);
}

/// A deterministic call's quantisation: the scale given, or derived on the
/// device from the largest |src| (every row, bad indices included).
struct fixed_point_setup {
  fixed_point_value quantize;
  const int* bits_on_device = nullptr;  ///< derived: the scale's bits
  int bits = 0;                         ///< given: the scale's bits
};

template <class I, class V>
fixed_point_setup prepare_fixed_point(const gpu_backend& gpu, const row_scatter<I, V>& p,
                                      kernels::histogram::error_words* words, const index_add_options& opts) {
  namespace hk = kernels::histogram;
  const bool derive = opts.fixed_point_bits == kDeriveFixedPointScale;
  fixed_point_setup f;
  f.bits = derive ? 0 : opts.fixed_point_bits;
  // The headroom is computed here on the host and passed down, so the
  // device never evaluates it (see fixed_point_headroom_bits).
  const int headroom = fixed_point_headroom_bits(p.rows);
  f.quantize = fixed_point_value::with_bits(f.bits, headroom, &words->fixed.bad);
  if (derive) {
    const auto largest = iak::largest_row_magnitude_kernel<I, V>;
    launch("launch of tally::kernels::index_add::largest_row_magnitude_kernel",
           launch_config(dim3(index_add_grid(largest, p.rows * ((p.cols + iak::kChunk<V> - 1) / iak::kChunk<V>), opts)),
                         dim3(iak::kThreads), 0, gpu.stream),
           largest, p, &words->fixed);
    launch("launch of tally::kernels::histogram::derive_scale_kernel", launch_config(1, 1, 0, gpu.stream),
           hk::derive_scale_kernel<>, headroom, &words->fixed);
    f.bits_on_device = &words->fixed.bits;
    f.quantize.scale_on_device = &words->fixed.scale;
  }
  return f;
}

/// Ends a call: a checked call reports what its error words recorded (into
/// opts.errors on the device, or by reading them back and throwing), and
/// every call leaves the words zero. words: null when the call drew none.
template <class I, class V>
void finish_reports(const gpu_backend& gpu, kernels::histogram::error_words* words, const row_scatter<I, V>& p,
                    bool deterministic, const histogram_options& opts) {
  namespace hk = kernels::histogram;
  const bool checked = p.report_out_of_range;
  if (checked && opts.errors) {
    launch("launch of tally::kernels::histogram::publish_errors_kernel", launch_config(1, 1, 0, gpu.stream),
           hk::publish_errors_kernel<>, words, p.rows, opts.errors);
    return;
  }
  if (words == nullptr) return;
  if (!checked) {  // nothing was recorded but the fixed-point words
    if (deterministic) TALLY_CUDA(cudaMemsetAsync(&words->fixed, 0, sizeof(words->fixed), gpu.stream));
    return;
  }
  const auto seen = gpu_histogram::read_recorded_errors(gpu, words, p.index, p.rows);
  throw_index_add_data_errors(opts, seen.position, seen.index, p.out_rows, seen.fixed_point_bad, p.rows);
}

/// After a call failed part-way: its error words back to zero (best effort:
/// the call is already failing).
inline void clear_words(const gpu_backend& gpu, kernels::histogram::error_words* words) {
  if (words) (void)cudaMemsetAsync(words, 0, sizeof(*words), gpu.stream);
}

/// Whether a sum is scatter_reduce's problem in all but name: one column,
/// both strides 1, the automatic strategy. Such calls go through the
/// histogram family's planner (dispatch/histogram_strategy.hpp), whose
/// hot_keys strategy sums the keys a sample finds frequent in each block's
/// shared memory -- warp groups alone
/// still send a key that takes half the rows 1/16 of those rows' atomics,
/// all on one address (H100, 994 M float rows, half of them on one key:
/// 56 ms) -- and whose shared_memory strategy keeps up to ~57K outputs in a
/// block. Decided from sizes and options alone.
template <class I, class V>
bool single_column_scatter(const row_scatter<I, V>& p, const histogram_options& opts) {
  return p.rows > 0 && p.cols == 1 && p.src_stride == 1 && p.out_stride == 1 &&
         opts.strategy == histogram_strategy::automatic;
}

/// A single_column_scatter call through the histogram family (its plain or
/// deterministic sum), with index_add's error reports; half and bfloat16 plain
/// sums accumulate in float and round once an element.
template <class I, class V>
void scatter_single_column(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out, bool deterministic,
                           const index_add_options& opts) {
  const auto throw_errors = [&](const gpu_histogram::recorded_errors& seen) {
    throw_index_add_data_errors(opts, seen.position, seen.index, p.out_rows, seen.fixed_point_bad, p.rows);
  };
  if (deterministic) {
    gpu_histogram::deterministic_reporting(gpu, p.index, p.src, p.rows, p.out_rows, index_key{}, out,
                                           p.report_out_of_range, opts, kIndexAdd, false, throw_errors);
  } else {  // plain sums; half and bfloat16 accumulate in float (scatter_reporting)
    using Acc = default_accumulator_t<V>;
    const scatter_items<I, V, index_key, plain_value<Acc>> items{p.report_out_of_range, p.index, p.src, p.rows, {}, {}};
    gpu_histogram::scatter_reporting(gpu, items, p.out_rows, out, plus{}, opts, kIndexAdd, false, throw_errors);
  }
}

}  // namespace gpu_index_add

template <class I, class V, class Op>
void execute_index_add(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out, const Op& op,
                       const index_add_options& opts) {
  using namespace gpu_index_add;
  if constexpr (std::is_same_v<Op, plus>) {
    if (single_column_scatter(p, opts)) return scatter_single_column(gpu, p, out, false, opts);
  }
  const histogram_strategy strategy = strategy_of(p, opts);
  const bool checked = p.report_out_of_range;
  if (checked && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const bool work = p.rows > 0 && p.cols > 0;
  if (work && strategy == histogram_strategy::sorted_rows) {
    const sorted_rows_scratch scratch = carve_sorted_rows_scratch(
        scratch_for(gpu), p.rows, sort_temp_bytes(p.rows, sort_end_bit(p.out_rows), gpu.stream), 0, gpu.stream);
    try {
      sort_rows_by_key(gpu, p, scratch, scratch.temp_bytes, opts);
      const iak::out_sink<V, Op> sink{out, p.out_stride, p.out_rows, p.cols, op};
      launch_sorted_runs(gpu, p, scratch, iak::plain_runs<V, Op>{op, out, p.out_stride, sink}, opts);
      if (opts.chosen) *opts.chosen = strategy;
    } catch (...) {
      clear_words(gpu, scratch.words);
      throw;
    }
    finish_reports(gpu, scratch.words, p, false, opts);
    return;
  }
  const index_add_scratch scratch = carve_index_add_scratch(scratch_for(gpu), work && checked, {}, gpu.stream);
  try {
    if (work) {
      using Acc = default_accumulator_t<V>;
      const kernels::histogram::out_of_range_report report{checked ? &scratch.words->bad_position : nullptr, 0, p.rows};
      const iak::out_sink<V, Op> sink{out, p.out_stride, p.out_rows, p.cols, op};
      launch_index_add(gpu, p, op, iak::plain_values<Acc>{}, sink, strategy, report, opts);
    }
    if (opts.chosen) *opts.chosen = strategy;
  } catch (...) {
    clear_words(gpu, scratch.words);
    throw;
  }
  finish_reports(gpu, scratch.words, p, false, opts);
}

/// Deterministic sorted_rows: the sort, the runs summed in int64 fixed point
/// (owned runs applied at once, pieces of shared runs into their slots), then
/// the slots applied. Pre: p.rows > 0, p.cols > 0, sorted_rows_fit.
template <class I, class V>
void run_sorted_deterministic(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out,
                              const index_add_options& opts) {
  using namespace gpu_index_add;
  const std::int64_t tasks = iak::sorted_tasks(p.rows);
  const std::size_t sums_bytes = checked_bytes(static_cast<std::uint64_t>(tasks), static_cast<std::uint64_t>(p.cols) * 8, 0);
  const sorted_rows_scratch scratch =
      carve_sorted_rows_scratch(scratch_for(gpu), p.rows, sort_temp_bytes(p.rows, sort_end_bit(p.out_rows), gpu.stream),
                                sums_bytes, gpu.stream);
  try {
    const fixed_point_setup f = prepare_fixed_point(gpu, p, scratch.words, opts);
    sort_rows_by_key(gpu, p, scratch, scratch.temp_bytes, opts);
    TALLY_CUDA(cudaMemsetAsync(scratch.sums, 0, sums_bytes, gpu.stream));
    launch_sorted_runs(gpu, p, scratch,
                       iak::fixed_point_runs<V>{iak::fixed_point_values{f.quantize}, out, p.out_stride, scratch.sums,
                                                p.cols, f.bits_on_device, f.bits},
                       opts);
    const auto finish = iak::sorted_pieces_finish_kernel<I, V>;
    launch("launch of tally::kernels::index_add::sorted_pieces_finish_kernel",
           launch_config(dim3(index_add_grid(finish, tasks * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
           finish, p, static_cast<const unsigned*>(scratch.keys[1]),
           static_cast<const long long*>(static_cast<void*>(scratch.sums)), f.bits_on_device, f.bits, out);
    if (opts.chosen) *opts.chosen = histogram_strategy::sorted_rows;
  } catch (...) {
    clear_words(gpu, scratch.words);
    throw;
  }
  finish_reports(gpu, scratch.words, p, true, opts);
}

/// Ordered sums (index_add_sums::ordered): the sort, the runs summed in the
/// accumulator type (owned runs applied at once, the pieces of shared runs
/// into their tasks' head and tail slots), then the shared runs' trees,
/// applied. Scratch: the sort's, and two slots of the accumulator type per
/// task of kSortedChunk sorted rows and column.
template <class I, class V>
void run_index_add_ordered(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out,
                           const index_add_options& opts) {
  using namespace gpu_index_add;
  using Acc = default_accumulator_t<V>;
  if (p.rows == 0 || p.cols == 0) {  // nothing to sort or sum; the reports only
    execute_index_add(gpu, p, out, plus{}, opts);
    if (opts.chosen) *opts.chosen = histogram_strategy::sorted_rows;
    return;
  }
  if (p.report_out_of_range && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const std::int64_t tasks = iak::sorted_tasks(p.rows);
  const std::size_t slots_bytes =
      checked_bytes(static_cast<std::uint64_t>(tasks), static_cast<std::uint64_t>(p.cols) * sizeof(Acc), 0);
  const sorted_rows_scratch scratch = carve_sorted_rows_scratch(
      scratch_for(gpu), p.rows, sort_temp_bytes(p.rows, sort_end_bit(p.out_rows), gpu.stream),
      checked_bytes(2, slots_bytes, 0), gpu.stream);
  Acc* heads = reinterpret_cast<Acc*>(scratch.sums);
  Acc* tails = heads + tasks * p.cols;
  try {
    sort_rows_by_key(gpu, p, scratch, scratch.temp_bytes, opts);
    launch_sorted_runs(gpu, p, scratch, iak::ordered_runs<V>{out, p.out_stride, heads, tails, p.cols}, opts);
    const auto* keys = static_cast<const unsigned*>(scratch.keys[1]);
    const auto nodes = iak::ordered_nodes_kernel<I, V>;
    launch("launch of tally::kernels::index_add::ordered_nodes_kernel",
           launch_config(dim3(index_add_grid(nodes, tasks * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
           nodes, p, keys, heads, tails, out);
    const auto long_runs = iak::ordered_long_runs_kernel<I, V>;
    launch("launch of tally::kernels::index_add::ordered_long_runs_kernel",
           launch_config(dim3(index_add_grid(long_runs, tasks * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
           long_runs, p, keys, static_cast<const Acc*>(heads), static_cast<const Acc*>(tails), out);
    if (opts.chosen) *opts.chosen = histogram_strategy::sorted_rows;
  } catch (...) {
    clear_words(gpu, scratch.words);
    throw;
  }
  finish_reports(gpu, scratch.words, p, false, opts);
}

template <class I, class V>
void run_index_add_deterministic(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out,
                                 const index_add_options& opts) {
  using namespace gpu_index_add;
  namespace hk = kernels::histogram;
  // The int64 additions are exact in any order, so every strategy gives the
  // same bits.
  if (single_column_scatter(p, opts)) return scatter_single_column(gpu, p, out, true, opts);
  const histogram_strategy strategy = strategy_of(p, opts);
  const bool checked = p.report_out_of_range;
  if (checked && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const bool work = p.rows > 0 && p.cols > 0;
  if (work && strategy == histogram_strategy::sorted_rows) return run_sorted_deterministic(gpu, p, out, opts);
  const index_add_slots slots = work ? choose_index_add_slots(p.rows, p.cols, p.out_rows) : index_add_slots{};
  const index_add_scratch scratch = carve_index_add_scratch(scratch_for(gpu), work, slots, gpu.stream);
  hk::error_words* words = scratch.words;
  try {
    if (work) {
      const fixed_point_setup f = prepare_fixed_point(gpu, p, words, opts);
      TALLY_CUDA(cudaMemsetAsync(scratch.sums, 0, slots.sums_bytes, gpu.stream));
      unsigned* touched = nullptr;
      unsigned long long* slot_of = nullptr;
      if (slots.per_source_row) {
        slot_of = static_cast<unsigned long long*>(scratch.marks);
        TALLY_CUDA(cudaMemsetAsync(slot_of, 0xFF, slots.marks_bytes, gpu.stream));
        const auto first_rows = iak::first_rows_kernel<I>;
        launch("launch of tally::kernels::index_add::first_rows_kernel",
               launch_config(dim3(index_add_grid(first_rows, p.rows, opts)), dim3(iak::kThreads), 0, gpu.stream),
               first_rows, p.index, p.rows, p.out_rows, slot_of);
      } else {
        touched = static_cast<unsigned*>(scratch.marks);
        TALLY_CUDA(cudaMemsetAsync(touched, 0, slots.marks_bytes, gpu.stream));
      }
      const hk::out_of_range_report report{checked ? &words->bad_position : nullptr, 0, p.rows};
      launch_index_add(gpu, p, plus{}, iak::fixed_point_values{f.quantize},
                       iak::fixed_point_sink{scratch.sums, p.cols, slot_of, touched}, strategy, report, opts);
      const auto finish = iak::fixed_point_rows_finish_kernel<I, V>;
      launch(
          "launch of tally::kernels::index_add::fixed_point_rows_finish_kernel",
          launch_config(dim3(index_add_grid(finish, slots.slots * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
          finish, p, static_cast<const long long*>(static_cast<void*>(scratch.sums)), slots.slots,
          static_cast<const unsigned*>(touched), static_cast<const unsigned long long*>(slot_of), f.bits_on_device,
          f.bits, out);
    }
    if (opts.chosen) *opts.chosen = strategy;
  } catch (...) {
    clear_words(gpu, words);
    throw;
  }
  finish_reports(gpu, words, p, true, opts);
}

}  // namespace tally::detail
