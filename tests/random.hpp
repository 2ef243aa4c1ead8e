// Fresh random inputs for every run, reproducible on demand: the seed comes
// from std::random_device unless TALLY_TEST_SEED is set, and every test puts
// it in a SCOPED_TRACE so a failure prints how to replay it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tally/core/types.hpp"

namespace tally::testing {

/// A random engine with a fresh seed per instance (or TALLY_TEST_SEED).
class random_source {
 public:
  random_source() : seed_(pick_seed()), engine_(seed_) {}

  std::uint64_t seed() const { return seed_; }
  /// What to print beside a failure.
  std::string trace() const {
    return "random seed " + std::to_string(seed_) + " (replay with TALLY_TEST_SEED=" + std::to_string(seed_) + ")";
  }
  /// Uniform real in [lo, hi).
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
  /// Uniform integer in [lo, hi].
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_);
  }
  /// Uniform 64 random bits.
  std::uint64_t bits() { return engine_(); }

 private:
  static std::uint64_t pick_seed() {
    if (const char* s = std::getenv("TALLY_TEST_SEED")) return std::strtoull(s, nullptr, 10);
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }
  std::uint64_t seed_;
  std::mt19937_64 engine_;
};

/// One random element of T: reals uniform in [lo, hi) but never exactly zero
/// after rounding to T; integers uniform over their whole range (so integer
/// sums wrap, which the exact references model); complex numbers per part.
template <class T>
T random_value(random_source& rng, double lo = -1.0, double hi = 1.0) {
  if constexpr (is_complex_v<T>) {
    using R = typename T::value_type;
    return T(random_value<R>(rng, lo, hi), random_value<R>(rng, lo, hi));
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng.bits());
  } else {
    T v = convert<T>(rng.real(lo, hi));
    while (convert<double>(v) == 0.0) v = convert<T>(rng.real(lo, hi));
    return v;
  }
}

/// n random elements (see random_value).
template <class T>
std::vector<T> random_values(random_source& rng, std::size_t n, double lo = -1.0, double hi = 1.0) {
  std::vector<T> v(n);
  for (auto& x : v) x = random_value<T>(rng, lo, hi);
  return v;
}

/// n random integers in [lo, hi] stored as T (small ranges make ties).
template <class T>
std::vector<T> random_integers(random_source& rng, std::size_t n, std::int64_t lo, std::int64_t hi) {
  std::vector<T> v(n);
  for (auto& x : v) x = convert<T>(rng.integer(lo, hi));
  return v;
}

}  // namespace tally::testing
