// index_add with tally::minimum and tally::maximum on both backends: exact
// for every value type (out takes part, as the starting value), NaN
// propagates, for narrow and wide rows, strides, unaligned sources, skewed
// keys and both strategies.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAddExtrema : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddExtrema, backends, backend_names);

template <class Side, class I, class V, class Op>
void check_extrema() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 1200, out_rows = 30;
  for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{5}, std::int64_t{33}, std::int64_t{200}}) {
    const int layout = static_cast<int>(cols % 2);
    for (const keys pattern : {keys::uniform, keys::half_on_one}) {
      row_case<I, V> c(rows, cols, out_rows, layout ? 1 : 0, layout ? 2 : 0, layout);
      c.index = make_index<I>(rng, rows, out_rows, pattern);
      // A coarse grid of values, so that extrema tie often.
      c.fill([&] { return exactly<V>(std::ldexp(static_cast<long double>(rng.integer(-300, 300)), -3)); });
      c.at(rows / 2, cols - 1) = convert<V>(std::numeric_limits<float>::quiet_NaN());
      const reference<I, V, Op> ref(c);
      device_case<I, V> d(Side::on_gpu, c);
      for (const auto strategy : kIndexAddStrategies) {
        SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", " + tally::to_string(strategy));
        index_add_options opts;
        opts.strategy = strategy;
        const auto got = run_and_read<Side>(d, c, Op{}, opts);
        EXPECT_TRUE(unreached_intact(c, ref, got));
        int nans = 0;
        for (std::size_t e = 0; e < got.size(); ++e) {
          if (!ref.reached[e]) continue;
          const long double g = to_long_double(got[e]);
          if (std::isnan(ref.value[e])) {
            EXPECT_TRUE(std::isnan(g)) << "out element " << e << " should be NaN";
            ++nans;
          } else {
            ASSERT_EQ(g, ref.value[e]) << "out element " << e;
          }
        }
        EXPECT_EQ(nans, 1);
      }
    }
  }
}

TYPED_TEST(IndexAddExtrema, MinimumIsExact) {
  check_extrema<TypeParam, std::int32_t, float, minimum>();
  check_extrema<TypeParam, std::int64_t, float, minimum>();
  check_extrema<TypeParam, std::int64_t, double, minimum>();
  check_extrema<TypeParam, std::int64_t, half, minimum>();
  check_extrema<TypeParam, std::int64_t, bfloat16, minimum>();
}

TYPED_TEST(IndexAddExtrema, MaximumIsExact) {
  check_extrema<TypeParam, std::int64_t, float, maximum>();
  check_extrema<TypeParam, std::int32_t, double, maximum>();
  check_extrema<TypeParam, std::int64_t, double, maximum>();
  check_extrema<TypeParam, std::int32_t, half, maximum>();
  check_extrema<TypeParam, std::int32_t, bfloat16, maximum>();
}

}  // namespace
}  // namespace tally::testing
