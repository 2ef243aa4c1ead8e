// Histograms on both backends: exact integer counts against a host
// reference written here (numpy's edges and a binary search, nothing shared
// with tally's bin formula), for every bin-count regime (a block's shared
// memory, a cluster's, global atomics) and every forced strategy; samples on,
// just below and just above every edge.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_histogram_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class Histogram : public on_backend<Side> {};
TYPED_TEST_SUITE(Histogram, backends, backend_names);

template <class Side, class Count>
void check_even(random_source& rng, std::size_t n, std::int64_t bins, tally::histogram_options opts = {},
                std::size_t offset = 0) {
  SCOPED_TRACE(rng.trace() + " n=" + std::to_string(n) + " bins=" + std::to_string(bins));
  const double lo = -2.5, hi = 7.0;
  const auto x = samples_with_outliers(rng, n, lo, hi);
  buffer<double> samples(Side::on_gpu, n, offset);
  buffer<Count> counts(Side::on_gpu, static_cast<std::size_t>(bins));
  samples.write(x);
  tally::histogram_even(Side::backend(), samples.data(), static_cast<std::int64_t>(n), bins, lo, hi,
                        counts.data(), opts);
  EXPECT_EQ(counts.read(), (reference_even<Count>(x, bins, lo, hi)));
}

TYPED_TEST(Histogram, EvenCountsAreExactAtEveryBinCount) {
  random_source rng;
  for (std::int64_t bins : {1, 2, 3, 4, 8, 10, 16, 17, 64, 65, 1000, 12000, 70000, 300000, 2000000}) {
    check_even<TypeParam, std::int32_t>(rng, 200003, bins);
  }
  check_even<TypeParam, std::int64_t>(rng, 100000, 100);
  check_even<TypeParam, double>(rng, 100000, 100);
  check_even<TypeParam, float>(rng, 100000, 5);
}

// The documented rule, to the last bit: x is in bin k iff edges[k] <= x <
// edges[k+1] with numpy's edges; lo is in bin 0, hi and everything outside
// [lo, hi) or NaN is ignored. (x = 0.48 in [0, 1) with 1000 bins: numpy's
// edge 480 is 480 · 0.001 rounded, the double 0.48 itself, so bin 480, as
// numpy.histogram says; the edges' neighbours fall on either side.)
TYPED_TEST(Histogram, SamplesOnAndAroundEveryEdge) {
  using S = TypeParam;
  struct range {
    std::int64_t bins;
    double lo, hi;
  };
  for (const range r : {range{1000, 0.0, 1.0}, range{7, -2.5, 7.0}, range{3, 0.1, 0.7}, range{49, -1e-3, 3.3e-2},
                        range{100, -1e6, 1e6}, range{60000, 0.0, 6.0}, range{1, 1.0, 1.0 + 0x1p-40}}) {
    SCOPED_TRACE("bins=" + std::to_string(r.bins) + " lo=" + std::to_string(r.lo) + " hi=" + std::to_string(r.hi));
    auto x = samples_at_edges(r.bins, r.lo, r.hi);
    if (r.bins == 1000) x.push_back(0.48);
    const auto expected = reference_even<std::int32_t>(x, r.bins, r.lo, r.hi);
    buffer<double> samples(S::on_gpu, x.size());
    samples.write(x);
    for (auto s : kAllStrategies) {
      if (S::on_gpu ? !strategy_fits(s, r.bins, 4) : s != tally::histogram_strategy::automatic) continue;
      SCOPED_TRACE(tally::to_string(s));
      tally::histogram_options opts;
      opts.strategy = s;
      buffer<std::int32_t> counts(S::on_gpu, static_cast<std::size_t>(r.bins));
      tally::histogram_even(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), r.bins, r.lo, r.hi,
                            counts.data(), opts);
      const auto got = counts.read();
      for (std::size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], expected[k]) << "bin " << k;
    }
  }
}

TYPED_TEST(Histogram, SizesAroundBoundariesAndUnalignedSamples) {
  random_source rng;
  for (std::size_t n : {0, 1, 2, 31, 32, 33, 1023, 1025, 65537})
    for (std::size_t offset : {0, 1}) check_even<TypeParam, std::int32_t>(rng, n, 17, {}, offset);
}

TYPED_TEST(Histogram, EveryForcedStrategyGivesTheSameCounts) {
  random_source rng;
  // 1, 3, 8, 16: the register-counter kernel (shared_memory, counting).
  for (std::int64_t bins : {1, 3, 8, 16, 31, 3000, 40000}) {
    for (auto s : kAllStrategies) {
      if (TypeParam::on_gpu && !strategy_fits(s, bins, 4)) continue;
      SCOPED_TRACE(tally::to_string(s));
      tally::histogram_options opts;
      opts.strategy = s;
      tally::histogram_strategy chosen = tally::histogram_strategy::automatic;
      opts.chosen = &chosen;
      check_even<TypeParam, std::int32_t>(rng, 150001, bins, opts);
      if (TypeParam::on_gpu && s != tally::histogram_strategy::automatic) EXPECT_EQ(chosen, s);
      for (int grid : {1, 3, 64}) {  // the result must not depend on the grid
        opts.grid_blocks = grid;
        check_even<TypeParam, std::int32_t>(rng, 50001, bins, opts);
      }
    }
  }
}

// Zipf-like samples (density ∝ x^-1.1, as `tally bench histogram` draws
// them) over 300000 bins, with NaN and out-of-range samples as frequent as
// the hottest bins: from 2^20 samples the GPU samples the keys for hot ones
// (hot_keys), which must count exactly like the reference, whatever the grid.
TYPED_TEST(Histogram, SkewedSamplesOverManyBinsCountExactly) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = (std::size_t(1) << 20) + 333;
  const std::int64_t bins = 300000;
  const double lo = 0.0, hi = 1.0;
  const double top = 1.0 - std::pow(static_cast<double>(bins) + 1.0, -0.1);
  std::vector<double> x(n);
  for (auto& v : x) {
    const std::int64_t draw = rng.integer(0, 99);
    if (draw < 5) v = std::nan("");
    else if (draw < 10) v = draw < 8 ? 1.5 : hi;  // above the range, and hi itself: in no bin
    else v = (std::pow(1.0 - rng.real(0.0, 1.0) * top, -10.0) - 1.0) / static_cast<double>(bins);
  }
  buffer<double> samples(S::on_gpu, n);
  buffer<std::int32_t> counts(S::on_gpu, static_cast<std::size_t>(bins));
  samples.write(x);
  const auto expected = reference_even<std::int32_t>(x, bins, lo, hi);
  for (int grid : {0, 1, 9}) {
    tally::histogram_options opts;
    opts.grid_blocks = grid;
    tally::histogram_strategy chosen = tally::histogram_strategy::automatic;
    opts.chosen = &chosen;
    tally::histogram_even(S::backend(), samples.data(), static_cast<std::int64_t>(n), bins, lo, hi, counts.data(),
                          opts);
    EXPECT_EQ(counts.read(), expected) << "grid " << grid;
    if (S::on_gpu) EXPECT_EQ(chosen, tally::histogram_strategy::hot_keys) << "grid " << grid;
  }
}

// GPU only: a call leaves the workspace's zeroed bytes zero (the next call's
// counters and error words start there), checked after the hot_keys strategy
// on skewed and on uniform keys, twice each.
template <class Side>
class HistogramGpu : public on_backend<Side> {};
TYPED_TEST_SUITE(HistogramGpu, gpu_only, backend_names);

TYPED_TEST(HistogramGpu, HotKeysLeaveTheZeroedBytesZero) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = (std::size_t(1) << 20) + 17;
  const std::int64_t bins = 1000000;
  const double top = 1.0 - std::pow(static_cast<double>(bins) + 1.0, -0.1);
  std::vector<double> skewed(n), uniform(n);
  for (auto& v : skewed) v = (std::pow(1.0 - rng.real(0.0, 1.0) * top, -10.0) - 1.0) / static_cast<double>(bins);
  for (auto& v : uniform) v = rng.real(0.0, 1.0);
  tally::workspace ws;
  const auto gpu = tally::gpu.with(ws);
  buffer<double> samples(true, n);
  buffer<std::int32_t> counts(true, static_cast<std::size_t>(bins));
  for (const auto* x : {&skewed, &uniform, &skewed, &uniform}) {
    samples.write(*x);
    tally::histogram_options opts;
    tally::histogram_strategy chosen = tally::histogram_strategy::automatic;
    opts.chosen = &chosen;
    tally::histogram_even(gpu, samples.data(), static_cast<std::int64_t>(n), bins, 0.0, 1.0, counts.data(), opts);
    EXPECT_EQ(chosen, tally::histogram_strategy::hot_keys);
    EXPECT_EQ(counts.read(), (reference_even<std::int32_t>(*x, bins, 0.0, 1.0)));
    std::vector<unsigned char> zeroed(tally::workspace::kZeroedBytes, 0xff);
    TALLY_CUDA(cudaMemcpy(zeroed.data(), ws.get(0, nullptr), zeroed.size(), cudaMemcpyDeviceToHost));
    const auto dirty = std::find_if(zeroed.begin(), zeroed.end(), [](unsigned char b) { return b != 0; });
    EXPECT_EQ(dirty, zeroed.end()) << "byte " << (dirty - zeroed.begin()) << " of the zeroed bytes is not zero";
  }
}

TYPED_TEST(Histogram, EverySampleInOneBin) {
  using S = TypeParam;
  const std::size_t n = 1 << 20;
  for (std::int64_t bins : {1, 100, 100000}) {
    std::vector<double> x(n, 0.25);
    buffer<double> samples(S::on_gpu, n);
    buffer<std::int64_t> counts(S::on_gpu, static_cast<std::size_t>(bins));
    samples.write(x);
    tally::histogram_even(S::backend(), samples.data(), static_cast<std::int64_t>(n), bins, 0.0, 1.0,
                          counts.data());
    auto expected = std::vector<std::int64_t>(static_cast<std::size_t>(bins), 0);
    expected[static_cast<std::size_t>(bin_between(numpy_edges(bins, 0.0, 1.0), 0.25))] = static_cast<std::int64_t>(n);
    EXPECT_EQ(counts.read(), expected) << "bins=" << bins;
  }
}

struct sample_is_bin {
  __host__ __device__ std::int64_t operator()(std::int32_t v) const { return v; }
};

// 10^5 bins only fit a block as 16-bit counters (two per word): counts past
// 65535 in one block must carry exactly, in the low half, the high half of
// the same word, and the last word whose high half is no bin.
TYPED_TEST(Histogram, PackedCountersCountPastSixteenBits) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t bins = 100001;
  std::vector<std::int32_t> x;
  for (int i = 0; i < 140000; ++i) x.push_back(50000), x.push_back(50001);
  for (int i = 0; i < 70000; ++i) x.push_back(100000), x.push_back(static_cast<std::int32_t>(rng.integer(0, 100000)));
  for (int i = 0; i < 1000; ++i) x.push_back(static_cast<std::int32_t>(rng.integer(-5, 100010)));  // some outside
  for (std::size_t i = x.size() - 1; i > 0; --i) std::swap(x[i], x[static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(i)))]);
  std::vector<std::int64_t> expected(static_cast<std::size_t>(bins), 0);
  for (auto v : x)
    if (v >= 0 && v < bins) ++expected[static_cast<std::size_t>(v)];
  buffer<std::int32_t> samples(S::on_gpu, x.size());
  samples.write(x);
  for (int grid : {0, 1, 2}) {  // 1 and 2 blocks: each sees > 65535 samples of bins 50000 and 50001
    tally::histogram_options opts;
    opts.grid_blocks = grid;
    tally::histogram_strategy chosen = tally::histogram_strategy::plain_atomics;
    opts.chosen = &chosen;
    buffer<std::int32_t> counts(S::on_gpu, static_cast<std::size_t>(bins));
    tally::histogram_custom(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), bins, sample_is_bin{},
                            counts.data(), opts);
    const auto got = counts.read();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin())) << "grid=" << grid;
    if (S::on_gpu) EXPECT_EQ(chosen, tally::histogram_strategy::shared_memory) << "grid=" << grid;
    buffer<double> real_counts(S::on_gpu, static_cast<std::size_t>(bins));
    tally::histogram_custom(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), bins, sample_is_bin{},
                            real_counts.data(), opts);
    const auto got_real = real_counts.read();
    for (std::size_t k = 0; k < got_real.size(); ++k)
      ASSERT_EQ(got_real[k], static_cast<double>(expected[k])) << "bin " << k << " grid=" << grid;
  }
}

TYPED_TEST(Histogram, RangeCountsMatchUpperBound) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (std::int64_t num_levels : {2, 3, 50, 5000}) {
    std::vector<double> levels(static_cast<std::size_t>(num_levels));
    double v = -1;
    for (auto& l : levels) l = (v += rng.real(0.001, 1.0));
    const auto x = samples_with_outliers(rng, 100003, levels.front() - 0.5, levels.back() + 0.5);
    std::vector<std::int32_t> expected(levels.size() - 1, 0);
    for (double s : x) {
      if (!(s >= levels.front() && s < levels.back())) continue;
      ++expected[static_cast<std::size_t>(std::upper_bound(levels.begin(), levels.end(), s) - levels.begin() - 1)];
    }
    buffer<double> samples(S::on_gpu, x.size());
    buffer<std::int32_t> counts(S::on_gpu, expected.size());
    samples.write(x);
    tally::histogram_range(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), levels.data(),
                           num_levels, counts.data());
    EXPECT_EQ(counts.read(), expected) << "num_levels=" << num_levels;
  }
}

struct modulo_bins {
  std::int32_t m;
  __host__ __device__ std::int64_t operator()(std::int32_t v) const { return v < 0 ? -1 : v % m; }
};

TYPED_TEST(Histogram, CustomBinFunctionOnIntegers) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  std::vector<std::int32_t> x(77777);
  for (auto& v : x) v = static_cast<std::int32_t>(rng.integer(-100, 1000000));
  const std::int64_t bins = 37;
  std::vector<std::int32_t> expected(bins, 0);
  for (auto v : x)
    if (v >= 0) ++expected[static_cast<std::size_t>(v % 37)];
  buffer<std::int32_t> samples(S::on_gpu, x.size());
  buffer<std::int32_t> counts(S::on_gpu, bins);
  samples.write(x);
  tally::histogram_custom(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), bins, modulo_bins{37},
                          counts.data());
  EXPECT_EQ(counts.read(), expected);
}

TYPED_TEST(Histogram, WeightedSumsMatchALongDoubleReference) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 300001;
  for (std::int64_t bins : {1, 10, 5000, 100000}) {
    const auto x = samples_with_outliers(rng, n, 0.0, 1.0);
    std::vector<double> w(n);
    for (auto& v : w) v = rng.real(-1.0, 3.0);
    const auto edges = numpy_edges(bins, 0.0, 1.0);
    std::vector<long double> exact(static_cast<std::size_t>(bins), 0.0L), magnitude(exact);
    for (std::size_t i = 0; i < n; ++i) {
      const auto k = bin_between(edges, x[i]);
      if (k < 0) continue;
      exact[static_cast<std::size_t>(k)] += w[i];
      magnitude[static_cast<std::size_t>(k)] += std::fabs(w[i]);
    }
    buffer<double> samples(S::on_gpu, n), weights(S::on_gpu, n), sums(S::on_gpu, static_cast<std::size_t>(bins));
    samples.write(x);
    weights.write(w);
    tally::histogram_even_weighted(S::backend(), samples.data(), weights.data(), static_cast<std::int64_t>(n), bins,
                                   0.0, 1.0, sums.data());
    const auto got = sums.read();
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_NEAR(got[k], static_cast<double>(exact[k]), 1e-13 * static_cast<double>(magnitude[k]) + 1e-300)
          << "bin " << k << " of " << bins;
  }
}

// Deterministic weighted histograms (range: levels and sums share the call's
// scratch with the partial rows) equal the one-thread CPU bit for bit.
TYPED_TEST(Histogram, DeterministicWeightedHistogramsMatchTheCpuBitwise) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 200003;
  const auto x = samples_with_outliers(rng, n, 0.0, 1.0);
  std::vector<double> w(n);
  for (auto& v : w) v = rng.real(-1.0, 1.0) * std::pow(2.0, static_cast<double>(rng.integer(-30, 30)));
  buffer<double> samples(S::on_gpu, n), weights(S::on_gpu, n);
  samples.write(x);
  weights.write(w);
  tally::histogram_options det;
  det.deterministic = true;
  for (std::int64_t num_levels : {2, 51, 20001, 60001}) {
    std::vector<double> levels(static_cast<std::size_t>(num_levels));
    for (std::size_t k = 0; k < levels.size(); ++k)
      levels[k] = static_cast<double>(k) / static_cast<double>(num_levels - 1) * (1.0 + 1e-9);
    const auto bins = static_cast<std::size_t>(num_levels - 1);
    std::vector<double> reference(bins);
    tally::histogram_range_weighted(tally::cpu.with_threads(1), x.data(), w.data(), static_cast<std::int64_t>(n),
                                    levels.data(), num_levels, reference.data(), det);
    buffer<double> sums(S::on_gpu, bins);
    for (int grid : {0, 5}) {
      tally::histogram_options opts = det;
      opts.grid_blocks = grid;
      tally::histogram_range_weighted(S::backend(), samples.data(), weights.data(), static_cast<std::int64_t>(n),
                                      levels.data(), num_levels, sums.data(), opts);
      const auto got = sums.read();
      EXPECT_EQ(std::memcmp(got.data(), reference.data(), bins * sizeof(double)), 0)
          << "num_levels=" << num_levels << " grid=" << grid;
    }
    std::vector<double> even_reference(bins);
    tally::histogram_even_weighted(tally::cpu.with_threads(1), x.data(), w.data(), static_cast<std::int64_t>(n),
                                   num_levels - 1, 0.0, 1.0, even_reference.data(), det);
    // And the reference is right: per bin within the derived scale's
    // rounding (half of 2^-s per weight, s = 61 - e - ceil(log2 n)) of the
    // compensated long double sum.
    {
      const auto edges = numpy_edges(num_levels - 1, 0.0, 1.0);
      double largest = 0;
      for (double v : w) largest = std::max(largest, std::fabs(v));
      int log2n = 0;
      while ((std::size_t{1} << log2n) < n) ++log2n;
      const int scale = 61 - std::ilogb(largest) - log2n;
      std::vector<long double> exact(bins, 0.0L), low(bins, 0.0L);
      std::vector<std::int64_t> count(bins, 0);
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t k = bin_between(edges, x[i]);
        if (k < 0) continue;
        const auto b = static_cast<std::size_t>(k);
        const long double v = w[i], t = exact[b] + v;
        low[b] += std::fabs(exact[b]) >= std::fabs(v) ? (exact[b] - t) + v : (v - t) + exact[b];
        exact[b] = t;
        ++count[b];
      }
      for (std::size_t k = 0; k < bins; ++k) {
        const long double sum = exact[k] + low[k], rounding = count[k] * std::ldexp(1.0L, -scale - 1);
        ASSERT_LE(std::fabs(even_reference[k] - sum), rounding + (std::fabs(sum) + rounding) * 0x1p-53L)
            << "bin " << k << " of " << bins;
      }
    }
    tally::histogram_even_weighted(S::backend(), samples.data(), weights.data(), static_cast<std::int64_t>(n),
                                   num_levels - 1, 0.0, 1.0, sums.data(), det);
    const auto got = sums.read();
    EXPECT_EQ(std::memcmp(got.data(), even_reference.data(), bins * sizeof(double)), 0) << "bins=" << bins;
  }
}

TYPED_TEST(Histogram, BadArgumentsAreRejected) {
  using S = TypeParam;
  buffer<double> samples(S::on_gpu, 8);
  buffer<std::int32_t> counts(S::on_gpu, 8);
  expect_invalid([&] { tally::histogram_even(S::backend(), samples.data(), 8, 0, 0.0, 1.0, counts.data()); },
                 {"tally::histogram_even", "'bins'"});
  expect_invalid([&] { tally::histogram_even(S::backend(), samples.data(), 8, 4, 1.0, 1.0, counts.data()); },
                 {"tally::histogram_even", "'lo'"});
  expect_invalid([&] { tally::histogram_even(S::backend(), samples.data(), 8, 4, 2.0, 1.0, counts.data()); },
                 {"tally::histogram_even", "'lo'"});
  const double unsorted[] = {0.0, 2.0, 1.0, 3.0};
  expect_invalid([&] { tally::histogram_range(S::backend(), samples.data(), 8, unsorted, 4, counts.data()); },
                 {"tally::histogram_range", "'levels'"});
  expect_invalid([&] { tally::histogram_range(S::backend(), samples.data(), 8, unsorted, 1, counts.data()); },
                 {"tally::histogram_range", "'num_levels'"});
  expect_invalid(
      [&] { tally::histogram_even(S::backend(), static_cast<const double*>(nullptr), 8, 4, 0.0, 1.0, counts.data()); },
      {"tally::histogram_even", "'samples'"});
  if (S::on_gpu) {
    tally::histogram_options opts;
    opts.strategy = tally::histogram_strategy::shared_memory;
    buffer<std::int32_t> many(S::on_gpu, 10000000);
    expect_invalid([&] { tally::histogram_even(S::backend(), samples.data(), 8, 10000000, 0.0, 1.0, many.data(), opts); },
                   {"tally::histogram_even", "'options.strategy'"});
  }
}

}  // namespace
}  // namespace tally::testing
