// Argument checks and data-error reports of index_add, shared by both
// backends. Each throws invalid_argument naming `index_add` and the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "tally/core/error.hpp"
#include "tally/core/fixed_point.hpp"
#include "tally/core/histogram_options.hpp"
#include "tally/core/scatter_validate.hpp"

namespace tally::detail {

inline constexpr const char* kIndexAdd = "index_add";

/// A row stride from the options: 0 means cols; otherwise at least cols.
inline std::int64_t resolve_row_stride(const char* argument, std::int64_t stride, std::int64_t cols, bool checked) {
  if (stride == 0) return cols;
  if (checked && stride < cols)
    throw_invalid_argument(kIndexAdd, argument,
                           "must be 0 (meaning cols) or at least cols = " + std::to_string(cols) + " (got " +
                               std::to_string(stride) + ")");
  return stride;
}

/// Elements a matrix of `rows` rows of `cols` values, rows `stride` apart,
/// spans: (rows - 1)·stride + cols, 0 when it has no element; -1 when that
/// many elements of `bytes` bytes would not be addressable.
inline std::int64_t matrix_extent(std::int64_t rows, std::int64_t cols, std::int64_t stride, std::size_t bytes) {
  if (rows <= 0 || cols <= 0) return 0;
  const auto limit = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(bytes);
  if (rows - 1 > (limit - cols) / stride) return -1;
  return (rows - 1) * stride + cols;
}

/// p holds `elements` elements of T (elements > 0): non-null, and not wrapping
/// around the end of the address space.
template <class T>
void check_span(const char* argument, const T* p, std::int64_t elements, const std::string& sizes) {
  if (p == nullptr) throw_invalid_argument(kIndexAdd, argument, "is null but " + sizes);
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address > std::numeric_limits<std::uintptr_t>::max() - static_cast<std::uint64_t>(elements) * sizeof(T))
    throw_invalid_argument(kIndexAdd, argument, "with " + sizes + " runs past the end of the address space");
}

/// Throws when [a, a + a_elements) and [b, b + b_elements) share a byte.
template <class A, class B>
void check_disjoint(const char* argument, const A* a, std::int64_t a_elements, const char* other, const B* b,
                    std::int64_t b_elements) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), a1 = a0 + static_cast<std::uint64_t>(a_elements) * sizeof(A);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b), b1 = b0 + static_cast<std::uint64_t>(b_elements) * sizeof(B);
  if (a0 < b1 && b0 < a1) throw_invalid_argument(kIndexAdd, argument, std::string("overlaps '") + other + "'");
}

/// The error for a row whose index lies outside [0, out_rows).
[[noreturn]] inline void throw_bad_row_index(std::int64_t position, long long index, std::int64_t out_rows) {
  throw_invalid_argument(kIndexAdd, "index",
                         "[" + std::to_string(position) + "] = " + std::to_string(index) +
                             " is outside [0, out_rows = " + std::to_string(out_rows) +
                             ") (the rows in range were applied)");
}

/// Throws the errors a call found in its data after applying the rows that
/// were fine: a bad index first (position >= 0, `index` its value), then a
/// bad deterministic value. Nothing when both are absent.
inline void throw_index_add_data_errors(const histogram_options& opts, std::int64_t position, long long index,
                                        std::int64_t out_rows, bool bad_value, std::int64_t rows) {
  if (position >= 0) throw_bad_row_index(position, index, out_rows);
  if (bad_value) throw_fixed_point_range(kIndexAdd, opts, rows, "src", "a row that lands in out");
}

}  // namespace tally::detail
