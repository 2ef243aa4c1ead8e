// Checks of a CSR matrix's structure, so that no reader of it (the solvers,
// the writer) leaves its arrays: the sizes and pointers in O(1), the offsets
// and column indices in O(rows + nnz) with tally's own reductions, on the
// backend whose memory holds the matrix. validate_csr() on the CPU here, on
// the GPU in cuda/validate_csr.cuh.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "tally/core/backend.hpp"
#include "tally/core/config.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"
#include "tally/cpu/reduce.hpp"
#include "tally/reduce.hpp"
#include "tally/solvers/csr.hpp"

namespace tally::solvers {

namespace detail {

/// 1 where a row ends before it starts (offsets[i + 1] < offsets[i]).
struct offset_decreases {
  template <class I>
  TALLY_HD_INLINE std::int64_t operator()(I next, I first) const {
    return next < first ? 1 : 0;
  }
};

/// 1 for a column index outside [0, cols).
struct column_outside {
  std::int64_t cols;
  template <class I>
  TALLY_HD_INLINE std::int64_t operator()(I column) const {
    return (column < 0 || static_cast<std::int64_t>(column) >= cols) ? 1 : 0;
  }
};

/// What check_csr_entries counts and reads, in the backend's memory.
struct csr_defects {
  std::int64_t decreasing;  ///< rows whose offsets decrease
  std::int64_t outside;     ///< column indices outside [0, cols)
  std::int64_t first;       ///< offsets[0]
  std::int64_t last;        ///< offsets[rows]
};

/// The O(1) part: sizes, null arrays, nnz within the index type. Throws
/// invalid_argument("tally::<function>: argument '<argument>[.array]' ...").
template <class V, class I>
void check_csr_layout(const char* function, const char* argument, const csr_view<V, I>& a) {
  using tally::detail::throw_invalid_argument;
  const std::string name(argument);
  if (a.rows < 0 || a.cols < 0 || a.nnz < 0)
    throw_invalid_argument(function, argument,
                           "has a negative size (" + std::to_string(a.rows) + " x " + std::to_string(a.cols) + ", " +
                               std::to_string(a.nnz) + " entries)");
  if (a.rows == 0 && a.nnz != 0)
    throw_invalid_argument(function, argument, "has " + std::to_string(a.nnz) + " entries but no rows");
  if (a.nnz > static_cast<std::int64_t>(std::numeric_limits<I>::max()))
    throw_invalid_argument(function, argument,
                           "has " + std::to_string(a.nnz) + " entries, more than its index type holds");
  if (a.rows > 0 && a.offsets == nullptr) throw_invalid_argument(function, (name + ".offsets").c_str(), "is null");
  if (a.nnz > 0 && a.columns == nullptr) throw_invalid_argument(function, (name + ".columns").c_str(), "is null");
  if (a.nnz > 0 && a.values == nullptr) throw_invalid_argument(function, (name + ".values").c_str(), "is null");
}

/// The O(rows + nnz) part, on `backend` (a's arrays in its memory): offsets
/// start at 0, never decrease and end at nnz; every column index is in
/// [0, cols). Pre: check_csr_layout passed. On the GPU it waits for the
/// stream once (the counts come back to the host), so it cannot run while
/// the stream is captured.
template <class Backend, class V, class I>
void check_csr_entries(const Backend& backend, const csr_view<V, I>& a, const char* function, const char* argument) {
  if (a.rows == 0) return;  // no entries (check_csr_layout): nothing to read
  const auto d = tally::detail::value_of<csr_defects>(backend, [&](csr_defects* out) {
    tally::transform_reduce(backend, a.offsets + 1, a.offsets, a.rows, &out->decreasing, offset_decreases{},
                            tally::plus{}, {}, function);
    tally::transform_reduce(backend, a.columns, a.nnz, &out->outside, column_outside{a.cols}, tally::plus{}, {},
                            function);
    tally::reduce(backend, a.offsets, 1, &out->first);
    tally::reduce(backend, a.offsets + a.rows, 1, &out->last);
  });
  using tally::detail::throw_invalid_argument;
  if (d.first != 0)
    throw_invalid_argument(function, argument, "has row offsets starting at " + std::to_string(d.first) + ", not 0");
  if (d.last != a.nnz)
    throw_invalid_argument(
        function, argument,
        "has row offsets ending at " + std::to_string(d.last) + " but " + std::to_string(a.nnz) + " stored entries");
  if (d.decreasing > 0)
    throw_invalid_argument(
        function, argument,
        "has row offsets that decrease (" + std::to_string(d.decreasing) + " rows end before they start)");
  if (d.outside > 0)
    throw_invalid_argument(
        function, argument,
        "has " + std::to_string(d.outside) + " column indices outside [0, " + std::to_string(a.cols) + ")");
}

}  // namespace detail

/// Checks that `a` (host memory) is a valid CSR matrix: non-negative sizes;
/// offsets (rows + 1 of them), columns and values non-null where they hold
/// entries; offsets[0] == 0, offsets[rows] == nnz, offsets non-decreasing;
/// every column index in [0, cols). The values are not checked (NaN is a
/// valid entry). Costs one parallel pass over the offsets and the columns.
/// Post: returns when valid; throws invalid_argument naming 'a' and the
/// first problem otherwise.
template <class V, class I>
void validate_csr(const cpu_backend& cpu, const csr_view<V, I>& a) {
  detail::check_csr_layout("validate_csr", "a", a);
  detail::check_csr_entries(cpu, a, "validate_csr", "a");
}

}  // namespace tally::solvers
