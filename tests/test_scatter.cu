// scatter_reduce on both backends: exact integer sums, other operators,
// complex values, the deterministic fixed-point mode (bitwise stable across
// runs, grids, strategies and backends), and the checked mode's bad indices.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bit_patterns.hpp"
#include "test_histogram_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class Scatter : public on_backend<Side> {};
TYPED_TEST_SUITE(Scatter, backends, backend_names);

std::vector<std::int32_t> random_indices(random_source& rng, std::size_t n, std::int64_t size, bool skewed) {
  std::vector<std::int32_t> index(n);
  for (auto& k : index) {
    // Skewed: half the elements land on a handful of destinations.
    const bool hot = skewed && rng.integer(0, 1) == 0;
    k = static_cast<std::int32_t>(hot ? rng.integer(0, std::min<std::int64_t>(size - 1, 3)) : rng.integer(0, size - 1));
  }
  return index;
}

TYPED_TEST(Scatter, IntegerSumsAreExactForEveryStrategy) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 200001;
  for (std::int64_t size : {1, 9, 4000, 1000000}) {
    for (bool skewed : {false, true}) {
      const auto index = random_indices(rng, n, size, skewed);
      std::vector<std::int64_t> value(n);
      for (auto& v : value) v = rng.integer(-1000000, 1000000);
      std::vector<std::int64_t> start(static_cast<std::size_t>(size));
      for (auto& v : start) v = rng.integer(-5, 5);
      auto expected = start;
      for (std::size_t i = 0; i < n; ++i) expected[static_cast<std::size_t>(index[i])] += value[i];
      buffer<std::int32_t> idx(S::on_gpu, n);
      buffer<std::int64_t> val(S::on_gpu, n), out(S::on_gpu, static_cast<std::size_t>(size));
      idx.write(index);
      val.write(value);
      for (auto s : kAllStrategies) {
        if (S::on_gpu && !strategy_fits(s, size, 8)) continue;
        tally::histogram_options opts;
        opts.strategy = s;
        out.write(start);
        tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                              tally::plus{}, opts);
        EXPECT_EQ(out.read(), expected) << "size=" << size << " skewed=" << skewed << " " << tally::to_string(s);
      }
    }
  }
}

TYPED_TEST(Scatter, MaximumAndComplexSums) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 100003;
  const std::int64_t size = 50;
  const auto index = random_indices(rng, n, size, true);
  std::vector<double> value(n);
  for (auto& v : value) v = rng.real(-1e3, 1e3);
  std::vector<double> expected(size, -1e300);
  for (std::size_t i = 0; i < n; ++i) expected[index[i]] = std::max(expected[index[i]], value[i]);
  buffer<std::int32_t> idx(S::on_gpu, n);
  buffer<double> val(S::on_gpu, n), out(S::on_gpu, size);
  idx.write(index);
  val.write(value);
  out.write(std::vector<double>(size, -1e300));
  tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                        tally::maximum{});
  EXPECT_EQ(out.read(), expected);

  using Z = tally::complex<double>;
  std::vector<Z> zv(n);
  std::vector<long double> re(size, 0), im(size, 0);
  for (std::size_t i = 0; i < n; ++i) {
    zv[i] = Z(rng.real(-1, 1), rng.real(-1, 1));
    re[index[i]] += zv[i].real();
    im[index[i]] += zv[i].imag();
  }
  buffer<Z> zval(S::on_gpu, n), zout(S::on_gpu, size);
  zval.write(zv);
  zout.write(std::vector<Z>(size, Z(0, 0)));
  tally::scatter_reduce(S::backend(), idx.data(), zval.data(), static_cast<std::int64_t>(n), zout.data(), size);
  const auto got = zout.read();
  for (std::int64_t k = 0; k < size; ++k) {
    EXPECT_NEAR(got[k].real(), static_cast<double>(re[k]), 1e-9) << k;
    EXPECT_NEAR(got[k].imag(), static_cast<double>(im[k]), 1e-9) << k;
  }
}

template <class V>
bool bitwise_equal(const std::vector<V>& a, const std::vector<V>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0;
}

TYPED_TEST(Scatter, DeterministicSumsAreBitwiseStable) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 200009;  // modest: ~60 GPU calls, also run under compute-sanitizer
  for (std::int64_t size : {1, 100, 30000}) {
    const auto index = random_indices(rng, n, size, false);
    std::vector<double> value(n);
    for (auto& v : value) v = rng.real(-1.0, 1.0) * std::pow(2.0, static_cast<double>(rng.integer(-20, 20)));
    buffer<std::int32_t> idx(S::on_gpu, n);
    buffer<double> val(S::on_gpu, n), out(S::on_gpu, static_cast<std::size_t>(size));
    idx.write(index);
    val.write(value);
    // The CPU with one thread is the reference the GPU must equal bit for bit.
    std::vector<double> reference(static_cast<std::size_t>(size), 0.0);
    tally::histogram_options det;
    det.deterministic = true;
    tally::scatter_reduce(tally::cpu.with_threads(1), index.data(), value.data(), static_cast<std::int64_t>(n),
                          reference.data(), size, tally::plus{}, det);
    long double exact_total = 0, magnitude = 0;
    for (double v : value) exact_total += v, magnitude += std::fabs(v);
    long double got_total = 0;
    for (double v : reference) got_total += v;
    EXPECT_NEAR(static_cast<double>(got_total), static_cast<double>(exact_total), 1e-9 * static_cast<double>(magnitude));
    for (auto s : kAllStrategies) {
      if (S::on_gpu && !strategy_fits(s, size, 8)) continue;
      for (int grid : {0, 1, 7, 300}) {
        tally::histogram_options opts = det;
        opts.strategy = s;
        opts.grid_blocks = grid;
        out.write(std::vector<double>(static_cast<std::size_t>(size), 0.0));
        tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                              tally::plus{}, opts);
        EXPECT_TRUE(bitwise_equal(out.read(), reference))
            << "size=" << size << " grid=" << grid << " " << tally::to_string(s);
      }
    }
    // A given scale: also bitwise stable.
    tally::histogram_options given = det;
    given.fixed_point_bits = 20;
    std::vector<double> first;
    for (int run = 0; run < 3; ++run) {
      out.write(std::vector<double>(static_cast<std::size_t>(size), 0.0));
      given.grid_blocks = run * 5;
      tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                            tally::plus{}, given);
      if (run == 0) first = out.read();
      else EXPECT_TRUE(bitwise_equal(out.read(), first)) << "run " << run;
    }
  }
}

/// Deterministic sums into bins whose sum is exactly zero -- no element lands
/// there, or the values cancel (v and -v) -- leave those bins as they were,
/// bit for bit (-0, a NaN's payload); the other bins get out + sum. Every
/// strategy that fits, the CPU with one thread the reference.
TYPED_TEST(Scatter, DeterministicZeroSumsLeaveTheirBinsAsTheyWere) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 4000;
  for (std::int64_t size : {8, 30000}) {
    // Bins 0 and 1: pairs that cancel; bins 2..5: random values; the others
    // (below 30000) uniform, every second bin left empty.
    std::vector<std::int32_t> index(n);
    std::vector<double> value(n);
    for (std::size_t i = 0; i < n; i += 2) {
      const auto bin = static_cast<std::int32_t>(size == 8 ? i / 2 % 6 : 2 * rng.integer(0, size / 2 - 1));
      const double v = std::ldexp(rng.real(-1.0, 1.0), static_cast<int>(rng.integer(-20, 20)));
      index[i] = index[i + 1] = bin;
      value[i] = v;
      value[i + 1] = bin < 2 ? -v : std::ldexp(rng.real(-1.0, 1.0), static_cast<int>(rng.integer(-20, 20)));
    }
    std::vector<double> start(static_cast<std::size_t>(size));
    for (auto& v : start) v = rng.real(-1.0, 1.0);
    start[0] = -0.0;
    start[1] = odd_nan<double>();
    start[static_cast<std::size_t>(size) - 1] = odd_nan<double>();  // an empty bin
    tally::histogram_options det;
    det.deterministic = true;
    auto reference = start;
    tally::scatter_reduce(tally::cpu.with_threads(1), index.data(), value.data(), static_cast<std::int64_t>(n),
                          reference.data(), size, tally::plus{}, det);
    EXPECT_EQ(std::memcmp(reference.data(), start.data(), 2 * sizeof(double)), 0) << "bins 0 and 1 changed";
    EXPECT_EQ(std::memcmp(&reference.back(), &start.back(), sizeof(double)), 0) << "the empty last bin changed";
    buffer<std::int32_t> idx(S::on_gpu, n);
    buffer<double> val(S::on_gpu, n), out(S::on_gpu, static_cast<std::size_t>(size));
    idx.write(index);
    val.write(value);
    for (auto s : kAllStrategies) {
      if (S::on_gpu && !strategy_fits(s, size, 8)) continue;
      tally::histogram_options opts = det;
      opts.strategy = s;
      out.write(start);
      tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                            tally::plus{}, opts);
      EXPECT_TRUE(bitwise_equal(out.read(), reference)) << "size=" << size << " " << tally::to_string(s);
    }
  }
}

/// Keys skewed as hot_keys expects them: 40 % on one key, 20 % on three, 10 %
/// on 300 (each still above the sample's 0.1 % threshold only in part), the
/// rest uniform over `size`, shuffled.
std::vector<std::int32_t> skewed_keys(random_source& rng, std::size_t n, std::int64_t size) {
  const std::int32_t few[3] = {static_cast<std::int32_t>(size - 1), static_cast<std::int32_t>(size / 2), 999};
  std::vector<std::int32_t> index(n);
  for (auto& k : index) {
    const std::int64_t draw = rng.integer(0, 99);
    if (draw < 40) k = 7;
    else if (draw < 60) k = few[rng.integer(0, 2)];
    else if (draw < 70) k = static_cast<std::int32_t>(1000 + 17 * rng.integer(0, 299));
    else k = static_cast<std::int32_t>(rng.integer(0, size - 1));
  }
  return index;
}

// Skewed keys over more bins than a block holds, from 2^20 elements: the GPU
// picks hot_keys by itself. Exact integer sums, maxima (the hot sums' CAS in
// shared memory) and deterministic sums equal to the CPU's bits, for the
// automatic and the forced strategy and several grids.
TYPED_TEST(Scatter, SkewedKeysOverManyBinsAreSummedExactly) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = (std::size_t(1) << 20) + 4099;
  const std::int64_t size = 1000003;
  const auto index = skewed_keys(rng, n, size);
  std::vector<std::int64_t> integers(n);
  std::vector<double> reals(n);
  for (std::size_t i = 0; i < n; ++i) {
    integers[i] = rng.integer(-1000000, 1000000);
    reals[i] = std::ldexp(rng.real(-1.0, 1.0), static_cast<int>(rng.integer(-10, 10)));
  }
  std::vector<std::int64_t> start(static_cast<std::size_t>(size));
  for (auto& v : start) v = rng.integer(-5, 5);
  auto sums = start;
  std::vector<double> maxima(static_cast<std::size_t>(size), -1e300);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(index[i]);
    sums[k] += integers[i];
    maxima[k] = std::max(maxima[k], reals[i]);
  }
  std::vector<double> reference(static_cast<std::size_t>(size), 0.0);
  tally::histogram_options det;
  det.deterministic = true;
  tally::scatter_reduce(tally::cpu.with_threads(1), index.data(), reals.data(), static_cast<std::int64_t>(n),
                        reference.data(), size, tally::plus{}, det);

  buffer<std::int32_t> idx(S::on_gpu, n);
  buffer<std::int64_t> ints(S::on_gpu, n), int_out(S::on_gpu, static_cast<std::size_t>(size));
  buffer<double> vals(S::on_gpu, n), out(S::on_gpu, static_cast<std::size_t>(size));
  idx.write(index);
  ints.write(integers);
  vals.write(reals);
  for (auto s : {tally::histogram_strategy::automatic, tally::histogram_strategy::hot_keys}) {
    for (int grid : {0, 1, 5}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + " grid " + std::to_string(grid));
      tally::histogram_options opts;
      opts.strategy = s;
      opts.grid_blocks = grid;
      tally::histogram_strategy chosen = tally::histogram_strategy::automatic;
      opts.chosen = &chosen;
      int_out.write(start);
      tally::scatter_reduce(S::backend(), idx.data(), ints.data(), static_cast<std::int64_t>(n), int_out.data(), size,
                            tally::plus{}, opts);
      EXPECT_EQ(int_out.read(), sums);
      if (S::on_gpu) EXPECT_EQ(chosen, tally::histogram_strategy::hot_keys);
      out.write(std::vector<double>(static_cast<std::size_t>(size), -1e300));
      tally::scatter_reduce(S::backend(), idx.data(), vals.data(), static_cast<std::int64_t>(n), out.data(), size,
                            tally::maximum{}, opts);
      EXPECT_EQ(out.read(), maxima);
      opts.deterministic = true;
      out.write(std::vector<double>(static_cast<std::size_t>(size), 0.0));
      tally::scatter_reduce(S::backend(), idx.data(), vals.data(), static_cast<std::int64_t>(n), out.data(), size,
                            tally::plus{}, opts);
      EXPECT_TRUE(bitwise_equal(out.read(), reference));
    }
  }
}

/// ceil(log2 n), written here (histogram_options: the scale's headroom).
int ceil_log2(std::int64_t n) {
  int bits = 0;
  while ((std::int64_t{1} << bits) < n) ++bits;
  return bits;
}

/// The derived scale of histogram_options::deterministic: s = 61 - e -
/// ceil(log2 n), e the exponent of the largest |value| (2^e <= max < 2^(e+1)).
int derived_scale(const std::vector<double>& value) {
  double largest = 0;
  for (double v : value) largest = std::max(largest, std::fabs(v));
  return 61 - std::ilogb(largest) - ceil_log2(static_cast<std::int64_t>(value.size()));
}

/// Runs a deterministic scatter-add of value into `size` zeroed bins with
/// scale `bits` (kDeriveFixedPointScale: derived, `scale` then the one the
/// contract derives) and checks every bin against the long double sum: each
/// value rounds to a multiple of 2^-s (half a unit each), the int64 sum is
/// exact, and its conversion to double rounds once.
template <class Side>
void expect_fixed_point_accuracy(const std::vector<std::int32_t>& index, const std::vector<double>& value,
                                 std::int64_t size, int bits, int scale) {
  const std::size_t n = value.size();
  SCOPED_TRACE("n=" + std::to_string(n) + " bins=" + std::to_string(size) + " scale 2^" + std::to_string(scale) +
               (bits == kDeriveFixedPointScale ? " (derived)" : " (given)"));
  // Per bin, a compensated long double sum (sum + error term): the values
  // span up to 93 bits, more than a long double holds.
  std::vector<long double> exact(static_cast<std::size_t>(size), 0.0L), low(exact);
  std::vector<std::int64_t> count(static_cast<std::size_t>(size), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(index[i]);
    const long double v = value[i], t = exact[k] + v;
    low[k] += std::fabs(exact[k]) >= std::fabs(v) ? (exact[k] - t) + v : (v - t) + exact[k];
    exact[k] = t;
    ++count[k];
  }
  for (std::size_t k = 0; k < exact.size(); ++k) exact[k] += low[k];
  buffer<std::int32_t> idx(Side::on_gpu, n);
  buffer<double> val(Side::on_gpu, n), out(Side::on_gpu, static_cast<std::size_t>(size));
  idx.write(index);
  val.write(value);
  out.write(std::vector<double>(static_cast<std::size_t>(size), 0.0));
  tally::histogram_options opts;
  opts.deterministic = true;
  opts.fixed_point_bits = bits;
  tally::scatter_reduce(Side::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                        tally::plus{}, opts);
  const auto got = out.read();
  const long double half_unit = std::ldexp(1.0L, -scale - 1);
  for (std::size_t k = 0; k < got.size(); ++k) {
    const long double rounding = count[k] * half_unit;
    const long double bound = rounding + (std::fabs(exact[k]) + rounding) * 0x1p-53L;
    ASSERT_LE(std::fabs(got[k] - exact[k]), bound)
        << "bin " << k << ": got " << got[k] << ", exact " << static_cast<double>(exact[k]) << ", " << count[k]
        << " values";
  }
}

// Per-bin accuracy of deterministic sums against long double: random values
// of magnitudes 2^-20..2^20, derived and given scales.
TYPED_TEST(Scatter, DeterministicSumsAreAccurateToTheirScale) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 100003;
  const std::int64_t size = 1000;
  const auto index = random_indices(rng, n, size, false);
  std::vector<double> value(n);
  for (auto& v : value) v = std::ldexp(rng.real(-1.0, 1.0), static_cast<int>(rng.integer(-20, 20)));
  expect_fixed_point_accuracy<S>(index, value, size, kDeriveFixedPointScale, derived_scale(value));
  // Given: |v| < 2^20, headroom 62 - 17 = 45 bits: s = 24 is the largest allowed.
  expect_fixed_point_accuracy<S>(index, value, size, 24, 24);
  expect_fixed_point_accuracy<S>(index, value, size, 10, 10);
}

// At the overflow limit: n values of the largest magnitude the contract
// allows, all in one bin with the same sign, sum to just below 2^62 (or
// exactly 2^62 in magnitude) without overflowing; one more unit is refused.
TYPED_TEST(Scatter, DeterministicSumsAtTheOverflowLimit) {
  using S = TypeParam;
  for (const std::int64_t n : {std::int64_t{1024}, std::int64_t{1025}, std::int64_t{4096}}) {
    const int headroom = 62 - ceil_log2(n);  // |v|·2^s must stay below 2^headroom
    std::vector<std::int32_t> index(static_cast<std::size_t>(n), 1);
    index[0] = 0;  // bin 0: one value; bin 1: the other n - 1
    for (const double sign : {1.0, -1.0}) {
      // Derived scale, the largest value a power of two (q = 2^(headroom - 1))
      // or the double just below the next one (v·2^s = 2^headroom - 1/2,
      // accepted, which rounds to q = 2^headroom).
      for (const double top : {std::ldexp(1.0, 7), std::nextafter(std::ldexp(1.0, 8), 0.0)}) {
        std::vector<double> value(static_cast<std::size_t>(n), sign * top);
        expect_fixed_point_accuracy<S>(index, value, 2, kDeriveFixedPointScale, derived_scale(value));
      }
      // Given scale s = 30: the largest multiple of 2^-30 whose scaled value
      // stays below 2^headroom: (2^headroom - 1)·2^-30. Accepted and accurate.
      const int s = 30;
      std::vector<double> value(static_cast<std::size_t>(n), sign * std::ldexp(std::ldexp(1.0, headroom) - 1, -s));
      expect_fixed_point_accuracy<S>(index, value, 2, s, s);
      // Exactly at the limit, 2^headroom·2^-s: refused, naming the value.
      value[static_cast<std::size_t>(n / 2)] = sign * std::ldexp(1.0, headroom - s);
      buffer<std::int32_t> idx(S::on_gpu, index.size());
      buffer<double> val(S::on_gpu, value.size()), out(S::on_gpu, 2);
      idx.write(index);
      val.write(value);
      tally::histogram_options opts;
      opts.deterministic = true;
      opts.fixed_point_bits = s;
      expect_invalid([&] { tally::scatter_reduce(S::backend(), idx.data(), val.data(), n, out.data(), 2, tally::plus{}, opts); },
                     {"tally::scatter_reduce", "'value'"});
    }
  }
}

TYPED_TEST(Scatter, DeterministicModeRejectsValuesOutsideItsContract) {
  using S = TypeParam;
  std::vector<std::int32_t> index = {0, 1, 0, 1};
  buffer<std::int32_t> idx(S::on_gpu, 4);
  buffer<double> val(S::on_gpu, 4), out(S::on_gpu, 2);
  idx.write(index);
  tally::histogram_options opts;
  opts.deterministic = true;
  val.write({1.0, std::nan(""), 2.0, 3.0});
  expect_invalid([&] { tally::scatter_reduce(S::backend(), idx.data(), val.data(), 4, out.data(), 2, tally::plus{}, opts); },
                 {"tally::scatter_reduce", "'value'"});
  opts.fixed_point_bits = 60;  // 1.0·2^60 exceeds 2^(62-2)
  val.write({1.0, 1.0, 2.0, 3.0});
  expect_invalid([&] { tally::scatter_reduce(S::backend(), idx.data(), val.data(), 4, out.data(), 2, tally::plus{}, opts); },
                 {"tally::scatter_reduce", "'value'"});
}

TYPED_TEST(Scatter, CheckedModeReportsTheFirstBadIndexAndWritesNothingOutOfBounds) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t n = 100000;
  const std::int64_t size = 10;
  auto index = random_indices(rng, n, size, false);
  index[777] = 10;
  index[5000] = -3;
  index[90000] = 1 << 30;
  buffer<std::int32_t> idx(S::on_gpu, n);
  buffer<float> val(S::on_gpu, n);
  buffer<float> out(S::on_gpu, size + 16);  // guard elements after the destination
  idx.write(index);
  val.write(std::vector<float>(n, 1.0f));
  out.write(std::vector<float>(size + 16, 0.0f));
  expect_invalid([&] { tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size); },
                 {"tally::scatter_reduce", "'index'", "[777]", "10"});
  const auto after = out.read();
  for (std::int64_t k = size; k < size + 16; ++k) EXPECT_EQ(after[k], 0.0f) << "guard " << k << " was written";
  // The next call still works (the error flag was reset).
  index[777] = index[5000] = index[90000] = 0;
  idx.write(index);
  out.write(std::vector<float>(size + 16, 0.0f));
  tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size);
  float total = 0;
  for (float v : out.read()) total += v;
  EXPECT_EQ(total, static_cast<float>(n));
  // Unchecked: skipped silently, still nothing out of bounds.
  index[3] = 12;
  idx.write(index);
  out.write(std::vector<float>(size + 16, 0.0f));
  tally::histogram_options unchecked;
  unchecked.checks = tally::check_mode::unchecked;
  tally::scatter_reduce(S::backend(), idx.data(), val.data(), static_cast<std::int64_t>(n), out.data(), size,
                        tally::plus{}, unchecked);
  const auto skipped = out.read();
  for (std::int64_t k = size; k < size + 16; ++k) EXPECT_EQ(skipped[k], 0.0f);
}

}  // namespace
}  // namespace tally::testing

namespace tally::testing {
namespace {

__global__ void headroom_on_device(const std::int64_t* n, int count, int* out) {
  for (int i = 0; i < count; ++i) out[i] = tally::detail::fixed_point_headroom_bits(n[i]);
}

// The derived scale is computed on the device: the headroom must be the same
// there (std::bit_width/countl_zero fold to constants in nvcc device code).
// GPU only: "ScatterDevice/gpu.*" (backends.hpp).
template <class Side>
class ScatterDevice : public on_backend<Side> {};
TYPED_TEST_SUITE(ScatterDevice, gpu_only, backend_names);

TYPED_TEST(ScatterDevice, FixedPointHeadroomIsTheSameOnTheDevice) {
  const std::vector<std::int64_t> ns = {0, 1, 2, 3, 4, 5, 1000, 400009, 10000000, std::int64_t(1) << 40,
                                        (std::int64_t(1) << 40) + 1};
  buffer<std::int64_t> n(true, ns.size());
  buffer<int> out(true, ns.size());
  n.write(ns);
  headroom_on_device<<<1, 1>>>(n.data(), static_cast<int>(ns.size()), out.data());
  TALLY_CUDA(cudaDeviceSynchronize());
  const auto got = out.read();
  for (std::size_t i = 0; i < ns.size(); ++i) {
    EXPECT_EQ(got[i], tally::detail::fixed_point_headroom_bits(ns[i])) << "n = " << ns[i];
  }
  EXPECT_EQ(tally::detail::fixed_point_headroom_bits(400009), 43);
  EXPECT_EQ(tally::detail::fixed_point_headroom_bits(1), 62);
  EXPECT_EQ(tally::detail::fixed_point_headroom_bits(2), 61);
  EXPECT_EQ(tally::detail::fixed_point_headroom_bits(1024), 52);
  EXPECT_EQ(tally::detail::fixed_point_headroom_bits(1025), 51);
}

}  // namespace
}  // namespace tally::testing
