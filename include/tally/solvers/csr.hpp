// Compressed sparse row matrices: a non-owning view both backends read, and
// owning containers in host and device memory.
//
// A view is also an operator for the solvers (see operator.hpp): y = A·x sums
// each row in stored order, every product rounded on its own, so the CPU and
// the GPU compute the same bits.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "tally/core/config.hpp"
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
  Acc acc = detail::multiply_rounded(static_cast<Acc>(value_at(first)),
                                     static_cast<Acc>(v(static_cast<std::int64_t>(column_at(first)))));
  for (std::int64_t k = first + 1; k < last; ++k)
    acc = acc + detail::multiply_rounded(static_cast<Acc>(value_at(k)),
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
  template <class Acc = Value, class Vector>
  TALLY_HD_INLINE Acc row_product(std::int64_t i, const Vector& v) const {
    return csr_row_sum<Acc>(
        read_only(offsets + i), read_only(offsets + i + 1), [&](std::int64_t k) { return read_only(values + k); },
        [&](std::int64_t k) { return read_only(columns + k); }, v);
  }

  /// a(i, i): the sum of row i's entries in column i in stored order (0 when
  /// none is stored).
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

  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
  /// A view of the arrays; valid while this object lives and is not resized.
  csr_view<Value, Index> view() const { return {rows, cols, nnz(), offsets.data(), columns.data(), values.data()}; }
};

/// The same matrix with other value and index types (values rounded to
/// nearest, indices range-checked by the caller).
template <class Value, class Index, class V, class I>
host_csr<Value, Index> convert_csr(const host_csr<V, I>& a) {
  host_csr<Value, Index> out;
  out.rows = a.rows;
  out.cols = a.cols;
  out.offsets.assign(a.offsets.begin(), a.offsets.end());
  out.columns.assign(a.columns.begin(), a.columns.end());
  out.values.assign(a.values.begin(), a.values.end());
  return out;
}

}  // namespace tally::solvers
