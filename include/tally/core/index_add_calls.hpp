// The steps of an index_add call on either backend: the argument checks
// (all of them before anything is written), then the backend's hooks, which
// each backend defines (cpu/index_add.hpp, cuda/index_add.cuh):
//
//   execute_index_add(backend, rows, out, op, options)
//       out[index[i]·out_stride + j] = op(out[...], src[i·src_stride + j]) for
//       every row i whose index lies in [0, out_rows); rows.report_out_of_range:
//       the first other row is reported afterwards (thrown as
//       invalid_argument, or left in options.errors).
//   run_index_add_deterministic(backend, rows, out, options)
//       the same for plus as fixed-point sums (histogram_options::deterministic,
//       with n = rows), each output element rounded once.
//   run_index_add_ordered(backend, rows, out, options)
//       the same for plus as ordered sums (index_add_sums::ordered).
//
// check_backend_memory (core/scatter_calls.hpp) checks that a pointer is
// memory the backend can use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tally/core/backend.hpp"
#include "tally/core/index_add_options.hpp"
#include "tally/core/index_add_sums.hpp"
#include "tally/core/index_add_validate.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/row_scatter.hpp"
#include "tally/core/scatter_calls.hpp"
#include "tally/core/scatter_validate.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

template <class I, class V, class Op>
void execute_index_add(const cpu_backend&, const row_scatter<I, V>&, V* out, const Op&, const index_add_options&);
template <class I, class V, class Op>
void execute_index_add(const gpu_backend&, const row_scatter<I, V>&, V* out, const Op&, const index_add_options&);
template <class I, class V>
void run_index_add_deterministic(const cpu_backend&, const row_scatter<I, V>&, V* out, const index_add_options&);
template <class I, class V>
void run_index_add_deterministic(const gpu_backend&, const row_scatter<I, V>&, V* out, const index_add_options&);
template <class I, class V>
void run_index_add_ordered(const cpu_backend&, const row_scatter<I, V>&, V* out, const index_add_options&);
template <class I, class V>
void run_index_add_ordered(const gpu_backend&, const row_scatter<I, V>&, V* out, const index_add_options&);

template <class V>
inline constexpr bool is_index_add_value_v =
    std::is_same_v<V, float> || std::is_same_v<V, double> || std::is_same_v<V, half> || std::is_same_v<V, bfloat16>;
template <class Op>
struct is_custom_op : std::false_type {};
template <class F, class T>
struct is_custom_op<custom_op<F, T>> : std::true_type {};
/// The operators index_add takes: those of scatter_reduce that apply to
/// floating-point values (the bit operators do not).
template <class Op>
inline constexpr bool is_index_add_op_v = std::is_same_v<Op, plus> || std::is_same_v<Op, multiplies> ||
                                          std::is_same_v<Op, minimum> || std::is_same_v<Op, maximum> ||
                                          is_custom_op<Op>::value;

/// Why opts.deterministic refuses `Op` (any operator but plus).
template <class Op>
constexpr const char* deterministic_refusal() {
  if constexpr (std::is_same_v<Op, minimum> || std::is_same_v<Op, maximum>)
    return "needs tally::plus (minimum and maximum are exact: the same bits on every run without it)";
  else
    return "needs tally::plus (products and make_op operators have no deterministic mode: on the GPU their "
           "rounding depends on the order in which rows reach an element)";
}

/// The checks of a checked call that read only sizes and pointers (no
/// backend query): sizes, strides, extents, null pointers, overlaps.
template <class I, class V>
void check_index_add_arguments(const I* index, const V* src, std::int64_t rows, std::int64_t cols, const V* out,
                               std::int64_t out_rows, std::int64_t src_stride, std::int64_t out_stride) {
  if (rows < 0) throw_invalid_argument(kIndexAdd, "rows", "is negative (" + std::to_string(rows) + ")");
  if (cols < 0) throw_invalid_argument(kIndexAdd, "cols", "is negative (" + std::to_string(cols) + ")");
  if (out_rows < 0) throw_invalid_argument(kIndexAdd, "out_rows", "is negative (" + std::to_string(out_rows) + ")");
  const std::int64_t src_elements = matrix_extent(rows, cols, src_stride, sizeof(V));
  if (src_elements < 0 || matrix_extent(rows, 1, 1, sizeof(I)) < 0)
    throw_invalid_argument(kIndexAdd, "rows",
                           "= " + std::to_string(rows) + " rows of src_stride " + std::to_string(src_stride) +
                               " overflow the address space");
  const std::int64_t out_elements = matrix_extent(out_rows, cols, out_stride, sizeof(V));
  if (out_elements < 0)
    throw_invalid_argument(kIndexAdd, "out_rows",
                           "= " + std::to_string(out_rows) + " rows of out_stride " + std::to_string(out_stride) +
                               " overflow the address space");
  if (rows == 0 || cols == 0) return;  // nothing is read or written
  const std::string sizes = "rows = " + std::to_string(rows) + ", cols = " + std::to_string(cols);
  check_span("index", index, rows, sizes);
  check_span("src", src, src_elements, sizes);
  check_span("out", out, out_elements, sizes + ", out_rows = " + std::to_string(out_rows));
  if (out_elements > 0) {
    check_disjoint("out", out, out_elements, "src", src, src_elements);
    check_disjoint("out", out, out_elements, "index", index, rows);
  }
}

/// index_add: the checks, then the backend.
template <class Backend, class I, class V, class Op>
void run_index_add(const Backend& backend, const I* index, const V* src, std::int64_t rows, std::int64_t cols, V* out,
                   std::int64_t out_rows, const Op& op, const index_add_options& opts) {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "tally::index_add: index must be int32 or int64");
  static_assert(is_index_add_value_v<V>, "tally::index_add: values must be float, double, half or bfloat16");
  static_assert(is_index_add_op_v<Op>,
                "tally::index_add: the operator must be tally::plus, multiplies, minimum, maximum or make_op(...)");
  const bool checked = opts.checks == check_mode::checked;
  check_errors_option(kIndexAdd, opts);
  if (opts.strategy == histogram_strategy::shared_memory || opts.strategy == histogram_strategy::cluster_memory ||
      opts.strategy == histogram_strategy::hot_keys)
    throw_invalid_argument(kIndexAdd, "options.strategy",
                           std::string("is ") + to_string(opts.strategy) +
                               ", which index_add does not have (it runs automatic, aggregated_atomics, "
                               "plain_atomics or sorted_rows)");
  const std::int64_t src_stride = resolve_row_stride("options.src_stride", opts.src_stride, cols, checked);
  const std::int64_t out_stride = resolve_row_stride("options.out_stride", opts.out_stride, cols, checked);
  if (checked) {
    check_index_add_arguments(index, src, rows, cols, out, out_rows, src_stride, out_stride);
    if (rows > 0 && cols > 0) {
      check_backend_memory(backend, kIndexAdd, "index", index, rows);
      check_backend_memory(backend, kIndexAdd, "src", src, rows);
      check_backend_memory(backend, kIndexAdd, "out", out, out_rows);
    }
    check_backend_memory(backend, kIndexAdd, "options.errors", opts.errors, 1);
  }
  if (opts.deterministic) {
    if constexpr (!std::is_same_v<Op, plus>)
      throw_invalid_argument(kIndexAdd, "options.deterministic", deterministic_refusal<Op>());
    check_fixed_point_bits(kIndexAdd, opts);
  }
  const row_scatter<I, V> problem{index,
                                  src,
                                  std::max<std::int64_t>(rows, 0),
                                  std::max<std::int64_t>(cols, 0),
                                  src_stride,
                                  std::max<std::int64_t>(out_rows, 0),
                                  out_stride,
                                  checked};
  [[maybe_unused]] const index_add_sums sums = resolve_index_add_sums(problem, opts);  // its checks for every call
  if constexpr (std::is_same_v<Op, plus>) {
    if (opts.deterministic && sums == index_add_sums::ordered) return run_index_add_ordered(backend, problem, out, opts);
    if (opts.deterministic) return run_index_add_deterministic(backend, problem, out, opts);
  }
  execute_index_add(backend, problem, out, op, opts);
}

}  // namespace tally::detail
