// The inputs of `tally bench histogram` and their exact references.
//
// Samples are drawn by bin: sample i belongs to bin k_i (uniform, or a
// Zipf-like law) and is x_i = (k_i + f_i)/bins with f_i in [0.01, 0.99), so
// no sample lies within 1 % of a bin's width of an edge: every binning
// formula (tally's, CUB's, the atomics peers') puts it in bin k_i, and the
// reference counts are the k_i's histogram, computed without any binning.
// Scatter weights are multiples of 2^-20 in [-0.5, 1.5): every partial sum
// of 10^7 of them is exact in double in any order (|sum| < 2^24, 20
// fractional bits: 44 < 53 bits), so every row's sums equal the exact
// reference, bit for bit, deterministic mode or not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tally::cli {

/// How sample bins are drawn.
enum class sample_law { uniform, zipf };

/// n samples in [0, 1) for `bins` bins, and each one's bin.
struct samples {
  std::vector<double> x;
  std::vector<std::int64_t> bin;
};

/// The samples of law `law` for `bins` bins: the same for the same
/// (law, bins, n, seed), in this process or another (the CUB child).
samples make_samples(sample_law law, std::int64_t bins, std::int64_t n, std::uint64_t seed);

/// Exact counts of each bin.
std::vector<int> reference_counts(const samples& s, std::int64_t bins);

/// Weights for the scatter-add: w_i = m_i · 2^-20, m_i in [-2^19, 3·2^19).
std::vector<double> make_weights(std::int64_t n, std::uint64_t seed);

/// out[k] = Σ w_i over i with bin_i = k, exactly.
std::vector<double> reference_scatter(const samples& s, const std::vector<double>& weights, std::int64_t bins);

}  // namespace tally::cli
