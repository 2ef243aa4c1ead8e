// Helpers shared by the histogram, scatter and device-atomic tests.
#pragma once

#include <algorithm>
#include <cmath>
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

/// numpy.histogram's bin edges for `bins` equal bins over [lo, hi):
/// np.linspace(lo, hi, bins + 1) in double, which computes k·step + lo with
/// step = (hi - lo) / bins (two roundings, no fused multiply-add) and sets
/// the last edge to hi itself. Written here, sharing nothing with tally.
inline std::vector<double> numpy_edges(std::int64_t bins, double lo, double hi) {
  std::vector<double> edges(static_cast<std::size_t>(bins) + 1);
  const double step = (hi - lo) / static_cast<double>(bins);
  for (std::int64_t k = 0; k <= bins; ++k) {
    volatile double scaled = static_cast<double>(k) * step;  // rounded on its own, as numpy does
    edges[static_cast<std::size_t>(k)] = scaled + lo;
  }
  edges.back() = hi;
  return edges;
}

/// The bin of sample v under `edges`: k with edges[k] <= v < edges[k+1]
/// (a binary search), or -1 for NaN and v outside [edges[0], edges[last]).
template <class T>
std::int64_t bin_between(const std::vector<double>& edges, const T& sample) {
  const double v = static_cast<double>(sample);
  if (!(v >= edges.front() && v < edges.back())) return -1;
  return static_cast<std::int64_t>(std::upper_bound(edges.begin(), edges.end(), v) - edges.begin()) - 1;
}

/// The exact counts histogram_even must give: the documented rule (sample x
/// in bin k iff edges[k] <= x < edges[k+1]) with numpy's edges.
template <class Count, class T>
std::vector<Count> reference_even(const std::vector<T>& x, std::int64_t bins, double lo, double hi) {
  const auto edges = numpy_edges(bins, lo, hi);
  std::vector<Count> counts(static_cast<std::size_t>(bins), Count(0));
  for (const T& v : x) {
    const std::int64_t k = bin_between(edges, v);
    if (k >= 0) counts[static_cast<std::size_t>(k)] += Count(1);
  }
  return counts;
}

/// Samples on and around every edge: each edge, the doubles just below and
/// above it, lo and hi themselves and their neighbours outside the range.
inline std::vector<double> samples_at_edges(std::int64_t bins, double lo, double hi) {
  const auto edges = numpy_edges(bins, lo, hi);
  std::vector<double> x;
  for (double e : edges) {
    x.push_back(e);
    x.push_back(std::nextafter(e, -HUGE_VAL));
    x.push_back(std::nextafter(e, HUGE_VAL));
  }
  x.push_back(std::nextafter(lo, -HUGE_VAL));
  x.push_back(-HUGE_VAL);
  x.push_back(HUGE_VAL);
  x.push_back(std::nan(""));
  return x;
}

/// The strategies a forced-strategy test walks (automatic first).
inline constexpr tally::histogram_strategy kAllStrategies[] = {
    tally::histogram_strategy::automatic, tally::histogram_strategy::shared_memory,
    tally::histogram_strategy::cluster_memory, tally::histogram_strategy::aggregated_atomics,
    tally::histogram_strategy::plain_atomics,   tally::histogram_strategy::hot_keys};

/// Every option set a rejection must hold for: each strategy, plain and deterministic.
inline std::vector<tally::histogram_options> every_mode() {
  std::vector<tally::histogram_options> modes;
  for (auto s : kAllStrategies)
    for (bool deterministic : {false, true}) {
      tally::histogram_options opts;
      opts.strategy = s;
      opts.deterministic = deterministic;
      modes.push_back(opts);
    }
  return modes;
}

/// "shared_memory deterministic" etc., for failure messages.
inline std::string describe(const tally::histogram_options& opts) {
  return std::string(tally::to_string(opts.strategy)) + (opts.deterministic ? " deterministic" : "");
}

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
