// index_add's deterministic mode on both backends: every reached element is
// the exact sum of its fixed-point addends rounded once (then added to out,
// rounded once more), computed here from the contract alone (q = round(v·2^s),
// the derived s = 61 - e - ceil(log2 rows)); the bits do not depend on the
// order of the rows, the grid, the strategy, the slots' layout, the thread
// count or the backend; values outside the contract are refused after the
// others were applied.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "bit_patterns.hpp"
#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAddDeterministic : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddDeterministic, backends, backend_names);

int ceil_log2(std::int64_t n) {
  int bits = 0;
  while ((std::int64_t{1} << bits) < n) ++bits;
  return bits;
}

/// The derived scale: 61 - e - ceil(log2 rows), e the exponent of the largest
/// finite |src| (every row, bad indices included).
template <class I, class V>
int derived_scale(row_case<I, V>& c) {
  long double largest = 0;
  for (std::int64_t i = 0; i < c.rows; ++i)
    for (std::int64_t j = 0; j < c.cols; ++j) {
      const long double v = std::fabs(to_long_double(c.at(i, j)));
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
  return 61 - std::ilogb(largest) - ceil_log2(c.rows);
}

/// out as the deterministic mode must leave it for scale s: per reached
/// element Q = Σ round(v·2^s) over its rows (values that are not finite count
/// as 0), delta = Q·2^-s rounded to V, out + delta rounded to V; an element
/// with Q = 0 keeps its bits.
template <class I, class V>
std::vector<V> fixed_point_reference(row_case<I, V>& c, int s) {
  std::vector<long long> q(c.out.size(), 0);
  std::vector<bool> reached(c.out.size(), false);
  for_each_landing(c, [&](std::size_t e, long double v) {
    reached[e] = true;
    if (std::isfinite(v)) q[e] += static_cast<long long>(std::nearbyint(std::ldexp(v, s)));
  });
  std::vector<V> out = c.out;
  for (std::size_t e = 0; e < out.size(); ++e) {
    if (!reached[e] || q[e] == 0) continue;
    const long double delta = round_to<V>(std::ldexp(static_cast<long double>(q[e]), -s));
    if constexpr (std::is_same_v<V, double>) {
      out[e] = convert<double>(out[e]) + static_cast<double>(delta);  // one IEEE double rounding
    } else {
      // The long double sum rounded to V: 64 bits >= 2·24 + 2, so the two
      // roundings equal one (Figueroa 1995).
      out[e] = exactly<V>(round_to<V>(to_long_double(out[e]) + delta));
    }
  }
  return out;
}

/// Exponent range keeping half sums of up to 2000 rows below its largest value.
template <class V>
constexpr int top_exponent() {
  return std::is_same_v<V, half> ? 3 : 20;
}

template <class Side, class I, class V>
void check_correctly_rounded() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 700;
  // The GPU keeps the sums per output row for out_rows 40, per first source
  // row for 3000 (the smaller scratch, index_add_scratch.hpp).
  for (const std::int64_t out_rows : {std::int64_t{40}, std::int64_t{3000}}) {
    for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{5}, std::int64_t{33}, std::int64_t{160}}) {
      const int layout = static_cast<int>(cols % 2);  // odd widths: strides and an unaligned src
      const keys pattern = cols == 33 ? keys::all_on_one : keys::half_on_one;
      row_case<I, V> c(rows, cols, out_rows, layout ? 2 : 0, layout ? 3 : 0, layout);
      c.index = make_index<I>(rng, rows, out_rows, pattern);
      c.fill([&] { return scaled_value<V>(rng, -8, top_exponent<V>()); });
      const int derived = derived_scale(c);
      device_case<I, V> d(Side::on_gpu, c);
      for (const int given : {kDeriveFixedPointScale, 40 - top_exponent<V>()}) {
        const auto want = bits_of(fixed_point_reference(c, given == kDeriveFixedPointScale ? derived : given));
        for (const auto strategy : kIndexAddStrategies) {
          SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", " + tally::to_string(strategy) +
                       (given == kDeriveFixedPointScale ? ", derived scale 2^" + std::to_string(derived)
                                                        : ", scale 2^" + std::to_string(given)));
          d.reset(c);
          index_add_options opts;
          opts.deterministic = true;
          opts.fixed_point_bits = given;
          opts.strategy = strategy;
          run_case<Side>(d, c, plus{}, opts);
          EXPECT_EQ(bits_of(d.out.read()), want);
          EXPECT_TRUE(d.out.guards_intact());
        }
      }
    }
  }
}

TYPED_TEST(IndexAddDeterministic, SumsAreTheCorrectlyRoundedFixedPointSums) {
  check_correctly_rounded<TypeParam, std::int32_t, float>();
  check_correctly_rounded<TypeParam, std::int64_t, float>();
  check_correctly_rounded<TypeParam, std::int32_t, double>();
  check_correctly_rounded<TypeParam, std::int64_t, double>();
  check_correctly_rounded<TypeParam, std::int32_t, half>();
  check_correctly_rounded<TypeParam, std::int64_t, half>();
  check_correctly_rounded<TypeParam, std::int32_t, bfloat16>();
  check_correctly_rounded<TypeParam, std::int64_t, bfloat16>();
}

/// A random V on the grid of multiples of 2^-30 below 2^top: a significand
/// of V's width (at most 24 bits) times 2^e, e >= -30 (half: >= -24, its
/// smallest normal).
template <class V>
V grid_value(random_source& rng, int top) {
  constexpr int p = std::min(significand_bits<V>(), 24);
  const auto m = static_cast<double>(rng.integer(std::int64_t{1} << (p - 1), (std::int64_t{1} << p) - 1));
  const int e = static_cast<int>(rng.integer(std::is_same_v<V, half> ? -24 : -30, top - p));
  return exactly<V>(std::ldexp(static_cast<long double>(rng.integer(0, 1) ? m : -m), e));
}

/// Values chosen so that the fixed-point sums are exact: multiples of 2^-30
/// (|v| < 2^10, half 2^2) at scale 30, so each element is the exact sum of
/// its rows rounded once to V -- a correctly rounded sum, also for half and
/// bfloat16.
template <class Side, class I, class V>
void check_exact_sum_rounded_once() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 3000, cols = 9, out_rows = 4;
  row_case<I, V> c(rows, cols, out_rows, 0, 0, 0);
  c.index = make_index<I>(rng, rows, out_rows, keys::half_on_one);
  c.fill([&] { return grid_value<V>(rng, std::is_same_v<V, half> ? 2 : 10); });
  for (auto& v : c.out) v = convert<V>(0.0f);
  device_case<I, V> d(Side::on_gpu, c);
  index_add_options opts;
  opts.deterministic = true;
  opts.fixed_point_bits = 30;
  run_case<Side>(d, c, plus{}, opts);
  const auto got = d.out.read();
  // The exact sums, in long double (exact: every value is a multiple of
  // 2^-30 below 2^10 and 3000 of them need at most 52 bits).
  std::vector<long double> exact(c.out.size(), 0.0L);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      exact[static_cast<std::size_t>(c.index[static_cast<std::size_t>(i)] * cols + j)] += to_long_double(c.at(i, j));
  for (std::size_t e = 0; e < got.size(); ++e)
    EXPECT_EQ(to_long_double(got[e]), round_to<V>(exact[e]))
        << "element " << e << ": exact sum " << static_cast<double>(exact[e]);
}

TYPED_TEST(IndexAddDeterministic, ExactSumsAreRoundedOnce) {
  check_exact_sum_rounded_once<TypeParam, std::int64_t, float>();
  check_exact_sum_rounded_once<TypeParam, std::int32_t, double>();
  check_exact_sum_rounded_once<TypeParam, std::int64_t, half>();
  check_exact_sum_rounded_once<TypeParam, std::int32_t, bfloat16>();
}

/// Sums one ulp-fraction past a halfway point of V, where rounding twice
/// (to double, or to float, first) lands on the tie and rounds to even: the
/// element must hold the correctly rounded sum. Four rows (headroom 60 bits),
/// values {0.5, 0.5, tie, excess}: the derived scale is 2^60. Also the exact
/// tie (to even) and the negated rows.
template <class Side, class V>
void check_halfway(long double tie, long double excess) {
  SCOPED_TRACE(std::string("tie ") + std::to_string(static_cast<double>(tie)) + ", excess 2^" +
               std::to_string(std::ilogb(excess)));
  for (const long double sign : {1.0L, -1.0L}) {
    for (const bool with_excess : {true, false}) {
      row_case<std::int32_t, V> c(4, 1, 1, 0, 0, 0);
      c.index.assign(4, 0);
      const long double values[] = {0.5L, 0.5L, tie, with_excess ? excess : 0.0L};
      for (int i = 0; i < 4; ++i) c.at(i, 0) = exactly<V>(sign * values[i]);
      c.out[0] = convert<V>(0.0f);
      device_case<std::int32_t, V> d(Side::on_gpu, c);
      index_add_options opts;
      opts.deterministic = true;
      run_case<Side>(d, c, plus{}, opts);
      const long double exact = sign * (1.0L + tie + (with_excess ? excess : 0.0L));
      const long double want = with_excess ? sign * (1.0L + 2 * tie) : sign * 1.0L;  // past the tie: up; at it: even
      EXPECT_EQ(round_to<V>(exact), want);                                           // the test's own rounding agrees
      EXPECT_EQ(to_long_double(d.out.read()[0]), want)
          << "sign " << static_cast<double>(sign) << (with_excess ? ", past the tie" : ", at the tie");
    }
  }
}

TYPED_TEST(IndexAddDeterministic, SumsPastAHalfwayPointRoundOnce) {
  check_halfway<TypeParam, float>(std::ldexp(1.0L, -24), std::ldexp(1.0L, -60));    // > 53 bits: not via double
  check_halfway<TypeParam, bfloat16>(std::ldexp(1.0L, -8), std::ldexp(1.0L, -60));  // not via double nor float
  check_halfway<TypeParam, half>(std::ldexp(1.0L, -11), std::ldexp(1.0L, -24));     // not via float
}

/// The same bits for the rows in any order, any grid and strategy, and on
/// the CPU backend with 1 thread (the GPU backend is compared with it too).
template <class Side, class I, class V>
void check_bits_stable() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 5000;
  for (const std::int64_t cols : {std::int64_t{3}, std::int64_t{128}}) {
    for (const std::int64_t out_rows : {std::int64_t{7}, std::int64_t{20000}}) {
      row_case<I, V> c(rows, cols, out_rows, 0, 1, 0);
      c.index = make_index<I>(rng, rows, out_rows, keys::half_on_one);
      c.fill([&] { return scaled_value<V>(rng, -8, top_exponent<V>()); });
      index_add_options det;
      det.deterministic = true;
      // The reference: the CPU backend, one thread, on host memory.
      auto reference = c.out;
      tally::index_add(tally::cpu.with_threads(1), c.index.data(), c.src.data(), rows, cols, reference.data(), out_rows,
                       plus{}, [&] {
                         auto o = c.options();
                         o.deterministic = true;
                         return o;
                       }());
      const auto want = bits_of(reference);
      // The rows permuted (index and src together).
      row_case<I, V> permuted = c;
      std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
      std::iota(order.begin(), order.end(), 0);
      for (std::int64_t i = rows - 1; i > 0; --i)
        std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(rng.integer(0, i))]);
      for (std::int64_t i = 0; i < rows; ++i) {
        const std::int64_t from = order[static_cast<std::size_t>(i)];
        permuted.index[static_cast<std::size_t>(i)] = c.index[static_cast<std::size_t>(from)];
        for (std::int64_t j = 0; j < cols; ++j) permuted.at(i, j) = c.at(from, j);
      }
      device_case<I, V> d(Side::on_gpu, c), dp(Side::on_gpu, permuted);
      // (The CPU backend has no strategies or grids: one run there.)
      const std::vector<histogram_strategy> strategies =
          Side::on_gpu ? std::vector<histogram_strategy>(std::begin(kIndexAddStrategies), std::end(kIndexAddStrategies))
                       : std::vector{histogram_strategy::automatic};
      const std::vector<int> grids = Side::on_gpu ? std::vector{0, 1, 7, 300} : std::vector{0};
      for (const auto strategy : strategies) {
        for (const int grid : grids) {
          SCOPED_TRACE(c.describe() + ", " + tally::to_string(strategy) + ", grid " + std::to_string(grid));
          det.strategy = strategy;
          det.grid_blocks = grid;
          d.reset(c);
          run_case<Side>(d, c, plus{}, det);
          EXPECT_EQ(bits_of(d.out.read()), want);
          dp.reset(permuted);
          run_case<Side>(dp, permuted, plus{}, det);
          EXPECT_EQ(bits_of(dp.out.read()), want) << "rows permuted";
        }
      }
    }
  }
}

TYPED_TEST(IndexAddDeterministic, BitsDoNotDependOnOrderGridStrategyOrBackend) {
  check_bits_stable<TypeParam, std::int64_t, float>();
  check_bits_stable<TypeParam, std::int32_t, double>();
  check_bits_stable<TypeParam, std::int32_t, half>();
  check_bits_stable<TypeParam, std::int64_t, bfloat16>();
}

/// Elements whose fixed-point sum is exactly zero (rows that cancel: v and
/// -v on one key) keep their bits -- -0, a NaN's payload -- as the elements
/// no row names do, on every strategy and width (the single-column
/// scatter-add included); the other elements get out + sum.
template <class Side, class I, class V>
void check_zero_sums_keep_bits() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 400, out_rows = 6, keys_used = 5;  // out row 5: named by no row
  for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{5}, std::int64_t{40}}) {
    row_case<I, V> c(rows, cols, out_rows, 0, 0, 0);
    c.index.resize(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) c.index[static_cast<std::size_t>(i)] = static_cast<I>(i % keys_used);
    c.fill([&] { return scaled_value<V>(rng, -8, top_exponent<V>()); });
    // Keys 0 and 1: each of the second half's rows negates the first half's row of the same key.
    for (std::int64_t i = rows / 2; i < rows; ++i)
      if (i % keys_used < 2)
        for (std::int64_t j = 0; j < cols; ++j) c.at(i, j) = exactly<V>(-to_long_double(c.at(i - rows / 2, j)));
    for (std::int64_t j = 0; j < cols; ++j) {
      c.out_at(0, j) = convert<V>(-0.0f);
      c.out_at(1, j) = odd_nan<V>();
      c.out_at(5, j) = odd_nan<V>();
    }
    const auto before = c.out;
    const auto want = bits_of(fixed_point_reference(c, derived_scale(c)));
    device_case<I, V> d(Side::on_gpu, c);
    for (const auto strategy : kIndexAddStrategies) {
      SCOPED_TRACE(c.describe() + ", " + tally::to_string(strategy));
      d.reset(c);
      index_add_options opts;
      opts.deterministic = true;
      opts.strategy = strategy;
      run_case<Side>(d, c, plus{}, opts);
      const auto got = d.out.read();
      EXPECT_EQ(bits_of(got), want);
      for (const std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{5}}) {
        const auto first = static_cast<std::size_t>(k * c.out_stride);
        EXPECT_EQ(std::memcmp(&got[first], &before[first], static_cast<std::size_t>(cols) * sizeof(V)), 0)
            << "out row " << k << " changed";
      }
      const auto row2 = 2 * static_cast<std::size_t>(c.out_stride);
      EXPECT_NE(std::memcmp(&got[row2], &before[row2], static_cast<std::size_t>(cols) * sizeof(V)), 0)
          << "out row 2 (its rows do not cancel) unchanged";
      EXPECT_TRUE(d.out.guards_intact());
    }
  }
}

TYPED_TEST(IndexAddDeterministic, ElementsWhoseSumIsZeroKeepTheirBits) {
  check_zero_sums_keep_bits<TypeParam, std::int32_t, float>();
  check_zero_sums_keep_bits<TypeParam, std::int64_t, double>();
  check_zero_sums_keep_bits<TypeParam, std::int32_t, half>();
  check_zero_sums_keep_bits<TypeParam, std::int64_t, bfloat16>();
}

/// The derived scale sees every value of an unaligned single column (the
/// GPU's largest-|src| pass reads 16-byte chunks and the elements before and
/// after them one by one): the largest value at the head, in the middle and
/// at the tail. A value of 2^-43 alone on its key rounds to 0 at the right
/// scale (2^41: the largest is 2^10, 1000 rows) and stays out; at the scale a
/// missed largest value would give (2^50) it would be added.
template <class Side, class V>
void check_scale_sees_every_value() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 1000, out_rows = 100000;  // more outputs than rows: no one-launch kernel
  for (const std::int64_t largest_at : {std::int64_t{0}, rows / 2, rows - 1}) {
    SCOPED_TRACE("largest value at row " + std::to_string(largest_at));
    row_case<std::int32_t, V> c(rows, 1, out_rows, 0, 0, 1);  // src one element past a 16-byte boundary
    c.index.resize(static_cast<std::size_t>(rows));
    for (auto& k : c.index) k = static_cast<std::int32_t>(rng.integer(0, out_rows - 2));
    c.fill([&] { return exactly<V>(static_cast<long double>(rng.integer(-3, 3))); });
    c.at(largest_at, 0) = exactly<V>(1024.0L);
    const std::int64_t tiny_at = largest_at == rows / 2 ? 1 : rows / 2;
    c.at(tiny_at, 0) = exactly<V>(std::ldexp(1.0L, -43));
    c.index[static_cast<std::size_t>(tiny_at)] = static_cast<std::int32_t>(out_rows - 1);  // its own key
    EXPECT_EQ(derived_scale(c), 41);
    index_add_options det;
    det.deterministic = true;
    auto want = c.out;
    tally::index_add(tally::cpu.with_threads(1), c.index.data(), c.src.data(), rows, 1, want.data(), out_rows, plus{},
                     det);
    EXPECT_EQ(bits_of(want), bits_of(fixed_point_reference(c, 41)));
    EXPECT_EQ(std::memcmp(&want.back(), &c.out.back(), sizeof(V)), 0) << "2^-43 was added: the scale is wrong";
    device_case<std::int32_t, V> d(Side::on_gpu, c);
    run_case<Side>(d, c, plus{}, det);
    EXPECT_EQ(bits_of(d.out.read()), bits_of(want));
  }
}

TYPED_TEST(IndexAddDeterministic, TheDerivedScaleSeesEveryValueOfAnUnalignedColumn) {
  check_scale_sees_every_value<TypeParam, double>();
  check_scale_sees_every_value<TypeParam, bfloat16>();
  check_scale_sees_every_value<TypeParam, float>();
}

// At the contract's limit (n = rows = 1025: |v|·2^s < 2^51): the largest
// allowed values all in one element sum without overflow; a value reaching
// the limit is refused naming 'src', after the other rows were applied (it
// counts as 0); NaN in a row whose index is bad is no 'src' error.
TYPED_TEST(IndexAddDeterministic, ValuesOutsideTheContractAreRefusedAfterTheRest) {
  using S = TypeParam;
  const std::int64_t rows = 1025, cols = 2, out_rows = 3;
  const int s = 30, headroom = 62 - ceil_log2(rows);
  row_case<std::int64_t, double> c(rows, cols, out_rows, 0, 0, 0);
  c.index.assign(static_cast<std::size_t>(rows), 1);
  c.index[0] = 0;
  const double top = std::ldexp(std::ldexp(1.0, headroom) - 1, -s);  // the largest multiple of 2^-s allowed
  c.fill([&] { return top; });
  for (auto& v : c.out) v = 0.5;
  device_case<std::int64_t, double> d(S::on_gpu, c);
  index_add_options opts;
  opts.deterministic = true;
  opts.fixed_point_bits = s;
  run_case<S>(d, c, plus{}, opts);
  EXPECT_EQ(bits_of(d.out.read()), bits_of(fixed_point_reference(c, s)));
  // One value at the limit: refused; the others applied, it counting as 0.
  c.at(500, 1) = std::ldexp(1.0, headroom - s);
  device_case<std::int64_t, double> bad(S::on_gpu, c);
  expect_invalid([&] { run_case<S>(bad, c, plus{}, opts); }, {"tally::index_add", "'src'", "2^30"});
  auto want = c;
  want.at(500, 1) = 0.0;
  EXPECT_EQ(bits_of(bad.out.read()), bits_of(fixed_point_reference(want, s)));
  EXPECT_TRUE(bad.out.guards_intact());
  // NaN, derived scale: refused the same way.
  c.at(500, 1) = std::numeric_limits<double>::quiet_NaN();
  device_case<std::int64_t, double> nan(S::on_gpu, c);
  opts.fixed_point_bits = kDeriveFixedPointScale;
  expect_invalid([&] { run_case<S>(nan, c, plus{}, opts); }, {"tally::index_add", "'src'", "NaN"});
  EXPECT_EQ(bits_of(nan.out.read()), bits_of(fixed_point_reference(c, derived_scale(c))));
  // NaN in a row whose index is out of range: only the index is reported.
  c.index[500] = out_rows;
  device_case<std::int64_t, double> skipped(S::on_gpu, c);
  expect_invalid([&] { run_case<S>(skipped, c, plus{}, opts); }, {"tally::index_add", "'index'", "[500]", "= 3"});
  EXPECT_EQ(bits_of(skipped.out.read()), bits_of(fixed_point_reference(c, derived_scale(c))));
}

}  // namespace
}  // namespace tally::testing
