// The steps every histogram and scatter_reduce call takes on either backend:
// the argument checks (all of them before anything is written), then the
// backend's hooks, which each backend defines (cpu/histogram.hpp,
// cuda/histogram.cuh):
//
//   check_backend_memory(backend, function, argument, p, n)
//       checked mode: p (n elements) is memory the backend can use (GPU:
//       device, managed or pinned memory), else invalid_argument naming it.
//   execute_scatter(backend, items, bins, out, op, options, function, clear)
//       out[items.key(a[i])] ⊕= items.value(b[i]) for every i whose key lies
//       in [0, bins), after setting out[0, bins) to zero when `clear`. Keys
//       that hold host tables (range_bins) are copied by the backend first.
//       When items.report_out_of_range and the call is checked, the first i
//       with a key outside [0, bins) is reported after the in-range elements
//       were applied (thrown as invalid_argument, or left in options.errors).
//   run_deterministic(backend, a, b, n, bins, key, out, report, options, function, values, clear)
//       the same as a fixed-point sum (histogram_options::deterministic); a
//       value outside the fixed-point contract is reported naming `values`,
//       the argument that holds b ("weights", "value").
//
// Errors found before any work (bad arguments, a forced strategy the device
// cannot run) leave every output untouched on both backends.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/backend.hpp"
#include "tally/core/bins.hpp"
#include "tally/core/error.hpp"
#include "tally/core/histogram_options.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/scatter.hpp"
#include "tally/core/scatter_validate.hpp"
#include "tally/core/validate.hpp"

namespace tally::detail {

template <class T>
void check_backend_memory(const cpu_backend&, const char* function, const char* argument, const T* p, std::int64_t n);
template <class T>
void check_backend_memory(const gpu_backend&, const char* function, const char* argument, const T* p, std::int64_t n);
template <class Items, class Out, class Op>
void execute_scatter(const cpu_backend&, const Items&, std::int64_t bins, Out* out, const Op&,
                     const histogram_options&, const char* function, bool clear);
template <class Items, class Out, class Op>
void execute_scatter(const gpu_backend&, const Items&, std::int64_t bins, Out* out, const Op&,
                     const histogram_options&, const char* function, bool clear);
template <class A, class B, class Key, class V>
void run_deterministic(const cpu_backend&, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options&, const char* function,
                       const char* values, bool clear);
template <class A, class B, class Key, class V>
void run_deterministic(const gpu_backend&, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options&, const char* function,
                       const char* values, bool clear);

/// A histogram: counts[0, bins) = the number (or weights' sum) of samples per bin.
template <class Backend, class A, class B, class Key, class Count>
void run_histogram(const Backend& backend, const A* samples, const B* weights, std::int64_t n, std::int64_t bins,
                   Key key, Count* counts, const histogram_options& opts, const char* function) {
  static_assert(is_count_type_v<Count>, "tally histograms count in int32, int64, float or double");
  constexpr bool weighted = !std::is_same_v<B, unit_weight>;
  if constexpr (weighted) static_assert(std::is_floating_point_v<Count>, "weighted histograms accumulate in float or double");
  check_errors_option(function, opts);
  check_scatter_strategy(function, opts);
  if (opts.checks == check_mode::checked) {
    check_array(function, "samples", samples, n);
    if constexpr (weighted) check_array(function, "weights", weights, n);
    check_output(function, counts, bins, samples, n, "counts");
    if constexpr (weighted) check_output(function, counts, bins, weights, n, "counts");
    check_backend_memory(backend, function, "samples", samples, n);
    if constexpr (weighted) check_backend_memory(backend, function, "weights", weights, n);
    check_backend_memory(backend, function, "counts", counts, bins);
  }
  if constexpr (weighted) {
    if (opts.deterministic) {
      check_fixed_point_bits(function, opts);
      run_deterministic(backend, samples, weights, n, bins, key, counts, false, opts, function, "weights", true);
      return;
    }
  }
  scatter_items<A, B, Key, plain_value<Count>> items{false, samples, weights, n, key, {}};
  execute_scatter(backend, items, bins, counts, plus{}, opts, function, true);
}

/// scatter_reduce: out[index[i]] = op(out[index[i]], value[i]).
template <class Backend, class I, class V, class Op>
void run_scatter_reduce(const Backend& backend, const I* index, const V* value, std::int64_t n, V* out,
                        std::int64_t out_size, const Op& op, const histogram_options& opts) {
  constexpr const char* function = "scatter_reduce";
  const bool checked = opts.checks == check_mode::checked;
  check_errors_option(function, opts);
  check_scatter_strategy(function, opts);
  if (checked) {
    check_array(function, "index", index, n);
    check_array(function, "value", value, n);
    if (out_size < 0) throw_invalid_argument(function, "out_size", "is negative");
    if (n > 0) {
      check_output(function, out, out_size, index, n);
      check_output(function, out, out_size, value, n);
    }
    check_backend_memory(backend, function, "index", index, n);
    check_backend_memory(backend, function, "value", value, n);
    check_backend_memory(backend, function, "out", out, n > 0 ? out_size : 0);
  }
  if (opts.deterministic) {
    if constexpr (std::is_same_v<Op, plus> && std::is_floating_point_v<V>) {
      check_fixed_point_bits(function, opts);
      run_deterministic(backend, index, value, n, out_size, index_key{}, out, checked, opts, function, "value", false);
      return;
    } else {
      throw_invalid_argument(function, "options.deterministic", "needs tally::plus on float or double values");
    }
  }
  scatter_items<I, V, index_key, plain_value<V>> items{checked, index, value, n, {}, {}};
  execute_scatter(backend, items, out_size, out, op, opts, function, false);
}

}  // namespace tally::detail
