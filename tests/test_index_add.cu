// index_add (row scatter) on both backends, sums: exact data for every
// value type, index type, row width, stride, alignment, key pattern and
// strategy; the error bounds each backend documents for inexact data;
// NaN and ±inf; the neighbours of half/bfloat16 sums left bit for bit;
// empty and single rows. Guards before and after out and the gaps between
// its rows must stay untouched, and so must the rows no index names.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAdd : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAdd, backends, backend_names);

constexpr std::int64_t kWidths[] = {1, 3, 4, 5, 31, 32, 33, 128, 1024};

/// Nonzero integers in [-m, m] with m such that every partial sum of rows + 1
/// of them is an integer of at most V's significand bits: exactly
/// representable, so every order of summation gives the exact sum.
template <class V>
std::int64_t exact_bound(std::int64_t rows) {
  const long double limit = std::ldexp(1.0L, significand_bits<V>());
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(limit / static_cast<long double>(rows + 1)), 1,
                                  std::int64_t{1} << 20);
}

template <class V>
V random_integer(random_source& rng, std::int64_t m) {
  const std::int64_t v = rng.integer(1, m);
  return exactly<V>(static_cast<long double>(rng.integer(0, 1) ? v : -v));
}

/// Every width, with and without strides and alignment, every key pattern
/// and both strategies: the exact sums, nothing else written.
template <class Side, class I, class V>
void check_exact_sums(std::int64_t rows) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t m = exact_bound<V>(rows);
  const std::int64_t out_rows = std::max<std::int64_t>(3, rows / 8);
  for (const std::int64_t cols : kWidths) {
    for (const int layout : {0, 1}) {  // 1: strides beyond cols and an unaligned src
      for (const keys pattern : {keys::uniform, keys::half_on_one, keys::all_on_one}) {
        row_case<I, V> c(rows, cols, out_rows, layout ? 3 : 0, layout ? 5 : 0, layout);
        c.index = make_index<I>(rng, rows, out_rows, pattern);
        c.fill([&] { return random_integer<V>(rng, m); });
        const reference<I, V, plus> ref(c);
        device_case<I, V> d(Side::on_gpu, c);
        for (const auto strategy : kIndexAddStrategies) {
          SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", " + tally::to_string(strategy) +
                       (sizeof(I) == 8 ? ", int64 index" : ", int32 index"));
          index_add_options opts;
          opts.strategy = strategy;
          histogram_strategy chosen = histogram_strategy::shared_memory;
          opts.chosen = &chosen;
          const auto got = run_and_read<Side>(d, c, plus{}, opts);
          EXPECT_TRUE(unreached_intact(c, ref, got));
          for (std::size_t e = 0; e < got.size(); ++e)
            if (ref.reached[e]) ASSERT_EQ(to_long_double(got[e]), ref.value[e]) << "out element " << e;
          if (Side::on_gpu) {
            // One column, unit strides, float or double: a scatter-add, planned as scatter_reduce's.
            const bool scatter = cols == 1 && layout == 0;
            if (strategy != histogram_strategy::automatic) EXPECT_EQ(chosen, strategy);
            else if (scatter) EXPECT_EQ(chosen, histogram_strategy::shared_memory) << tally::to_string(chosen);
            else
              EXPECT_TRUE(chosen == histogram_strategy::aggregated_atomics ||
                          chosen == histogram_strategy::sorted_rows)
                  << tally::to_string(chosen);
          }
        }
      }
    }
  }
}

TYPED_TEST(IndexAdd, ExactSumsFloat) {
  check_exact_sums<TypeParam, std::int32_t, float>(1500);
  check_exact_sums<TypeParam, std::int64_t, float>(1500);
}

TYPED_TEST(IndexAdd, ExactSumsDouble) {
  check_exact_sums<TypeParam, std::int32_t, double>(1500);
  check_exact_sums<TypeParam, std::int64_t, double>(1500);
}

TYPED_TEST(IndexAdd, ExactSumsHalf) {
  check_exact_sums<TypeParam, std::int32_t, half>(1000);
  check_exact_sums<TypeParam, std::int64_t, half>(1000);
}

/// Single-column sums with half the rows on one key, from 2^20 rows into more
/// outputs than a block holds: the GPU runs them as scatter-adds and picks
/// hot_keys by itself. Exact float and double sums; half and bfloat16 sums
/// (of ±1, exact in float) rounded once to their type on the GPU;
/// unreached elements intact; and the deterministic mode's bits equal to the
/// CPU backend's with one thread.
template <class Side, class I, class V>
void check_single_column_skew() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = (std::int64_t{1} << 20) + 4099, out_rows = 1000003;
  row_case<I, V> c(rows, 1, out_rows, 0, 0, 0);
  c.index = make_index<I>(rng, rows, out_rows, keys::half_on_one);
  histogram_strategy chosen = histogram_strategy::sorted_rows;
  const std::int64_t m = exact_bound<V>(rows);
  c.fill([&] { return random_integer<V>(rng, m); });
  const reference<I, V, plus> ref(c);
  device_case<I, V> d(Side::on_gpu, c);
  index_add_options opts;
  opts.chosen = &chosen;
  const auto got = run_and_read<Side>(d, c, plus{}, opts);
  EXPECT_TRUE(unreached_intact(c, ref, got));
  // (The CPU sums half and bfloat16 in float and rounds once too.)
  for (std::size_t e = 0; e < got.size(); ++e)
    if (ref.reached[e]) ASSERT_EQ(to_long_double(got[e]), round_to<V>(ref.value[e])) << "out element " << e;
  if (Side::on_gpu) EXPECT_EQ(chosen, histogram_strategy::hot_keys) << tally::to_string(chosen);
  // Deterministic: the CPU's bits, one thread (inexact values, so that the rounding shows).
  c.fill([&] { return scaled_value<V>(rng, -8, 0); });
  index_add_options det;
  det.deterministic = true;
  auto want = c.out;
  tally::index_add(tally::cpu.with_threads(1), c.index.data(), c.src.data(), rows, 1, want.data(), out_rows, plus{},
                   det);
  det.chosen = &chosen;
  device_case<I, V> inexact(Side::on_gpu, c);
  const auto bits = run_and_read<Side>(inexact, c, plus{}, det);
  EXPECT_EQ(std::memcmp(bits.data(), want.data(), want.size() * sizeof(V)), 0);
  if (Side::on_gpu) EXPECT_EQ(chosen, histogram_strategy::hot_keys) << tally::to_string(chosen);
}

TYPED_TEST(IndexAdd, SingleColumnSkewedSumsRunAsScatterAdds) {
  check_single_column_skew<TypeParam, std::int32_t, float>();
  check_single_column_skew<TypeParam, std::int64_t, double>();
  check_single_column_skew<TypeParam, std::int64_t, half>();
  check_single_column_skew<TypeParam, std::int32_t, bfloat16>();
}

TYPED_TEST(IndexAdd, ExactSumsBfloat16) {  // at most 255 rows keep every partial sum exact in 8 bits
  check_exact_sums<TypeParam, std::int32_t, bfloat16>(200);
  check_exact_sums<TypeParam, std::int64_t, bfloat16>(200);
}

/// Random reals in [-1, 1): each element within the error bound the backend
/// documents. CPU: half and bfloat16 accumulate in float and round once
/// (u_V·|sum| + (count + 1)·2^-24·Σ|x|), float and double sum in their own
/// type in row order ((count + 1)·u·Σ|x|). GPU: every group sum and every
/// atomic may round to V ((count + 1)·(2u_V + u_acc)·Σ|x|).
template <class Side, class I, class V>
void check_random_sums() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const long double u = std::ldexp(1.0L, -significand_bits<V>());
  const long double u_acc = is_low_precision_v<V> ? std::ldexp(1.0L, -24) : u;
  const std::int64_t rows = 2000, out_rows = 40;
  for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{33}, std::int64_t{256}}) {
    for (const keys pattern : {keys::uniform, keys::half_on_one}) {
      row_case<I, V> c(rows, cols, out_rows, 0, 2, 0);
      c.index = make_index<I>(rng, rows, out_rows, pattern);
      c.fill([&] { return random_value<V>(rng); });
      const reference<I, V, plus> ref(c);
      device_case<I, V> d(Side::on_gpu, c);
      for (const auto strategy : kIndexAddStrategies) {
        SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", " + tally::to_string(strategy));
        index_add_options opts;
        opts.strategy = strategy;
        const auto got = run_and_read<Side>(d, c, plus{}, opts);
        for (std::size_t e = 0; e < got.size(); ++e) {
          if (!ref.reached[e]) continue;
          const long double n = static_cast<long double>(ref.count[e] + 1), exact = ref.value[e];
          long double bound;
          if (Side::on_gpu) bound = n * (2 * u + u_acc) * ref.magnitude[e];
          else if (is_low_precision_v<V>) bound = u * std::fabs(exact) + n * u_acc * ref.magnitude[e] * (1 + u);
          else bound = n * u * ref.magnitude[e];
          ASSERT_LE(std::fabs(to_long_double(got[e]) - exact), bound * 1.01L + 1e-30L)
              << "out element " << e << ": got " << static_cast<double>(to_long_double(got[e])) << ", exact "
              << static_cast<double>(exact) << ", " << ref.count[e] << " rows";
        }
      }
    }
  }
}

TYPED_TEST(IndexAdd, RandomSumsStayWithinTheDocumentedBound) {
  check_random_sums<TypeParam, std::int32_t, float>();
  check_random_sums<TypeParam, std::int64_t, double>();
  check_random_sums<TypeParam, std::int64_t, half>();
  check_random_sums<TypeParam, std::int32_t, bfloat16>();
}

/// NaN and ±inf reach exactly the elements whose rows hold them; +inf and
/// -inf in one element give NaN.
template <class Side, class I, class V>
void check_special_values() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 300, cols = 37, out_rows = 5;
  row_case<I, V> c(rows, cols, out_rows, 1, 0, 1);
  c.index = make_index<I>(rng, rows, out_rows, keys::half_on_one);
  c.fill([&] { return random_integer<V>(rng, 1); });
  const V nan = convert<V>(std::numeric_limits<float>::quiet_NaN());
  const V inf = convert<V>(std::numeric_limits<float>::infinity());
  c.at(7, 0) = nan;
  c.at(100, 36) = inf;
  c.at(200, 20) = inf;
  c.at(201, 20) = convert<V>(-std::numeric_limits<float>::infinity());
  c.at(250, 5) = convert<V>(-std::numeric_limits<float>::infinity());
  const reference<I, V, plus> ref(c);
  device_case<I, V> d(Side::on_gpu, c);
  for (const auto strategy : kIndexAddStrategies) {
    SCOPED_TRACE(tally::to_string(strategy));
    d.reset(c);
    index_add_options opts;
    opts.strategy = strategy;
    run_case<Side>(d, c, plus{}, opts);
    const auto got = d.out.read();
    int specials = 0;
    for (std::size_t e = 0; e < got.size(); ++e) {
      if (!ref.reached[e]) continue;
      const long double g = to_long_double(got[e]), want = ref.value[e];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(g)) << "out element " << e << " should be NaN, got " << static_cast<double>(g);
        ++specials;
      } else if (std::isinf(want)) {
        EXPECT_EQ(g, want) << "out element " << e;
        ++specials;
      } else {
        ASSERT_EQ(g, want) << "out element " << e;
      }
    }
    EXPECT_GE(specials, 2);  // the NaN element, and at least one infinite or NaN one besides
    EXPECT_TRUE(d.out.guards_intact());
  }
}

TYPED_TEST(IndexAdd, NanAndInfinityReachTheirElements) {
  check_special_values<TypeParam, std::int64_t, float>();
  check_special_values<TypeParam, std::int32_t, double>();
  check_special_values<TypeParam, std::int64_t, half>();
  check_special_values<TypeParam, std::int32_t, bfloat16>();
}

/// half and bfloat16 sums of one element go through the 32-bit word it
/// shares with its neighbour where that neighbour is an output element too
/// (the GPU adds -0 to it). Rows only to even keys, half of them to the last
/// key (whose neighbour, past the end or in a gap, is not an output element);
/// the odd rows between hold -0, +0, ±inf, ±the smallest subnormal, a NaN and
/// an ordinary value, which must stay bit for bit (the NaN: a NaN).
template <class Side, class V>
void check_neighbours_of_narrow_sums() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 200, out_rows = 65;  // bfloat16 sums of 200 values of ±1 are exact
  const float subnormal = std::is_same_v<V, half> ? 0x1p-24f : 0x1p-133f;
  const float specials[] = {
      -0.0f,     0.0f,       -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
      subnormal, -subnormal, std::numeric_limits<float>::quiet_NaN(), 1.5f};
  for (const std::int64_t cols : {1, 3}) {
    for (const std::int64_t gap : {0, 1}) {
      row_case<std::int32_t, V> c(rows, cols, out_rows, 0, gap, 0);
      c.index.resize(static_cast<std::size_t>(rows));
      for (auto& k : c.index)
        k = rng.integer(0, 1) ? static_cast<std::int32_t>(out_rows - 1)
                              : static_cast<std::int32_t>(2 * rng.integer(0, (out_rows - 1) / 2));
      c.fill([&] { return random_integer<V>(rng, exact_bound<V>(rows)); });
      for (std::int64_t k = 1; k < out_rows; k += 2)
        for (std::int64_t j = 0; j < cols; ++j)
          c.out_at(k, j) = convert<V>(specials[static_cast<std::size_t>(k / 2 + j) % std::size(specials)]);
      const reference<std::int32_t, V, plus> ref(c);
      device_case<std::int32_t, V> d(Side::on_gpu, c);
      for (const auto strategy : kIndexAddStrategies) {
        SCOPED_TRACE(c.describe() + ", " + tally::to_string(strategy));
        index_add_options opts;
        opts.strategy = strategy;
        const auto got = run_and_read<Side>(d, c, plus{}, opts);
        for (std::size_t e = 0; e < got.size(); ++e) {
          if (ref.reached[e]) {
            ASSERT_EQ(to_long_double(got[e]), ref.value[e]) << "out element " << e;
          } else if (std::isnan(to_long_double(c.out[e]))) {
            EXPECT_TRUE(std::isnan(to_long_double(got[e]))) << "out element " << e << " was a NaN";
          } else {
            ASSERT_EQ(std::memcmp(&got[e], &c.out[e], sizeof(V)), 0)
                << "out element " << e << " (" << static_cast<double>(to_long_double(c.out[e]))
                << "), reached by no row, changed to " << static_cast<double>(to_long_double(got[e]));
          }
        }
      }
    }
  }
}

TYPED_TEST(IndexAdd, NarrowSumsLeaveTheirNeighboursBitExact) {
  check_neighbours_of_narrow_sums<TypeParam, half>();
  check_neighbours_of_narrow_sums<TypeParam, bfloat16>();
}

TYPED_TEST(IndexAdd, EmptyProblemsWriteNothingAndOneRowIsExact) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  guarded<float> out(S::on_gpu, 12);
  std::vector<float> start(12);
  for (auto& v : start) v = random_value<float>(rng);
  out.write(start);
  const auto before = out.bytes();
  guarded<std::int64_t> index(S::on_gpu, 4);
  guarded<float> src(S::on_gpu, 12);
  index.write({2, 0, 1, 2});
  src.write(std::vector<float>(12, 1.0f));
  // rows == 0 or cols == 0: nothing read or written, no pointer inspected.
  tally::index_add(S::backend(), static_cast<const std::int64_t*>(nullptr), static_cast<const float*>(nullptr), 0, 3,
                   out.data(), 4);
  tally::index_add(S::backend(), index.data(), src.data(), 4, 0, out.data(), 4);
  tally::index_add(S::backend(), static_cast<const std::int64_t*>(nullptr), static_cast<const float*>(nullptr), 0, 0,
                   static_cast<float*>(nullptr), 0);
  EXPECT_TRUE(unchanged(out, before));
  // Deterministic mode too.
  index_add_options det;
  det.deterministic = true;
  tally::index_add(S::backend(), index.data(), src.data(), 0, 3, out.data(), 4, plus{}, det);
  tally::index_add(S::backend(), index.data(), src.data(), 4, 0, out.data(), 4, plus{}, det);
  EXPECT_TRUE(unchanged(out, before));
  // One row: row 0 of src lands on out row 2 (columns 6, 7, 8).
  std::vector<float> row = {random_value<float>(rng), random_value<float>(rng), random_value<float>(rng)};
  src.write({row[0], row[1], row[2], 0, 0, 0, 0, 0, 0, 0, 0, 0});
  tally::index_add(S::backend(), index.data(), src.data(), 1, 3, out.data(), 4);
  auto want = start;
  for (int j = 0; j < 3; ++j)
    want[static_cast<std::size_t>(6 + j)] = start[static_cast<std::size_t>(6 + j)] + row[static_cast<std::size_t>(j)];
  EXPECT_EQ(out.read(), want);
  EXPECT_TRUE(out.guards_intact());
  // No output rows: every index is out of range, nothing is written.
  const auto after = out.bytes();
  for (const bool deterministic : {false, true}) {
    index_add_options opts;
    opts.deterministic = deterministic;
    expect_invalid([&] { tally::index_add(S::backend(), index.data(), src.data(), 2, 3, out.data(), 0, plus{}, opts); },
                   {"tally::index_add", "'index'", "[0] = 2", "out_rows = 0"});
    EXPECT_TRUE(unchanged(out, after));
  }
}

}  // namespace
}  // namespace tally::testing

namespace tally::testing {
namespace {

// CPU only (the GPU's sums are rounded in a timing-dependent order): every
// element combines its rows in row order whatever the thread count, so the
// bits are the same with 1, 2, 3 or 8 threads.
TEST(IndexAddCpu, SumsDoNotDependOnTheThreadCount) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 20000, cols = 64, out_rows = 300;
  row_case<std::int32_t, float> c(rows, cols, out_rows, 0, 0, 0);
  c.index = make_index<std::int32_t>(rng, rows, out_rows, keys::half_on_one);
  c.fill([&] { return random_value<float>(rng); });
  std::vector<std::vector<unsigned char>> results;
  for (const int threads : {1, 2, 3, 8}) {
    auto out = c.out;
    tally::index_add(tally::cpu.with_threads(threads), c.index.data(), c.src.data(), rows, cols, out.data(), out_rows);
    results.push_back(bits_of(out));
    if (results.size() > 1) EXPECT_EQ(results.back(), results.front()) << threads << " threads";
  }
}

}  // namespace
}  // namespace tally::testing
