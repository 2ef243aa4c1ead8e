// The inputs of `tally bench reduce` and their exact references.
//
// Element i of an input is a hash of (seed, i), computed by the same code on
// the host and the device, so the GPU fills its buffers itself and the host
// computes the reference from the formula, without copying gigabytes back.
// Values are never zero and have random signs: floats are ±[0.5, 1) with
// every value exactly representable, integers are ±1 … ±8 (sums never wrap).
#pragma once

#include <cmath>
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

/// Element i of the input stream `seed` (T: float, double, int).
template <class T>
TALLY_HD_INLINE T input_value(std::uint64_t seed, std::int64_t i) {
  const std::uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1));
  const bool negative = (h & 1) != 0;
  if constexpr (std::is_same_v<T, float>) {
    const float v = 0.5f + static_cast<float>(h >> 41) * 0x1p-24f;  // 23 random bits: exact
    return negative ? -v : v;
  } else if constexpr (std::is_same_v<T, double>) {
    const double v = 0.5 + static_cast<double>(h >> 12) * 0x1p-53;  // 52 random bits: exact
    return negative ? -v : v;
  } else {
    const int v = static_cast<int>((h >> 1) % 8) + 1;
    return negative ? -v : v;
  }
}

/// A reference result and the scale its error is judged on.
struct reference {
  double value = 0;      ///< the exact (or long double) result
  double magnitude = 0;  ///< Σ |term|: errors are measured relative to it
};

/// Σ input_value<T>(seed, i) for i < n, in long double (exact for int).
template <class T>
reference sum_reference(std::uint64_t seed, std::int64_t n);

/// Σ input_value<T>(seed_x, i) · input_value<T>(seed_y, i) for i < n.
template <class T>
reference dot_reference(std::uint64_t seed_x, std::uint64_t seed_y, std::int64_t n);

/// Writes input_value<T>(seed, i) to x[i] for i < n, with OpenMP threads.
template <class T>
void fill_host(T* x, std::int64_t n, std::uint64_t seed);

/// |got − reference| relative to its magnitude; infinity when got is not finite.
inline double relative_error(double got, const reference& r) {
  if (!std::isfinite(got)) return INFINITY;
  return std::fabs(got - r.value) / (r.magnitude > 0 ? r.magnitude : 1.0);
}

/// The largest relative error accepted for a correct implementation: loose
/// enough for any summation order, tight enough to catch a lost block.
template <class T>
constexpr double tolerance() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, double>) return 1e-12;
  else return 0.0;
}

}  // namespace tally::cli
