// Helpers shared by the histogram, scatter and device-atomic tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends.hpp"
#include "random.hpp"
#include "tally/cpu/histogram.hpp"
#include "tally/histogram.hpp"
#if defined(__CUDACC__)
#include "tally/cuda/histogram.cuh"
#endif

namespace tally::testing {

/// n uniform samples in [lo, hi), a few of them outside the range and NaN.
inline std::vector<double> samples_with_outliers(random_source& rng, std::size_t n, double lo, double hi) {
  std::vector<double> x(n);
  for (auto& v : x) v = rng.real(lo, hi);
  for (std::size_t i = 0; i < n; i += 97) x[i] = (i % 3 == 0) ? hi : (i % 3 == 1 ? lo - 1 : std::nan(""));
  return x;
}

/// The exact counts histogram_even must give (same bin formula, on the host).
template <class Count, class T>
std::vector<Count> reference_even(const std::vector<T>& x, std::int64_t bins, double lo, double hi) {
  const auto key = tally::detail::make_even_bins("reference", bins, lo, hi);
  std::vector<Count> counts(static_cast<std::size_t>(bins), Count(0));
  for (const T& v : x) {
    const std::int64_t k = key(v);
    if (k >= 0) counts[static_cast<std::size_t>(k)] += Count(1);
  }
  return counts;
}

/// The strategies a forced-strategy test walks (automatic first).
inline constexpr tally::histogram_strategy kAllStrategies[] = {
    tally::histogram_strategy::automatic, tally::histogram_strategy::shared_memory,
    tally::histogram_strategy::cluster_memory, tally::histogram_strategy::aggregated_atomics,
    tally::histogram_strategy::plain_atomics};

/// Whether `s` can run `bins` bins of `slot` bytes here (GPU): shared needs
/// the bins in one block, cluster needs Hopper.
inline bool strategy_fits(tally::histogram_strategy s, std::int64_t bins, std::size_t slot) {
  if (s == tally::histogram_strategy::shared_memory) return bins * static_cast<std::int64_t>(slot) <= 150 * 1024;
  if (s == tally::histogram_strategy::cluster_memory) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    return major >= 9 && bins * static_cast<std::int64_t>(slot) <= 8 * 150 * 1024;
  }
  return true;
}

}  // namespace tally::testing
