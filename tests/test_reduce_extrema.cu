// minimum and maximum of every element type: the exact extremum and the
// tree's bits; infinities and NaN (operators.hpp); the empty input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceExtrema : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceExtrema, backends, backend_names);

/// minimum and maximum of n random T: the exact extremum, bitwise the tree.
template <class Side, class T>
void check_extrema(random_source& rng, std::int64_t n) {
  using Out = default_accumulator_t<T>;
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("extrema of " + type_name<T>(), n, offset));
  const auto x = random_values<T>(rng, static_cast<std::size_t>(n), -1000.0, 1000.0);
  Out lo = convert<Out>(x[0]), hi = convert<Out>(x[0]);
  for (T v : x) {
    lo = std::min(lo, convert<Out>(v));
    hi = std::max(hi, convert<Out>(v));
  }
  const Out got_min = reduce_on<Side, Out>(x, offset, minimum{});
  const Out got_max = reduce_on<Side, Out>(x, offset, maximum{});
  EXPECT_PRED_FORMAT2(bitwise_equal, got_min, lo);
  EXPECT_PRED_FORMAT2(bitwise_equal, got_max, hi);
  EXPECT_PRED_FORMAT2(bitwise_equal, got_min, reduce_expected<Out>(x.data(), n, minimum{}));
  EXPECT_PRED_FORMAT2(bitwise_equal, got_max, reduce_expected<Out>(x.data(), n, maximum{}));
}

TYPED_TEST(ReduceExtrema, MinimumMaximumGiveExactExtrema) {
  using S = TypeParam;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{31}, this->rng.integer(100, 9000), this->rng.integer(100000, 300000)}) {
    check_extrema<S, std::int32_t>(this->rng, n);
    check_extrema<S, std::int64_t>(this->rng, n);
    check_extrema<S, std::uint32_t>(this->rng, n);
    check_extrema<S, std::uint64_t>(this->rng, n);
    check_extrema<S, half>(this->rng, n);
    check_extrema<S, bfloat16>(this->rng, n);
    check_extrema<S, float>(this->rng, n);
    check_extrema<S, double>(this->rng, n);
  }
}

/// minimum and maximum: infinities are ordinary extremes; any NaN makes the
/// result NaN (operators.hpp).
template <class Side, class T>
void check_special_min_max(random_source& rng) {
  using Out = default_accumulator_t<T>;
  const std::int64_t n = rng.integer(3, 200000);
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(type_name<T>() + ", n = " + std::to_string(n) + ", offset " + std::to_string(offset));
  auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  const auto lo = static_cast<std::size_t>(rng.integer(0, n - 1));
  auto hi = static_cast<std::size_t>(rng.integer(0, n - 1));
  if (hi == lo) hi = (lo + 1) % static_cast<std::size_t>(n);
  x[lo] = convert<T>(-std::numeric_limits<float>::infinity());
  x[hi] = infinity<T>();
  EXPECT_EQ(convert<double>(reduce_on<Side, Out>(x, offset, minimum{})), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(convert<double>(reduce_on<Side, Out>(x, offset, maximum{})), std::numeric_limits<double>::infinity());
  x[static_cast<std::size_t>(rng.integer(0, n - 1))] = quiet_nan<T>();
  x[static_cast<std::size_t>(rng.integer(0, n - 1))] = quiet_nan<T>();
  EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(x, offset, minimum{}))) << "minimum propagates NaN";
  EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(x, offset, maximum{}))) << "maximum propagates NaN";
}

TYPED_TEST(ReduceExtrema, InfinitiesAndNaN) {
  using S = TypeParam;
  for (int round = 0; round < 3; ++round) {
    check_special_min_max<S, float>(this->rng);
    check_special_min_max<S, double>(this->rng);
    check_special_min_max<S, half>(this->rng);
    check_special_min_max<S, bfloat16>(this->rng);
  }
}

TYPED_TEST(ReduceExtrema, EmptyInputGivesIdentity) {
  using S = TypeParam;
  constexpr float inf = std::numeric_limits<float>::infinity();
  expect_empty_gives<S, float, float>(minimum{}, inf);
  expect_empty_gives<S, double, double>(maximum{}, -std::numeric_limits<double>::infinity());
  expect_empty_gives<S, std::int32_t, std::int32_t>(minimum{}, std::numeric_limits<std::int32_t>::max());
  expect_empty_gives<S, std::uint32_t, std::uint32_t>(maximum{}, std::uint32_t{0});
  expect_empty_gives<S, bfloat16, float>(maximum{}, -inf);
}

}  // namespace
}  // namespace tally::testing
