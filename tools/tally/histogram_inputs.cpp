// Drawing the histogram inputs and their exact references.
#include "histogram_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace tally::cli {

samples make_samples(sample_law law, std::int64_t bins, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ (static_cast<std::uint64_t>(bins) * 0x9E3779B97F4A7C15ull) ^
                      (law == sample_law::zipf ? 0xA5A5A5A5ull : 0));
  std::uniform_real_distribution<double> unit(0.0, 1.0), inner(0.01, 0.99);
  std::uniform_int_distribution<std::int64_t> uniform_bin(0, bins - 1);
  // Zipf-like: density ∝ x^-1.1 on [1, bins + 1), by inverting its CDF
  // F(x) = (1 - x^-0.1) / (1 - (bins+1)^-0.1): O(1) per sample.
  const double top = 1.0 - std::pow(static_cast<double>(bins) + 1.0, -0.1);
  samples s;
  s.x.resize(static_cast<std::size_t>(n));
  s.bin.resize(static_cast<std::size_t>(n));
  const double width = 1.0 / static_cast<double>(bins);
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    std::int64_t k;
    double f;
    if (law == sample_law::uniform) {
      k = uniform_bin(rng);
      f = inner(rng);
    } else {
      const double at = std::pow(1.0 - unit(rng) * top, -10.0);  // in [1, bins + 1)
      k = std::clamp<std::int64_t>(static_cast<std::int64_t>(at) - 1, 0, bins - 1);
      f = 0.5;
    }
    s.bin[i] = k;
    s.x[i] = (static_cast<double>(k) + f) * width;
  }
  return s;
}

std::vector<int> reference_counts(const samples& s, std::int64_t bins) {
  std::vector<int> counts(static_cast<std::size_t>(bins), 0);
  for (const std::int64_t k : s.bin) ++counts[static_cast<std::size_t>(k)];
  return counts;
}

std::vector<double> make_weights(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x57EED5ull);
  std::uniform_int_distribution<std::int64_t> numerator(-(std::int64_t{1} << 19), 3 * (std::int64_t{1} << 19) - 1);
  std::vector<double> w(static_cast<std::size_t>(n));
  for (auto& v : w) v = std::ldexp(static_cast<double>(numerator(rng)), -20);
  return w;
}

std::vector<double> reference_scatter(const samples& s, const std::vector<double>& weights, std::int64_t bins) {
  // Integer numerators: the sums are exact integers, then scaled once (exactly).
  std::vector<std::int64_t> sums(static_cast<std::size_t>(bins), 0);
  for (std::size_t i = 0; i < s.bin.size(); ++i)
    sums[static_cast<std::size_t>(s.bin[i])] += static_cast<std::int64_t>(std::ldexp(weights[i], 20));
  std::vector<double> out(sums.size());
  for (std::size_t k = 0; k < sums.size(); ++k) out[k] = std::ldexp(static_cast<double>(sums[k]), -20);
  return out;
}

}  // namespace tally::cli
