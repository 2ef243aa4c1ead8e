// The GPU backend of index_add (index_add.hpp; the hooks are described in
// core/index_add_calls.hpp). A call draws its scratch once
// (dispatch/index_add_scratch.hpp) and launches one kernel
// (dispatch/index_add_launch.cuh), or, for sorted_rows, the key pass, CUB's
// radix sort and the run kernel (kernels/index_add_sorted.cuh); a
// deterministic call adds the kernels around its int64 sums
// (kernels/index_add_fixed_point.cuh). All in stream
// order, without waiting, except to report errors found on the device in
// checked mode (bad indices, values outside the fixed-point contract), which
// reads the error words back -- unless histogram_options::errors is given,
// where they are copied for the caller on the device instead.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

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
#include "tally/cuda/kernels/index_add_sorted.cuh"
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

namespace gpu_index_add {

/// Whether sorted_rows can take a call: row numbers, keys and the mark of a
/// row out of range (out_rows itself) in 32 bits.
inline bool sorted_rows_fit(std::int64_t rows, std::int64_t out_rows) {
  return rows <= std::int64_t{0xffffffff} && out_rows < std::int64_t{0xffffffff};
}

/// The automatic choice: sorted_rows for wide rows (at least 256 bytes,
/// where a run's sum fills a warp's lanes with 16-byte loads) on inputs large
/// enough to amortise the sort; warp-aggregated atomics otherwise.
inline bool sorted_rows_pay(std::int64_t rows, std::int64_t cols, std::size_t value_bytes) {
  const auto row_bytes = static_cast<std::size_t>(cols) * value_bytes;
  return row_bytes >= 256 && static_cast<std::size_t>(rows) * row_bytes >= (std::size_t{1} << 24);
}

/// The strategy that runs (core/index_add_calls.hpp has rejected the ones
/// index_add does not have). A forced sorted_rows the call cannot take is an
/// error naming options.strategy.
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
      if (p.out_rows > 0 && sorted_rows_fit(p.rows, p.out_rows) && sorted_rows_pay(p.rows, p.cols, sizeof(V)))
        return histogram_strategy::sorted_rows;
      return histogram_strategy::aggregated_atomics;
    default: return histogram_strategy::aggregated_atomics;
  }
}

/// The sorted_rows strategy (kernels/index_add_sorted.cuh): keys and row
/// numbers, their radix sort (CUB, on the bits out_rows needs), then the
/// runs. Pre: p.rows > 0, p.cols > 0, sorted_rows_fit.
template <class I, class V, class Op>
void run_sorted_rows(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out, const Op& op,
                     const sorted_rows_scratch& scratch, std::size_t temp_bytes, int end_bit,
                     const index_add_options& opts) {
  const kernels::histogram::out_of_range_report report{p.report_out_of_range ? &scratch.words->bad_position : nullptr,
                                                       0, p.rows};
  const auto keys = iak::sort_keys_kernel<I>;
  launch("launch of tally::kernels::index_add::sort_keys_kernel",
         launch_config(dim3(index_add_grid(keys, p.rows, opts)), dim3(iak::kThreads), 0, gpu.stream), keys, p.index,
         p.rows, p.out_rows, scratch.keys[0], scratch.rows_of[0], report);
  std::size_t bytes = temp_bytes;
  check_cuda(cub::DeviceRadixSort::SortPairs(scratch.temp, bytes, scratch.keys[0], scratch.keys[1],
                                             scratch.rows_of[0], scratch.rows_of[1], static_cast<std::uint32_t>(p.rows), 0,
                                             end_bit, gpu.stream),
             "cub::DeviceRadixSort::SortPairs (index_add sorted_rows)");
  using Sink = iak::out_sink<V, Op>;
  const auto rows_kernel = iak::sorted_rows_kernel<I, V, Op, Sink>;
  const std::int64_t tiles = (p.cols + 32 * iak::kChunk<V> - 1) / (32 * iak::kChunk<V>);
  const std::int64_t tasks = (p.rows + iak::kSortedChunk - 1) / iak::kSortedChunk * tiles;
  launch("launch of tally::kernels::index_add::sorted_rows_kernel",
         launch_config(dim3(index_add_grid(rows_kernel, tasks * 32, opts)), dim3(iak::kThreads), 0, gpu.stream),
         rows_kernel, p, static_cast<const unsigned*>(scratch.keys[1]), static_cast<const unsigned*>(scratch.rows_of[1]),
         op, out, Sink{out, p.out_stride, op});
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

}  // namespace gpu_index_add

template <class I, class V, class Op>
void execute_index_add(const gpu_backend& gpu, const row_scatter<I, V>& p, V* out, const Op& op,
                       const index_add_options& opts) {
  using namespace gpu_index_add;
  const histogram_strategy strategy = strategy_of(p, opts);
  const bool checked = p.report_out_of_range;
  if (checked && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const bool work = p.rows > 0 && p.cols > 0;
  if (work && strategy == histogram_strategy::sorted_rows) {
    const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(p.out_rows))));
    std::size_t temp_bytes = 0;
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, static_cast<const unsigned*>(nullptr),
                                               static_cast<unsigned*>(nullptr), static_cast<const unsigned*>(nullptr),
                                               static_cast<unsigned*>(nullptr), static_cast<std::uint32_t>(p.rows), 0, end_bit,
                                               gpu.stream),
               "cub::DeviceRadixSort::SortPairs (index_add sorted_rows, sizing)");
    const sorted_rows_scratch scratch = carve_sorted_rows_scratch(scratch_for(gpu), p.rows, temp_bytes, gpu.stream);
    try {
      run_sorted_rows(gpu, p, out, op, scratch, temp_bytes, end_bit, opts);
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
      launch_index_add(gpu, p, op, iak::plain_values<Acc>{}, iak::out_sink<V, Op>{out, p.out_stride, op}, strategy,
                       report, opts);
    }
    if (opts.chosen) *opts.chosen = strategy;
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
  // The fixed-point sums run with warp-aggregated or plain atomics (their
  // int64 additions are exact in any order); a sorted_rows request runs the
  // former.
  const histogram_strategy strategy = opts.strategy == histogram_strategy::plain_atomics
                                          ? histogram_strategy::plain_atomics
                                          : histogram_strategy::aggregated_atomics;
  const bool checked = p.report_out_of_range;
  if (checked && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const bool work = p.rows > 0 && p.cols > 0;
  const index_add_slots slots = work ? choose_index_add_slots(p.rows, p.cols, p.out_rows) : index_add_slots{};
  const index_add_scratch scratch = carve_index_add_scratch(scratch_for(gpu), work, slots, gpu.stream);
  hk::error_words* words = scratch.words;
  try {
    if (work) {
      const bool derive = opts.fixed_point_bits == kDeriveFixedPointScale;
      const int bits = derive ? 0 : opts.fixed_point_bits;
      // The headroom is computed here on the host and passed down, so the
      // device never evaluates it (see fixed_point_headroom_bits).
      const int headroom = fixed_point_headroom_bits(p.rows);
      fixed_point_value quantize = fixed_point_value::with_bits(bits, headroom, &words->fixed.bad);
      const int* bits_on_device = nullptr;
      if (derive) {
        const auto largest = iak::largest_row_magnitude_kernel<I, V>;
        launch("launch of tally::kernels::index_add::largest_row_magnitude_kernel",
               launch_config(dim3(index_add_grid(largest, p.rows * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
               largest, p, &words->fixed);
        launch("launch of tally::kernels::histogram::derive_scale_kernel", launch_config(1, 1, 0, gpu.stream),
               hk::derive_scale_kernel<>, headroom, &words->fixed);
        bits_on_device = &words->fixed.bits;
        quantize.scale_on_device = &words->fixed.scale;
      }
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
      launch_index_add(gpu, p, plus{}, iak::fixed_point_values{quantize},
                       iak::fixed_point_sink{scratch.sums, p.cols, slot_of, touched}, strategy, report, opts);
      const auto finish = iak::fixed_point_rows_finish_kernel<I, V>;
      launch(
          "launch of tally::kernels::index_add::fixed_point_rows_finish_kernel",
          launch_config(dim3(index_add_grid(finish, slots.slots * p.cols, opts)), dim3(iak::kThreads), 0, gpu.stream),
          finish, p, static_cast<const long long*>(static_cast<void*>(scratch.sums)), slots.slots,
          static_cast<const unsigned*>(touched), static_cast<const unsigned long long*>(slot_of), bits_on_device, bits,
          out);
    }
    if (opts.chosen) *opts.chosen = strategy;
  } catch (...) {
    clear_words(gpu, words);
    throw;
  }
  finish_reports(gpu, words, p, true, opts);
}

}  // namespace tally::detail
