// Argument checks of the histogram and scatter functions, shared by both
// backends. Each throws invalid_argument naming the function and the argument.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tally/core/bins.hpp"
#include "tally/core/error.hpp"
#include "tally/core/fixed_point.hpp"
#include "tally/core/histogram_options.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

template <class Count>
constexpr bool is_count_type_v = std::is_same_v<Count, std::int32_t> || std::is_same_v<Count, std::int64_t> ||
                                 std::is_same_v<Count, float> || std::is_same_v<Count, double>;

inline void check_bins(const char* function, std::int64_t bins) {
  if (bins <= 0) throw_invalid_argument(function, "bins", "must be positive (got " + std::to_string(bins) + ")");
}

/// The bins of histogram_even, after checking them: bins > 0, lo < hi (both
/// finite, so no NaN), and a range whose width hi - lo and whose bins/(hi -
/// lo) are finite (else the bin of a sample would be inf or NaN).
inline even_bins make_even_bins(const char* function, std::int64_t bins, double lo, double hi) {
  check_bins(function, bins);
  char range[96];
  std::snprintf(range, sizeof(range), "(lo = %.17g, hi = %.17g)", lo, hi);
  if (!(lo < hi)) throw_invalid_argument(function, "lo", std::string("must be below hi ") + range);
  if (!std::isfinite(lo)) throw_invalid_argument(function, "lo", std::string("must be finite ") + range);
  if (!std::isfinite(hi)) throw_invalid_argument(function, "hi", std::string("must be finite ") + range);
  const double width = hi - lo;
  if (!std::isfinite(width))
    throw_invalid_argument(function, "hi", std::string("is too far above lo: hi - lo overflows a double ") + range);
  const double scale = static_cast<double>(bins) / width;
  if (!std::isfinite(scale))
    throw_invalid_argument(function, "hi",
                           std::string("is too close to lo: bins / (hi - lo) overflows a double ") + range +
                               ", bins = " + std::to_string(bins));
  // even_bins' margin (its comment derives it); inf for a huge |lo|·scale,
  // which sends every sample through the edge correction.
  const double margin = 0x1p-49 * (static_cast<double>(bins) + std::fmax(std::fabs(lo), std::fabs(hi)) * scale);
  return {lo, hi, width / static_cast<double>(bins), scale, margin, bins};
}

/// levels: at least 2, non-null, strictly increasing (so no NaN).
template <class L>
void check_levels(const char* function, const L* levels, std::int64_t num_levels) {
  if (num_levels < 2)
    throw_invalid_argument(function, "num_levels", "must be at least 2 (got " + std::to_string(num_levels) + ")");
  if (levels == nullptr) throw_invalid_argument(function, "levels", "is null");
  for (std::int64_t k = 0; k + 1 < num_levels; ++k)
    if (!(convert<double>(levels[k]) < convert<double>(levels[k + 1])))
      throw_invalid_argument(function, "levels", "must be strictly increasing (levels[" + std::to_string(k) +
                                                     "] >= levels[" + std::to_string(k + 1) + "], or NaN)");
}

/// Rejects a given fixed-point scale outside [kMinFixedPointBits, kMaxFixedPointBits].
inline void check_fixed_point_bits(const char* function, const histogram_options& opts) {
  const int s = opts.fixed_point_bits;
  if (opts.deterministic && s != kDeriveFixedPointScale && (s < kMinFixedPointBits || s > kMaxFixedPointBits))
    throw_invalid_argument(function, "options.fixed_point_bits",
                           "must lie in [-1022, 1023] (got " + std::to_string(s) + ")");
}

/// Histograms and scatter_reduce have every strategy but sorted_rows
/// (index_add's).
inline void check_scatter_strategy(const char* function, const histogram_options& opts) {
  if (opts.strategy == histogram_strategy::sorted_rows)
    throw_invalid_argument(function, "options.strategy", "is sorted_rows, which only index_add has");
}

/// options.errors is for checked calls only.
inline void check_errors_option(const char* function, const histogram_options& opts) {
  if (opts.errors && opts.checks != check_mode::checked)
    throw_invalid_argument(function, "options.errors", "is given but the checks are off (check_mode::unchecked)");
}

/// The error for a value outside the fixed-point contract
/// (histogram_options::deterministic) among n addends: `argument` names the
/// array and `where` the values that count ("an element that lands in a bin").
[[noreturn]] inline void throw_fixed_point_range(const char* function, const histogram_options& opts, std::int64_t n,
                                                 const char* argument = "value",
                                                 const char* where = "an element that lands in a bin") {
  if (opts.fixed_point_bits == kDeriveFixedPointScale)
    throw_invalid_argument(function, argument,
                           std::string("holds NaN or inf in ") + where + " (deterministic mode)");
  throw_invalid_argument(function, argument,
                         "holds NaN, inf, or a value whose |v|*2^" + std::to_string(opts.fixed_point_bits) +
                             " reaches 2^" + std::to_string(fixed_point_headroom_bits(n)) + " in " + where +
                             " (deterministic mode could overflow; give a smaller fixed_point_bits)");
}

/// The error for a scatter index out of range.
[[noreturn]] inline void throw_bad_index(const char* function, std::int64_t position, long long index,
                                         std::int64_t size) {
  throw_invalid_argument(function, "index",
                         "[" + std::to_string(position) + "] = " + std::to_string(index) +
                             " is outside [0, out_size = " + std::to_string(size) + ") (the elements in range "
                             "were applied)");
}

}  // namespace tally::detail

namespace tally::detail {

/// Throws the errors a call found in its data, after it applied the elements
/// that were fine: a bad index first (position >= 0, `index` its value), then
/// a bad deterministic value, naming `values`, the function's argument that
/// holds it ("weights", "value"; only read when bad_value). Nothing when both
/// are absent.
inline void throw_data_errors(const char* function, const char* values, const histogram_options& opts,
                              std::int64_t position, long long index, std::int64_t bins, bool bad_value,
                              std::int64_t n) {
  if (position >= 0) throw_bad_index(function, position, index, bins);
  if (bad_value) throw_fixed_point_range(function, opts, n, values);
}

}  // namespace tally::detail
