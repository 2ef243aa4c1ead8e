// Compressed sparse row matrices: a non-owning view both backends read, and
// owning containers in host and device memory.
//
// A view is also an operator for the solvers (linear_operator, operator.hpp):
// y = A·x sums each row in stored order, every product rounded on its own, so
// the CPU and the GPU compute the same bits. validate_csr.hpp checks a view's
// structure.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/core/config.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"

namespace tally::solvers {

/// Reads a value the kernel never writes: through the read-only cache on the
/// device, plainly on the host.
template <class T>
TALLY_HD_INLINE T read_only(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

/// The arithmetic of one CSR row, written once so that every reader of the
/// entries (csr_view, the GPU's staged copies) computes the same bits:
/// Σ value_at(k)·v(column_at(k)) for k = first .. last−1 in that order, each
/// product rounded to Acc on its own, added left to right in Acc; 0 when
/// first == last.
template <class Acc, class ValueAt, class ColumnAt, class Vector>
TALLY_HD_INLINE Acc csr_row_sum(std::int64_t first, std::int64_t last, const ValueAt& value_at,
                                const ColumnAt& column_at, const Vector& v) {
  if (first == last) return Acc(0);
  Acc acc = tally::detail::multiply_rounded(static_cast<Acc>(value_at(first)),
                                            static_cast<Acc>(v(static_cast<std::int64_t>(column_at(first)))));
  for (std::int64_t k = first + 1; k < last; ++k)
    acc = acc + tally::detail::multiply_rounded(static_cast<Acc>(value_at(k)),
                                                static_cast<Acc>(v(static_cast<std::int64_t>(column_at(k)))));
  return acc;
}

/// A CSR matrix in memory the caller owns (host or device, as the backend it
/// is passed to). Row i holds entries offsets[i] .. offsets[i+1]-1, column
/// indices 0-based, in any order (the operator sums them in stored order).
/// Value is float or double; Index is std::int32_t or std::int64_t.
template <class Value, class Index>
struct csr_view {
  static_assert(std::is_same_v<Value, float> || std::is_same_v<Value, double>, "csr values are float or double");
  static_assert(std::is_same_v<Index, std::int32_t> || std::is_same_v<Index, std::int64_t>,
                "csr indices are 32- or 64-bit signed integers");
  using value_type = Value;
  using index_type = Index;

  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t nnz = 0;            ///< stored entries: offsets[rows]
  const Index* offsets = nullptr;  ///< rows + 1 entries, offsets[0] == 0
  const Index* columns = nullptr;  ///< nnz entries
  const Value* values = nullptr;   ///< nnz entries

  /// Σ_k a(i, c_k)·v(c_k) over row i's entries in stored order, each product
  /// rounded to Acc on its own and added left to right in Acc; 0 for an empty
  /// row. `v(j)` returns the vector's element j.
  /// Pre: 0 <= i < rows and the structure is valid (validate_csr); unchecked.
  template <class Acc = Value, class Vector>
  TALLY_HD_INLINE Acc row_product(std::int64_t i, const Vector& v) const {
    return csr_row_sum<Acc>(
        read_only(offsets + i), read_only(offsets + i + 1), [&](std::int64_t k) { return read_only(values + k); },
        [&](std::int64_t k) { return read_only(columns + k); }, v);
  }

  /// a(i, i): the sum of row i's entries in column i in stored order (0 when
  /// none is stored). Pre: as row_product.
  TALLY_HD_INLINE Value diagonal(std::int64_t i) const {
    const std::int64_t first = read_only(offsets + i), last = read_only(offsets + i + 1);
    Value d = 0;
    bool found = false;
    for (std::int64_t k = first; k < last; ++k) {
      if (static_cast<std::int64_t>(read_only(columns + k)) != i) continue;
      d = found ? d + read_only(values + k) : read_only(values + k);
      found = true;
    }
    return d;
  }
};

/// A CSR matrix owning its arrays in host memory.
template <class Value, class Index>
struct host_csr {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<Index> offsets{Index(0)};
  std::vector<Index> columns;
  std::vector<Value> values;

  /// Stored entries: values.size(). Post: >= 0; equals offsets[rows] in a
  /// valid matrix.
  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
  /// A view of the arrays; valid while this object lives and is not resized.
  /// Pre: rows >= 0, offsets.size() == rows + 1 and columns.size() ==
  /// values.size() (invalid_argument otherwise: a view of other lengths would
  /// make its readers leave the arrays). The entries are not checked here
  /// (validate_csr does).
  csr_view<Value, Index> view() const {
    if (rows < 0 || offsets.size() != static_cast<std::size_t>(rows) + 1)
      tally::detail::throw_invalid_argument("host_csr::view", "offsets",
                                            "holds " + std::to_string(offsets.size()) + " entries for " +
                                                std::to_string(rows) + " rows (needs rows + 1)");
    if (columns.size() != values.size())
      tally::detail::throw_invalid_argument(
          "host_csr::view", "columns",
          "holds " + std::to_string(columns.size()) + " entries but values holds " + std::to_string(values.size()));
    return {rows, cols, nnz(), offsets.data(), columns.data(), values.data()};
  }
};

namespace detail {
/// True for csr_view types (the operators whose structure validate_csr checks).
template <class Op>
inline constexpr bool is_csr_view = false;
template <class V, class I>
inline constexpr bool is_csr_view<csr_view<V, I>> = true;

/// True when the integer `v` has the same value as an Index.
template <class Index, class I>
bool index_fits(I v) {
  return std::cmp_greater_equal(v, std::numeric_limits<Index>::min()) &&
         std::cmp_less_equal(v, std::numeric_limits<Index>::max());
}
/// `v` with enough digits to tell it apart, for messages.
inline std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}
/// True unless rounding the finite `v` to Value overflows to infinity (a
/// value lost, not rounded). NaN and infinities convert as they are.
template <class Value, class V>
bool value_fits(V v) {
  return !std::isfinite(static_cast<double>(v)) || std::isfinite(static_cast<double>(static_cast<Value>(v)));
}
}  // namespace detail

/// The same matrix with other value and index types: values rounded to
/// nearest, indices converted exactly.
/// Pre: a.view()'s preconditions; every offset and column index fits Index,
/// and no finite value overflows Value (invalid_argument naming the first
/// that does not: narrowing never changes an index or turns a number into
/// infinity). Post: the same rows, cols and entries in the same order.
template <class Value, class Index, class V, class I>
host_csr<Value, Index> convert_csr(const host_csr<V, I>& a) {
  const auto view = a.view();  // checks the arrays' lengths
  for (std::size_t k = 0; k < a.offsets.size(); ++k)
    if (!detail::index_fits<Index>(a.offsets[k]))
      tally::detail::throw_invalid_argument("convert_csr", "a",
                                            "has offset " + std::to_string(a.offsets[k]) + " (row " +
                                                std::to_string(k) + "), which the index type cannot hold");
  for (std::size_t k = 0; k < a.columns.size(); ++k)
    if (!detail::index_fits<Index>(a.columns[k]))
      tally::detail::throw_invalid_argument("convert_csr", "a",
                                            "has column index " + std::to_string(a.columns[k]) + " (entry " +
                                                std::to_string(k) + "), which the index type cannot hold");
  for (std::size_t k = 0; k < a.values.size(); ++k)
    if (!detail::value_fits<Value>(a.values[k]))
      tally::detail::throw_invalid_argument("convert_csr", "a",
                                            "has value " + detail::number_text(a.values[k]) + " (entry " +
                                                std::to_string(k) + "), which overflows the value type");
  host_csr<Value, Index> out;
  out.rows = view.rows;
  out.cols = view.cols;
  out.offsets.assign(a.offsets.begin(), a.offsets.end());
  out.columns.assign(a.columns.begin(), a.columns.end());
  out.values.assign(a.values.begin(), a.values.end());
  return out;
}

}  // namespace tally::solvers
