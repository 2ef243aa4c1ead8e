// The inputs of `tally bench reduce` and their exact references.
//
// Element i of an input is a hash of (seed, i) computed by the same code on
// the host and the device, so the GPU fills its buffers itself and the host
// computes the reference from the formula, without copying gigabytes back.
//
// Every value is a small integer, chosen so that every partial sum, in ANY
// order, is an integer within the type's exact range (f32: 2^24, f64: 2^53):
// every correct implementation then returns the exact sum, bit for bit, and
// the check is equality with an integer reference. For f32 beyond 2^24
// elements, one element per window of `period` is 1 and the rest are 0
// (so Σ|x| <= 2^24): a lost or doubled 4096-element tile of a 2^30 sum moves
// it by at least 4096/64 = 64, which equality always sees.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/config.hpp"

namespace tally::cli {

/// SplitMix64's finaliser: a well-mixed 64-bit hash.
TALLY_HD_INLINE std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// How the elements of one input are drawn.
struct input_law {
  std::uint64_t seed = 0;
  /// One nonzero element per window of `period` elements, at a position
  /// drawn per window (1: every element is nonzero).
  std::int64_t period = 1;
  /// Nonzero elements have magnitudes 1 … max_magnitude.
  std::int64_t max_magnitude = 1;
  bool random_signs = false;
};

/// Element i of the input drawn by `law`, as T (exact: a small integer).
template <class T>
TALLY_HD_INLINE T input_value(const input_law& law, std::int64_t i) {
  if (law.period > 1) {
    const std::int64_t window = i / law.period;
    const auto pick =
        static_cast<std::int64_t>(mix64(law.seed ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(window + 1))) %
                                  static_cast<std::uint64_t>(law.period));
    if (i - window * law.period != pick) return T(0);
  }
  const std::uint64_t h = mix64(law.seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1));
  const auto magnitude = static_cast<std::int64_t>(1 + (h >> 1) % static_cast<std::uint64_t>(law.max_magnitude));
  return static_cast<T>(law.random_signs && (h & 1) ? -magnitude : magnitude);
}

/// Sums of n elements of T (float, double, int) whose every partial sum is exact.
template <class T>
input_law sum_law(std::uint64_t seed, std::int64_t n);
/// The two inputs of a dot product of n elements of T (float, double) whose
/// every partial sum of products is exact.
template <class T>
input_law dot_law_x(std::uint64_t seed, std::int64_t n);
template <class T>
input_law dot_law_y(std::uint64_t seed, std::int64_t n);

/// Σ input_value(law, i) for i < n, exactly (every law above keeps it within
/// int64; for int the sum is taken modulo 2^32 as the GPU's adds wrap).
std::int64_t sum_reference(const input_law& law, std::int64_t n, bool is_int);
/// Σ input_value(x, i) · input_value(y, i) for i < n, exactly.
std::int64_t dot_reference(const input_law& x, const input_law& y, std::int64_t n);

/// Writes input_value<T>(law, i) to x[i] for i < n, with OpenMP threads.
template <class T>
void fill_host(T* x, std::int64_t n, const input_law& law);

/// One line for the report: how the reduce rows are checked.
const char* reduce_check_mode();

}  // namespace tally::cli
