// Options of the histogram and scatter functions (histogram.hpp), shared by
// both backends and by the GPU dispatch that reads them.
#pragma once

#include <cstdint>
#include <limits>

#include "tally/core/options.hpp"

namespace tally {

/// How the GPU backend combines updates (the CPU backend ignores it).
enum class histogram_strategy {
  automatic,           ///< chosen from bins, value size, n and the device
  shared_memory,       ///< a private copy of the bins in each block's shared memory
  cluster_memory,      ///< the bins spread over the shared memories of a thread-block cluster
  aggregated_atomics,  ///< warp-aggregated atomics on the output in global memory
  plain_atomics,       ///< one global atomic per element
  sorted_rows,         ///< index_add only: rows grouped by key (a radix sort), each key's rows summed in registers
  hot_keys,            ///< histograms and scatter_reduce: the keys a sample finds frequent summed in each block's
                       ///< shared memory, the others by global atomics (skewed keys over many bins)
};

/// The strategy's name as `tally bench` prints it.
constexpr const char* to_string(histogram_strategy s) {
  switch (s) {
    case histogram_strategy::automatic: return "automatic";
    case histogram_strategy::shared_memory: return "shared_memory";
    case histogram_strategy::cluster_memory: return "cluster_memory";
    case histogram_strategy::aggregated_atomics: return "aggregated_atomics";
    case histogram_strategy::plain_atomics: return "plain_atomics";
    case histogram_strategy::sorted_rows: return "sorted_rows";
    case histogram_strategy::hot_keys: return "hot_keys";
  }
  return "?";
}

/// Sentinel for histogram_options::fixed_point_bits: derive the scale.
inline constexpr int kDeriveFixedPointScale = std::numeric_limits<int>::min();

/// Errors in the data that a checked call found while it ran, left in the
/// backend's memory for the caller instead of thrown (histogram_options::errors).
struct scatter_errors {
  /// scatter_reduce: the first i whose index[i] lies outside [0, out_size), or -1.
  std::int64_t first_bad_index = -1;
  /// Deterministic mode: 1 when a value of an element that lands in a bin was
  /// NaN, ±inf or beyond the fixed-point range (it counted as 0), else 0.
  std::int32_t bad_value = 0;
};

/// Options of the histogram and scatter functions.
struct histogram_options : options {
  histogram_strategy strategy = histogram_strategy::automatic;
  /// Where to report the strategy the GPU backend ran (benchmarks, tests).
  histogram_strategy* chosen = nullptr;
  /// Float/double sums in fixed point, so results are bitwise identical run
  /// to run, for any grid and strategy, and on both backends. Each value v is
  /// rounded to q = round(v·2^s) (an int64) and the q are summed exactly as
  /// integers; out[k] receives the sum times 2^-s, correctly rounded to the
  /// output type, added to what out[k] held (rounded once more; histograms
  /// start from zero). A bin whose integer sum is exactly 0 -- no element
  /// landed in it, or their values cancelled -- keeps its bits (a -0 or a
  /// NaN in scatter_reduce's out stays as it was).
  ///   - s derived (the default): s = 61 - e - ceil(log2 n), e the exponent
  ///     of the largest finite |v| over all n elements (those that land in no
  ///     bin included), so no sum can overflow; every value is kept to about
  ///     61 - ceil(log2 n) bits below the largest (39 bits for n = 10^7).
  ///     Costs one extra read of the values.
  ///   - s given (fixed_point_bits = s, -1022 <= s <= 1023, else
  ///     invalid_argument): one pass; every |v|·2^s must stay below
  ///     2^(62 - ceil(log2 n)) so that no sum can overflow.
  /// Only the values of elements that land in a bin are checked: a value
  /// outside the contract (or NaN/±inf) there counts as 0, the other elements
  /// are applied, and then the call reports invalid_argument naming the
  /// values' argument ('weights', or scatter_reduce's 'value'; checked mode;
  /// see `errors`). The values of elements that land in no bin
  /// (samples outside the range, NaN samples, bad scatter indices) are never
  /// an error, on every backend and strategy. The GPU backend reads an error
  /// flag back to report it, which waits for the stream (checked mode only,
  /// unless `errors` is given; in unchecked mode such values silently count as 0).
  bool deterministic = false;
  int fixed_point_bits = kDeriveFixedPointScale;
  /// Checked mode: where to leave errors found in the data (bad scatter
  /// indices, values outside the fixed-point contract) instead of throwing
  /// them. Memory of the backend (device memory for the GPU). When given, the
  /// GPU backend never waits for the stream, so the call can be captured in a
  /// CUDA graph; *errors is overwritten in stream order by every call (with
  /// -1 and 0 when the data were fine). Must be null in unchecked mode.
  scatter_errors* errors = nullptr;
};

}  // namespace tally
