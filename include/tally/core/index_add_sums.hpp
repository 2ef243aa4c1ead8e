// Which sums a deterministic index_add runs (index_add_sums), and the size
// rules behind the choice: shared by both backends, so that a call gets the
// same sums, and so the same bits, on either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tally/core/error.hpp"
#include "tally/core/index_add_options.hpp"
#include "tally/core/index_add_validate.hpp"
#include "tally/core/row_scatter.hpp"

namespace tally::detail {

/// Sorted positions a piece of an ordered sum spans (index_add_sums::ordered):
/// also the positions a task of the GPU's sorted_rows takes, so that a piece
/// is what one task sums.
inline constexpr std::int64_t kOrderedPieceRows = 256;

/// Whether the sort of sorted_rows (and of ordered sums) can take a call: row
/// numbers, keys and the mark of a row out of range (out_rows itself) in 32
/// bits.
inline bool sorted_rows_fit(std::int64_t rows, std::int64_t out_rows) {
  return rows <= std::int64_t{0xffffffff} && out_rows < std::int64_t{0xffffffff};
}

/// Whether sorting the rows pays on the GPU: inputs large enough to amortise
/// the sort (16 MB of src), rows of at least 32 bytes. Measured on the H100,
/// µs, half the rows to one key / uniform keys, sorted against warp-aggregated
/// atomics:
///   f32 × 128 (7.77 M rows into 1.72 M)  2297 / 2375 against 3938 / 4733
///   bf16 × 128                           2273 / 2417 against 2538 / 2388
///   f32 × 16 (62 M rows)                 4391 / 4870 against 28873 / 7656
///   bf16 × 16 (32-byte rows)             5953 / 6574 against 15691 / 3987
/// and deterministic, sorted against the int64 sums of aggregated atomics:
///   bf16 × 16 14237 / 15529 against 81307 / 17053 (every other case wider apart).
/// The sort costs the same whatever the row width, so at 32-byte rows uniform
/// keys pay 1.65× for it (6.6 ms against 4.0) while skewed keys gain 2.6×
/// (15.7 ms against 6.0): the choice bounds the worst case, since the keys'
/// skew is not known when the strategy is picked.
inline bool sorted_rows_pay(std::int64_t rows, std::int64_t cols, std::size_t value_bytes) {
  const auto row_bytes = static_cast<std::size_t>(cols) * value_bytes;
  return row_bytes >= 32u && static_cast<std::size_t>(rows) * row_bytes >= (std::size_t{1} << 24);
}

/// The sums a call runs: opts.deterministic_sums resolved (see
/// index_add_sums::automatic); fixed_point for a call that is not
/// deterministic. Errors (invalid_argument, before anything is written):
/// deterministic_sums other than automatic without deterministic; ordered
/// with a given fixed_point_bits, with the strategy aggregated_atomics or
/// plain_atomics (ordered sums sort the rows), or with rows or out_rows
/// beyond sorted_rows_fit.
template <class I, class V>
index_add_sums resolve_index_add_sums(const row_scatter<I, V>& p, const index_add_options& opts) {
  const index_add_sums asked = opts.deterministic_sums;
  if (!opts.deterministic) {
    if (asked != index_add_sums::automatic)
      throw_invalid_argument(kIndexAdd, "options.deterministic_sums",
                             std::string("is ") + to_string(asked) + ", which needs options.deterministic");
    return index_add_sums::fixed_point;
  }
  const bool sorts = opts.strategy == histogram_strategy::automatic || opts.strategy == histogram_strategy::sorted_rows;
  const bool derived = opts.fixed_point_bits == kDeriveFixedPointScale;
  const bool fits = sorted_rows_fit(p.rows, p.out_rows);
  if (asked == index_add_sums::automatic)
    return derived && sorts && fits && p.out_rows > 0 && sorted_rows_pay(p.rows, p.cols, sizeof(V))
               ? index_add_sums::ordered
               : index_add_sums::fixed_point;
  if (asked == index_add_sums::ordered) {
    if (!derived)
      throw_invalid_argument(kIndexAdd, "options.fixed_point_bits",
                             "is given (" + std::to_string(opts.fixed_point_bits) +
                                 "), but deterministic_sums is ordered, which has no scale");
    if (!sorts)
      throw_invalid_argument(kIndexAdd, "options.strategy",
                             std::string("is ") + to_string(opts.strategy) +
                                 ", but deterministic_sums is ordered, which sorts the rows (automatic or sorted_rows)");
    if (!fits)
      throw_invalid_argument(kIndexAdd, "options.deterministic_sums",
                             "is ordered, which needs rows <= 2^32 - 1 and out_rows < 2^32 - 1 (got rows = " +
                                 std::to_string(p.rows) + ", out_rows = " + std::to_string(p.out_rows) + ")");
  }
  return asked;
}

}  // namespace tally::detail
