// Bad input to the histogram functions on both backends: every rejected call
// names the function and the argument and leaves its output (and the guard
// zones around it) untouched, whatever the strategy and in deterministic
// mode; the GPU backend rejects host pointers; a valid call right after a
// rejected one (or after a failed CUDA call of the caller's) works; and
// histogram_even bins by NumPy's edges, against a reference written here.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "test_errors_support.hpp"
#include "test_histogram_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class HistogramErrors : public on_backend<Side> {};
TYPED_TEST_SUITE(HistogramErrors, backends, backend_names);

/// call() is rejected naming `function` and `argument`, and counts is untouched.
template <class Count, class Call>
void expect_rejected(const Call& call, guarded<Count>& counts, const char* function, const char* argument,
                     const std::string& context) {
  SCOPED_TRACE(context);
  const auto before = counts.bytes();
  expect_invalid(call, {std::string("tally::") + function, std::string("'") + argument + "'"});
  EXPECT_TRUE(unchanged(counts, before));
}

TYPED_TEST(HistogramErrors, EveryBadArgumentIsNamedAndLeavesTheCountsUntouched) {
  using S = TypeParam;
  const auto b = S::backend();
  const std::int64_t n = 1000, bins = 10;
  std::vector<double> host(n);
  for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<double>(i % 13) / 13.0;
  guarded<double> samples(S::on_gpu, n), weights(S::on_gpu, n);
  samples.write(host);
  weights.write(host);
  guarded<double> counts(S::on_gpu, bins);
  counts.write(std::vector<double>(bins, 7.0));  // a caller's old contents, never all zeros
  const double* x = samples.data();
  const double* w = weights.data();
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& opts : every_mode()) {
    const std::string mode = describe(opts);
    expect_rejected(
        [&] { tally::histogram_even(b, static_cast<const double*>(nullptr), n, bins, 0.0, 1.0, counts.data(), opts); },
        counts, "histogram_even", "samples", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, 0.0, 1.0, static_cast<double*>(nullptr), opts); },
                    counts, "histogram_even", "counts", mode);
    expect_rejected([&] { tally::histogram_even(b, x, -1, bins, 0.0, 1.0, counts.data(), opts); }, counts,
                    "histogram_even", "n", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, 0, 0.0, 1.0, counts.data(), opts); }, counts, "histogram_even",
                    "bins", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, 1.0, 1.0, counts.data(), opts); }, counts,
                    "histogram_even", "lo", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, nan, 1.0, counts.data(), opts); }, counts,
                    "histogram_even", "lo", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, -inf, 1.0, counts.data(), opts); }, counts,
                    "histogram_even", "lo", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, 0.0, inf, counts.data(), opts); }, counts,
                    "histogram_even", "hi", mode);
    // A width that overflows, and a bins/width that overflows.
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, -1e308, 1e308, counts.data(), opts); }, counts,
                    "histogram_even", "hi", mode);
    expect_rejected([&] { tally::histogram_even(b, x, n, 1000000, 0.0, 1e-320, counts.data(), opts); }, counts,
                    "histogram_even", "hi", mode);
    // Counts overlapping the samples or the weights.
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, 0.0, 1.0, samples.data() + 5, opts); }, counts,
                    "histogram_even", "counts", mode);
    expect_rejected([&] { tally::histogram_even_weighted(b, x, w, n, bins, 0.0, 1.0, weights.data() + 5, opts); },
                    counts, "histogram_even_weighted", "counts", mode);
    expect_rejected(
        [&] {
          tally::histogram_even_weighted(b, x, static_cast<const double*>(nullptr), n, bins, 0.0, 1.0, counts.data(),
                                         opts);
        },
        counts, "histogram_even_weighted", "weights", mode);
    const double unsorted[] = {0.0, 0.5, 0.25, 1.0};
    expect_rejected([&] { tally::histogram_range(b, x, n, unsorted, 4, counts.data(), opts); }, counts,
                    "histogram_range", "levels", mode);
    expect_rejected([&] { tally::histogram_range(b, x, n, unsorted, 1, counts.data(), opts); }, counts,
                    "histogram_range", "num_levels", mode);
    expect_rejected(
        [&] { tally::histogram_range(b, x, n, static_cast<const double*>(nullptr), 4, counts.data(), opts); }, counts,
        "histogram_range", "levels", mode);
    tally::histogram_options bad_bits = opts;
    bad_bits.deterministic = true;
    bad_bits.fixed_point_bits = 2000;
    expect_rejected([&] { tally::histogram_even_weighted(b, x, w, n, bins, 0.0, 1.0, counts.data(), bad_bits); },
                    counts, "histogram_even_weighted", "options.fixed_point_bits", mode);
    tally::histogram_options unchecked_errors = opts;
    unchecked_errors.checks = tally::check_mode::unchecked;
    auto* record = reinterpret_cast<tally::scatter_errors*>(counts.data());  // never written: rejected first
    unchecked_errors.errors = record;
    expect_rejected([&] { tally::histogram_even(b, x, n, bins, 0.0, 1.0, counts.data(), unchecked_errors); }, counts,
                    "histogram_even", "options.errors", mode);
    // index_add's strategy, on both backends (the CPU has no strategies, but
    // a call must not be valid on one backend only).
    tally::histogram_options sorted = opts;
    sorted.strategy = tally::histogram_strategy::sorted_rows;
    expect_rejected([&] { tally::histogram_even_weighted(b, x, w, n, bins, 0.0, 1.0, counts.data(), sorted); },
                    counts, "histogram_even_weighted", "options.strategy", mode);
  }
}

TYPED_TEST(HistogramErrors, AValidCallRightAfterARejectedOneCountsCorrectly) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 50001, bins = 37;
  const auto host = samples_with_outliers(rng, static_cast<std::size_t>(n), -2.0, 3.0);
  guarded<double> samples(S::on_gpu, n);
  samples.write(host);
  guarded<std::int32_t> counts(S::on_gpu, bins);
  const auto expected = reference_even<std::int32_t>(host, bins, -2.0, 3.0);
  for (auto s : kAllStrategies) {
    tally::histogram_options opts;
    opts.strategy = s;
    expect_invalid(
        [&] { tally::histogram_even(S::backend(), samples.data(), n, bins, 3.0, -2.0, counts.data(), opts); },
        {"tally::histogram_even", "'lo'"});
    tally::histogram_even(S::backend(), samples.data(), n, bins, -2.0, 3.0, counts.data(), opts);
    EXPECT_EQ(counts.read(), expected) << tally::to_string(s);
    EXPECT_TRUE(counts.guards_intact()) << tally::to_string(s);
  }
}

/// The bins NumPy's histogram gives for [lo, hi) (x == hi excluded, as tally
/// documents): edges as np.linspace computes them, then the last edge <= x.
std::int64_t numpy_bin(double x, std::int64_t bins, double lo, double hi) {
  if (!(x >= lo && x < hi)) return -1;
  const double step = (hi - lo) / static_cast<double>(bins);
  std::int64_t low = 0, high = bins;  // edge(low) <= x < edge(high)
  const auto edge = [&](std::int64_t k) {
    volatile double product = static_cast<double>(k) * step;  // rounded on its own, as NumPy does
    return k == bins ? hi : product + lo;
  };
  while (high - low > 1) {
    const std::int64_t mid = (low + high) / 2;
    if (edge(mid) <= x)
      low = mid;
    else
      high = mid;
  }
  return low;
}

TYPED_TEST(HistogramErrors, EvenBinsFollowNumPysEdgesExactly) {
  using S = TypeParam;
  struct range {
    double lo, hi;
    std::int64_t bins;
  };
  for (const range r : {range{0.0, 1.0, 1000}, range{-3.7, 11.3, 977}, range{1e-3, 1e3, 12345}, range{-1.0, 1.0, 3},
                        range{100.0, 100.5, 64}, range{1e6, 1e6 + 1.0, 1000}, range{-1e12, 3e12, 999},
                        // bins two ulps wide: every sample takes the edge correction
                        range{1.0, 1.0 + 0x1p-46, 32}}) {
    char trace[96];
    std::snprintf(trace, sizeof(trace), "[%.17g, %.17g) in %lld bins", r.lo, r.hi, static_cast<long long>(r.bins));
    SCOPED_TRACE(trace);
    // Every edge, and the doubles just below and above it, lo and hi themselves, NaN and infinities.
    std::vector<double> x;
    const double step = (r.hi - r.lo) / static_cast<double>(r.bins);
    for (std::int64_t k = 0; k <= r.bins; ++k) {
      volatile double product = static_cast<double>(k) * step;
      const double e = k == r.bins ? r.hi : product + r.lo;
      x.push_back(e);
      x.push_back(std::nextafter(e, -INFINITY));
      x.push_back(std::nextafter(e, INFINITY));
      x.push_back(r.lo + (static_cast<double>(k) + 0.5) * step);
      // Further out, around the distance below which the bin is corrected
      // against the edges (even_bins::margin) and beyond it.
      const double ulp = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
      for (const double ulps : {2.0, 16.0, 256.0, 4096.0, 65536.0}) {
        x.push_back(e - ulps * ulp);
        x.push_back(e + ulps * ulp);
      }
    }
    x.push_back(std::nan(""));
    x.push_back(INFINITY);
    x.push_back(-INFINITY);
    std::vector<std::int32_t> expected(static_cast<std::size_t>(r.bins), 0);
    for (double v : x) {
      const std::int64_t k = numpy_bin(v, r.bins, r.lo, r.hi);
      if (k >= 0) ++expected[static_cast<std::size_t>(k)];
    }
    guarded<double> samples(S::on_gpu, x.size());
    samples.write(x);
    guarded<std::int32_t> counts(S::on_gpu, static_cast<std::size_t>(r.bins));
    for (auto s : kAllStrategies) {
      if (S::on_gpu && !strategy_fits(s, r.bins, 4)) continue;
      tally::histogram_options opts;
      opts.strategy = s;
      tally::histogram_even(S::backend(), samples.data(), static_cast<std::int64_t>(x.size()), r.bins, r.lo, r.hi,
                            counts.data(), opts);
      EXPECT_EQ(counts.read(), expected) << tally::to_string(s);
      EXPECT_TRUE(counts.guards_intact());
    }
  }
  // The issue's example. Exact arithmetic puts the double 0.48 (just below
  // 0.48) in bin 479, but NumPy's edge 480 (480 · 0.001, rounded) is that
  // same double, so numpy.histogram -- and tally -- count it in bin 480; the
  // double just below it lands in 479.
  EXPECT_EQ(numpy_bin(0.48, 1000, 0.0, 1.0), 480);
  EXPECT_EQ(numpy_bin(std::nextafter(0.48, 0.0), 1000, 0.0, 1.0), 479);
  const std::vector<double> pair = {0.48, std::nextafter(0.48, 0.0)};
  guarded<double> samples(S::on_gpu, 2);
  samples.write(pair);
  guarded<std::int32_t> counts(S::on_gpu, 1000);
  tally::histogram_even(S::backend(), samples.data(), 2, 1000, 0.0, 1.0, counts.data());
  const auto got = counts.read();
  EXPECT_EQ(got[479], 1);
  EXPECT_EQ(got[480], 1);
}

TYPED_TEST(HistogramErrors, DeterministicModeNeverInspectsTheWeightsOfIgnoredSamples) {
  using S = TypeParam;
  // In-range samples with ordinary weights; out-of-range and NaN samples carry
  // NaN and infinite weights, which must be ignored like the samples.
  const std::int64_t n = 4099, bins = 8;
  std::vector<double> x(n), w(n);
  std::vector<long double> want(bins, 0.0L);
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 5 == 0) {
      x[i] = (i % 3 == 0) ? 2.0 : (i % 3 == 1 ? std::nan("") : -1.0);
      w[i] = (i % 2 == 0) ? std::nan("") : -INFINITY;
    } else {
      x[i] = static_cast<double>(i % 8) / 8.0 + 1.0 / 16.0;
      w[i] = static_cast<double>(i % 7) - 3.0;  // small integers: every fixed-point sum is exact
      want[static_cast<std::size_t>(i % 8)] += w[i];
    }
  }
  guarded<double> samples(S::on_gpu, n), weights(S::on_gpu, n), counts(S::on_gpu, bins);
  samples.write(x);
  weights.write(w);
  for (int given : {0, 1}) {
    for (auto s : kAllStrategies) {
      tally::histogram_options opts;
      opts.deterministic = true;
      opts.strategy = s;
      if (given) opts.fixed_point_bits = 20;
      tally::histogram_even_weighted(S::backend(), samples.data(), weights.data(), n, bins, 0.0, 1.0, counts.data(),
                                     opts);
      const auto got = counts.read();
      for (std::int64_t k = 0; k < bins; ++k)
        EXPECT_EQ(got[k], static_cast<double>(want[k])) << tally::to_string(s) << " bin " << k << " given " << given;
      EXPECT_TRUE(counts.guards_intact());
    }
  }
  // A NaN weight on a sample that lands in a bin is an error naming 'weights', after the others were counted.
  w[1] = std::nan("");
  want[1] -= static_cast<long double>(static_cast<double>(1 % 7) - 3.0);
  weights.write(w);
  for (auto s : kAllStrategies) {
    tally::histogram_options opts;
    opts.deterministic = true;
    opts.strategy = s;
    expect_invalid(
        [&] {
          tally::histogram_even_weighted(S::backend(), samples.data(), weights.data(), n, bins, 0.0, 1.0, counts.data(),
                                         opts);
        },
        {"tally::histogram_even_weighted", "'weights'"});
    const auto got = counts.read();
    for (std::int64_t k = 0; k < bins; ++k) EXPECT_EQ(got[k], static_cast<double>(want[k])) << tally::to_string(s);
    EXPECT_TRUE(counts.guards_intact());
  }
}

// GPU only: typed over gpu_only so the names are "HistogramErrorsGpu/gpu.*"
// (backends.hpp), which the sanitizer stage of scripts/gpu-check selects.
template <class Side>
class HistogramErrorsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    TALLY_REQUIRE_GPU_OR_SKIP();  // fails instead under TALLY_REQUIRE_GPU=1
  }
};
TYPED_TEST_SUITE(HistogramErrorsGpu, gpu_only, backend_names);

TYPED_TEST(HistogramErrorsGpu, ForcedStrategyThatCannotRunLeavesTheCountsUntouched) {
  // GPU only: the CPU backend ignores the strategy.
  guarded<double> samples(true, 8);
  samples.write(std::vector<double>(8, 0.5));
  guarded<std::int32_t> counts(true, 10000000);
  tally::histogram_options opts;
  opts.strategy = tally::histogram_strategy::shared_memory;
  const auto before = counts.bytes();
  expect_invalid([&] { tally::histogram_even(tally::gpu, samples.data(), 8, 10000000, 0.0, 1.0, counts.data(), opts); },
                 {"tally::histogram_even", "'options.strategy'"});
  EXPECT_TRUE(unchanged(counts, before));
}

TYPED_TEST(HistogramErrorsGpu, HostPointersAreRejectedNamingTheArgument) {
  const std::int64_t n = 1000, bins = 10;
  std::vector<double> host_samples(n, 0.5), host_weights(n, 1.0);
  std::vector<std::int32_t> host_counts(bins, 0);
  std::vector<double> host_double_counts(bins, 0);
  guarded<double> samples(true, n), weights(true, n);
  samples.write(host_samples);
  weights.write(host_weights);
  guarded<std::int32_t> counts(true, bins);
  guarded<double> dcounts(true, bins);
  for (const auto& opts : every_mode()) {
    const std::string mode = describe(opts);
    expect_rejected(
        [&] { tally::histogram_even(tally::gpu, host_samples.data(), n, bins, 0.0, 1.0, counts.data(), opts); }, counts,
        "histogram_even", "samples", mode);
    expect_rejected(
        [&] {
          tally::histogram_even_weighted(tally::gpu, samples.data(), host_weights.data(), n, bins, 0.0, 1.0,
                                         dcounts.data(), opts);
        },
        dcounts, "histogram_even_weighted", "weights", mode);
    const auto before = host_counts;
    expect_invalid(
        [&] { tally::histogram_even(tally::gpu, samples.data(), n, bins, 0.0, 1.0, host_counts.data(), opts); },
        {"tally::histogram_even", "'counts'"});
    EXPECT_EQ(host_counts, before);
    const double levels[] = {0.0, 0.25, 0.5, 1.0};  // host by design: accepted
    expect_rejected([&] { tally::histogram_range(tally::gpu, host_samples.data(), n, levels, 4, counts.data(), opts); },
                    counts, "histogram_range", "samples", mode);
  }
  // And the context is fine: a valid call works.
  tally::histogram_even(tally::gpu, samples.data(), n, bins, 0.0, 1.0, counts.data());
  const auto got = counts.read();
  EXPECT_EQ(got[5], n);
}

TYPED_TEST(HistogramErrorsGpu, ProvokedCudaErrorOfTheCallerDoesNotFailTheNextCall) {
  const std::int64_t n = 1000, bins = 10;
  guarded<double> samples(true, n);
  samples.write(std::vector<double>(n, 0.25));
  guarded<std::int32_t> counts(true, bins);
  void* absurd = nullptr;
  ASSERT_NE(cudaMalloc(&absurd, std::size_t(1) << 62), cudaSuccess);  // leaves an error in cudaGetLastError
  for (auto s : kAllStrategies) {
    tally::histogram_options opts;
    opts.strategy = s;
    tally::histogram_even(tally::gpu, samples.data(), n, bins, 0.0, 1.0, counts.data(), opts);
    EXPECT_EQ(counts.read()[2], n) << tally::to_string(s);
  }
  (void)cudaGetLastError();
  // A rejected call leaves nothing behind for the caller's own launch checks.
  std::vector<double> host(n, 0.5);
  expect_invalid([&] { tally::histogram_even(tally::gpu, host.data(), n, bins, 0.0, 1.0, counts.data()); },
                 {"tally::histogram_even", "'samples'"});
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace tally::testing
