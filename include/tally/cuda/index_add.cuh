// The GPU backend of index_add (index_add.hpp; the hooks are described in
// core/index_add_calls.hpp). A call draws its scratch once
// (dispatch/index_add_scratch.hpp) and launches one kernel
// (dispatch/index_add_launch.cuh); a deterministic call adds the kernels
// around its int64 sums (kernels/index_add_fixed_point.cuh). All in stream
// order, without waiting, except to report errors found on the device in
// checked mode (bad indices, values outside the fixed-point contract), which
// reads the error words back -- unless histogram_options::errors is given,
// where they are copied for the caller on the device instead.
#pragma once

#include <cstdint>

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
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

namespace gpu_index_add {

/// The strategy that runs: aggregated_atomics unless plain_atomics is forced
/// (core/index_add_calls.hpp has rejected the others).
inline histogram_strategy strategy_of(const histogram_options& opts) {
  return opts.strategy == histogram_strategy::plain_atomics ? histogram_strategy::plain_atomics
                                                            : histogram_strategy::aggregated_atomics;
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
  const histogram_strategy strategy = strategy_of(opts);
  const bool checked = p.report_out_of_range;
  if (checked && !opts.errors) gpu_histogram::refuse_waiting_capture(gpu, kIndexAdd);
  const bool work = p.rows > 0 && p.cols > 0;
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
  const histogram_strategy strategy = strategy_of(opts);
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
