// arg_min and arg_max of every element type: the first extremum's index
// among many ties, and the tree's bits; infinities and NaN (operators.hpp);
// the empty input.
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
class ReduceArgExtrema : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceArgExtrema, backends, backend_names);

/// arg_min and arg_max over values with many ties: the first extremum's index.
template <class Side, class T>
void check_arg_extrema(random_source& rng, std::int64_t n) {
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("arg extrema of " + type_name<T>(), n, offset));
  const auto x = random_integers<T>(rng, static_cast<std::size_t>(n), 1, 60);  // ties everywhere
  std::int64_t first_min = 0, first_max = 0;
  for (std::int64_t i = 1; i < n; ++i) {
    if (convert<double>(x[i]) < convert<double>(x[first_min])) first_min = i;
    if (convert<double>(x[i]) > convert<double>(x[first_max])) first_max = i;
  }
  using Out = value_index<T>;
  const Out got_min = reduce_on<Side, Out>(x, offset, arg_min{});
  const Out got_max = reduce_on<Side, Out>(x, offset, arg_max{});
  EXPECT_EQ(got_min.index, first_min);
  EXPECT_EQ(got_max.index, first_max);
  EXPECT_PRED_FORMAT2(bitwise_equal, got_min.value, x[first_min]);
  EXPECT_PRED_FORMAT2(bitwise_equal, got_max.value, x[first_max]);
  EXPECT_PRED_FORMAT2(bitwise_equal, got_min, reduce_expected<Out>(x.data(), n, arg_min{}));
  EXPECT_PRED_FORMAT2(bitwise_equal, got_max, reduce_expected<Out>(x.data(), n, arg_max{}));
}

TYPED_TEST(ReduceArgExtrema, ArgMinArgMaxReturnFirstExtremum) {
  using S = TypeParam;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{33}, this->rng.integer(100, 9000), this->rng.integer(100000, 300000)}) {
    check_arg_extrema<S, std::int32_t>(this->rng, n);
    check_arg_extrema<S, std::int64_t>(this->rng, n);
    check_arg_extrema<S, std::uint32_t>(this->rng, n);
    check_arg_extrema<S, half>(this->rng, n);
    check_arg_extrema<S, bfloat16>(this->rng, n);
    check_arg_extrema<S, float>(this->rng, n);
    check_arg_extrema<S, double>(this->rng, n);
  }
}

/// arg_min and arg_max: infinities are ordinary extremes found at their
/// index; with NaNs, the first NaN's index and a NaN value (operators.hpp).
template <class Side, class T>
void check_special_arg(random_source& rng) {
  const std::int64_t n = rng.integer(3, 200000);
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(type_name<T>() + ", n = " + std::to_string(n) + ", offset " + std::to_string(offset));
  auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  const auto lo = static_cast<std::size_t>(rng.integer(0, n - 1));
  auto hi = static_cast<std::size_t>(rng.integer(0, n - 1));
  if (hi == lo) hi = (lo + 1) % static_cast<std::size_t>(n);
  x[lo] = convert<T>(-std::numeric_limits<float>::infinity());
  x[hi] = infinity<T>();
  EXPECT_EQ((reduce_on<Side, value_index<T>>(x, offset, arg_min{})).index, static_cast<std::int64_t>(lo));
  EXPECT_EQ((reduce_on<Side, value_index<T>>(x, offset, arg_max{})).index, static_cast<std::int64_t>(hi));
  const auto a = static_cast<std::size_t>(rng.integer(0, n - 1));
  const auto b = static_cast<std::size_t>(rng.integer(0, n - 1));
  x[a] = quiet_nan<T>();
  x[b] = quiet_nan<T>();
  const auto first_nan = static_cast<std::int64_t>(std::min(a, b));
  const auto amin = reduce_on<Side, value_index<T>>(x, offset, arg_min{});
  const auto amax = reduce_on<Side, value_index<T>>(x, offset, arg_max{});
  EXPECT_EQ(amin.index, first_nan);
  EXPECT_EQ(amax.index, first_nan);
  EXPECT_TRUE(is_nan_value(amin.value));
  EXPECT_TRUE(is_nan_value(amax.value));
}

TYPED_TEST(ReduceArgExtrema, InfinitiesAndNaN) {
  using S = TypeParam;
  for (int round = 0; round < 3; ++round) {
    check_special_arg<S, float>(this->rng);
    check_special_arg<S, double>(this->rng);
    check_special_arg<S, half>(this->rng);
    check_special_arg<S, bfloat16>(this->rng);
  }
}

TYPED_TEST(ReduceArgExtrema, EmptyInputGivesIdentity) {
  using S = TypeParam;
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr std::int64_t no_index = std::numeric_limits<std::int64_t>::max();
  expect_empty_gives<S, float, value_index<float>>(arg_min{}, value_index<float>{inf, no_index});
  expect_empty_gives<S, half, value_index<half>>(arg_max{}, value_index<half>{convert<half>(-inf), no_index});
}

}  // namespace
}  // namespace tally::testing
