// What an index_add call hands a backend: the row scatter
// out[index[i]·out_stride + j] ⊕= src[i·src_stride + j], i < rows, j < cols,
// with its strides resolved (never 0) and its arguments already checked.
#pragma once

#include <cstdint>

namespace tally::detail {

template <class I, class V>
struct row_scatter {
  const I* index;
  const V* src;
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t src_stride;  ///< >= cols
  std::int64_t out_rows;
  std::int64_t out_stride;  ///< >= cols
  /// Checked mode: rows whose index lies outside [0, out_rows) are reported
  /// (after the others were applied) rather than skipped silently.
  bool report_out_of_range;
};

}  // namespace tally::detail
