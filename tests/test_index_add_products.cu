// index_add with tally::multiplies and a make_op operator on both backends:
// products of powers of two, each (key, column) given few enough factors
// of 2 and 1/2 that every partial product is exact in every value type (so
// any order of the rows gives the exact product, signed zero included), and
// a custom operator (the value of larger magnitude) that is exact the same
// way; for narrow and wide rows, strides, unaligned sources, skewed keys and
// every strategy. The deterministic mode refuses both, naming the option.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAddProducts : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddProducts, backends, backend_names);

/// The value of larger magnitude; of two with one magnitude, the larger
/// value. Associative and commutative on non-zero values; identity 0.
struct larger_magnitude {
  template <class T>
  TALLY_HD_INLINE T operator()(T a, T b) const {
    const T ma = a < T(0) ? -a : a, mb = b < T(0) ? -b : b;
    if (ma != mb) return ma < mb ? b : a;
    return a < b ? b : a;
  }
};

/// Most factors of 2 (and, apart, of 1/2) one (key, column) receives: every
/// partial product of its rows and out then lies in [2^-8, 2^8] in
/// magnitude, exact in half and bfloat16 too.
constexpr int kMostDoublings = 6;

/// A case of `rows` rows into `out_rows` of ±1, ±2 and ±1/2 (the doublings
/// and halvings per (key, column) capped at kMostDoublings), out starting at
/// ±1, ±2 or ±1/2; one source value is -0 (its element's product is then a
/// zero whose sign the other factors decide).
template <class I, class V>
row_case<I, V> power_of_two_case(random_source& rng, std::int64_t rows, std::int64_t cols, std::int64_t out_rows,
                                 keys pattern) {
  const int layout = static_cast<int>(cols % 2);
  row_case<I, V> c(rows, cols, out_rows, layout ? 1 : 0, layout ? 2 : 0, layout);
  c.index = make_index<I>(rng, rows, out_rows, pattern);
  const auto factor = [&](int& doublings, int& halvings) -> long double {
    const long double sign = rng.integer(0, 1) ? -1.0L : 1.0L;
    const std::int64_t pick = rng.integer(0, 9);
    if (pick == 0 && doublings < kMostDoublings) {
      ++doublings;
      return sign * 2;
    }
    if (pick == 1 && halvings < kMostDoublings) {
      ++halvings;
      return sign / 2;
    }
    return sign;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, std::pair<int, int>> used;  // (key, column) -> (doublings, halvings)
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      auto& [doublings, halvings] = used[{static_cast<std::int64_t>(c.index[static_cast<std::size_t>(i)]), j}];
      c.at(i, j) = exactly<V>(factor(doublings, halvings));
    }
  for (std::int64_t k = 0; k < out_rows; ++k)
    for (std::int64_t j = 0; j < cols; ++j) {
      int doublings = kMostDoublings - 1, halvings = kMostDoublings - 1;  // at most one more each
      c.out_at(k, j) = exactly<V>(factor(doublings, halvings));
    }
  c.at(rows / 3, cols - 1) = exactly<V>(-0.0L);
  return c;
}

/// out's expected elements: each landing value combined into its element by
/// f in long double; unreached elements as they were.
template <class I, class V, class F>
std::vector<V> expected_out(row_case<I, V>& c, const F& f) {
  std::vector<long double> value(c.out.size());
  for (std::size_t e = 0; e < value.size(); ++e) value[e] = to_long_double(c.out[e]);
  for_each_landing(c, [&](std::size_t e, long double v) { value[e] = f(value[e], v); });
  std::vector<V> want = c.out;
  for (std::int64_t k = 0; k < c.out_rows; ++k)
    for (std::int64_t j = 0; j < c.cols; ++j) {
      const auto e = static_cast<std::size_t>(k * c.out_stride + j);
      want[e] = exactly<V>(value[e]);
    }
  return want;
}

/// Runs op on power_of_two_case's problems with every strategy and expects
/// `want(case)`'s bits in every element (gaps and guards intact).
template <class Side, class I, class V, class Op, class Want>
void check_exact(const Op& op, const Want& want) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 1500, out_rows = 40;
  for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{5}, std::int64_t{33}, std::int64_t{200}}) {
    for (const keys pattern : {keys::uniform, keys::half_on_one}) {
      row_case<I, V> c = power_of_two_case<I, V>(rng, rows, cols, out_rows, pattern);
      const std::vector<V> expected = want(c);
      device_case<I, V> d(Side::on_gpu, c);
      for (const auto strategy : kIndexAddStrategies) {
        SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", " + tally::to_string(strategy));
        index_add_options opts;
        opts.strategy = strategy;
        const auto got = run_and_read<Side>(d, c, op, opts);
        ASSERT_EQ(got.size(), expected.size());
        for (std::size_t e = 0; e < got.size(); ++e)
          ASSERT_EQ(std::memcmp(&got[e], &expected[e], sizeof(V)), 0)
              << "out element " << e << ": got " << to_long_double(got[e]) << ", expected "
              << to_long_double(expected[e]);
      }
    }
  }
}

template <class Side, class I, class V>
void check_products() {
  check_exact<Side, I, V>(multiplies{}, [](row_case<I, V>& c) {
    return expected_out(c, [](long double a, long double b) { return a * b; });
  });
}

template <class Side, class I, class V>
void check_larger_magnitude() {
  check_exact<Side, I, V>(make_op(larger_magnitude{}, 0.0f), [](row_case<I, V>& c) {
    // Written out here rather than calling larger_magnitude: -0 never wins
    // (its magnitude is the smallest) unless the element was 0 too.
    return expected_out(c, [](long double a, long double b) {
      if (std::fabs(a) != std::fabs(b)) return std::fabs(a) < std::fabs(b) ? b : a;
      return a < b ? b : a;
    });
  });
}

TYPED_TEST(IndexAddProducts, ProductsOfPowersOfTwoAreExact) {
  check_products<TypeParam, std::int32_t, float>();
  check_products<TypeParam, std::int64_t, float>();
  check_products<TypeParam, std::int64_t, double>();
  check_products<TypeParam, std::int32_t, half>();
  check_products<TypeParam, std::int64_t, bfloat16>();
}

TYPED_TEST(IndexAddProducts, CustomOperatorIsAppliedToEveryRow) {
  check_larger_magnitude<TypeParam, std::int64_t, float>();
  check_larger_magnitude<TypeParam, std::int32_t, double>();
  check_larger_magnitude<TypeParam, std::int64_t, half>();
  check_larger_magnitude<TypeParam, std::int32_t, bfloat16>();
}

TYPED_TEST(IndexAddProducts, DeterministicModeRefusesProductsAndCustomOperators) {
  using S = TypeParam;
  const auto b = S::backend();
  constexpr std::int64_t rows = 64, cols = 3, out_rows = 8;
  guarded<std::int64_t> index(S::on_gpu, rows);
  guarded<float> src(S::on_gpu, rows * cols), out(S::on_gpu, out_rows * cols);
  index.write(std::vector<std::int64_t>(rows, 2));
  src.write(std::vector<float>(rows * cols, 2.0f));
  out.write(std::vector<float>(out_rows * cols, 1.0f));
  for (const auto strategy : kIndexAddStrategies)
    for (const check_mode checks : {check_mode::checked, check_mode::unchecked}) {
      SCOPED_TRACE(std::string(tally::to_string(strategy)) +
                   (checks == check_mode::checked ? ", checked" : ", unchecked"));
      index_add_options opts;
      opts.strategy = strategy;
      opts.checks = checks;
      opts.deterministic = true;
      const auto before = out.bytes();
      expect_invalid([&] { tally::index_add(b, index.data(), src.data(), rows, cols, out.data(), out_rows,
                                            multiplies{}, opts); },
                     {"tally::index_add", "'options.deterministic'", "no deterministic mode"});
      expect_invalid([&] { tally::index_add(b, index.data(), src.data(), rows, cols, out.data(), out_rows,
                                            make_op(larger_magnitude{}, 0.0f), opts); },
                     {"tally::index_add", "'options.deterministic'", "no deterministic mode"});
      EXPECT_TRUE(unchanged(out, before));
    }
}

}  // namespace
}  // namespace tally::testing
