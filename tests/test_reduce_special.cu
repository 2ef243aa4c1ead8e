// Special values and the empty input: NaN and ±inf flow through sums (plain
// and compensated), min/max and arg_min/arg_max as documented in
// operators.hpp; n = 0 stores the operator's identity.
//
// NaN results are compared as "is NaN", not bit for bit: which NaN payload an
// operation returns differs between x86 and CUDA.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"
#include "user_operators.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceSpecial : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceSpecial, backends, backend_names);

template <class T>
T infinity() {
  return convert<T>(std::numeric_limits<float>::infinity());
}
template <class T>
T quiet_nan() {
  return convert<T>(std::numeric_limits<float>::quiet_NaN());
}

template <class T>
bool is_nan_value(const T& v) {
  return std::isnan(convert<double>(v));
}

/// Sums of x with special values planted at random places, for T into Out.
template <class Side, class T, class Out = default_accumulator_t<T>>
void check_special_sums(random_source& rng, const options& opts) {
  const std::int64_t n = rng.integer(1, 200000);
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(type_name<T>() + " into " + type_name<Out>() + ", n = " + std::to_string(n) + ", offset " +
               std::to_string(offset) + (opts.sum == summation::compensated ? ", compensated" : ", plain"));
  const auto place = [&] { return static_cast<std::size_t>(rng.integer(0, n - 1)); };
  const auto base = random_values<T>(rng, static_cast<std::size_t>(n));

  auto with_inf = base;
  with_inf[place()] = infinity<T>();
  const Out inf_sum = reduce_on<Side, Out>(with_inf, offset, plus{}, opts);
  EXPECT_EQ(convert<double>(inf_sum), std::numeric_limits<double>::infinity()) << "+inf + finite values is +inf";

  auto with_neg_inf = base;
  with_neg_inf[place()] = convert<T>(-std::numeric_limits<float>::infinity());
  EXPECT_EQ(convert<double>(reduce_on<Side, Out>(with_neg_inf, offset, plus{}, opts)),
            -std::numeric_limits<double>::infinity());

  if (n >= 2) {
    auto both = base;
    const auto i = static_cast<std::size_t>(rng.integer(0, n - 2));
    const auto j = static_cast<std::size_t>(rng.integer(static_cast<std::int64_t>(i) + 1, n - 1));
    both[i] = infinity<T>();
    both[j] = convert<T>(-std::numeric_limits<float>::infinity());
    EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(both, offset, plus{}, opts))) << "+inf + -inf is NaN";
  }

  auto with_nan = base;
  with_nan[place()] = quiet_nan<T>();
  EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(with_nan, offset, plus{}, opts))) << "NaN propagates through sums";
}

TYPED_TEST(ReduceSpecial, InfinitiesAndNaNInSums) {
  using S = TypeParam;
  options compensated;
  compensated.sum = summation::compensated;
  for (const options& opts : {options{}, compensated}) {
    check_special_sums<S, float>(this->rng, opts);
    check_special_sums<S, double>(this->rng, opts);
    check_special_sums<S, half, float>(this->rng, opts);
    check_special_sums<S, float, double>(this->rng, opts);
  }
  check_special_sums<S, half, half>(this->rng, {});
  check_special_sums<S, bfloat16, float>(this->rng, {});
}

/// minimum and maximum return NaN when any input is NaN; arg_min and arg_max
/// return the first NaN's index; infinities are ordinary extremes.
template <class Side, class T>
void check_special_extrema(random_source& rng) {
  using Out = default_accumulator_t<T>;
  const std::int64_t n = rng.integer(3, 200000);
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(type_name<T>() + ", n = " + std::to_string(n) + ", offset " + std::to_string(offset));
  auto x = random_values<T>(rng, static_cast<std::size_t>(n));

  // Infinities: the extremes themselves, found at their index.
  const auto lo = static_cast<std::size_t>(rng.integer(0, n - 1));
  auto hi = static_cast<std::size_t>(rng.integer(0, n - 1));
  if (hi == lo) hi = (lo + 1) % static_cast<std::size_t>(n);
  x[lo] = convert<T>(-std::numeric_limits<float>::infinity());
  x[hi] = infinity<T>();
  EXPECT_EQ(convert<double>(reduce_on<Side, Out>(x, offset, minimum{})), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(convert<double>(reduce_on<Side, Out>(x, offset, maximum{})), std::numeric_limits<double>::infinity());
  EXPECT_EQ((reduce_on<Side, value_index<T>>(x, offset, arg_min{})).index, static_cast<std::int64_t>(lo));
  EXPECT_EQ((reduce_on<Side, value_index<T>>(x, offset, arg_max{})).index, static_cast<std::int64_t>(hi));

  // NaNs at two random places: min/max give NaN, arg_* the first NaN.
  const auto a = static_cast<std::size_t>(rng.integer(0, n - 1));
  const auto b = static_cast<std::size_t>(rng.integer(0, n - 1));
  x[a] = quiet_nan<T>();
  x[b] = quiet_nan<T>();
  const auto first_nan = static_cast<std::int64_t>(std::min(a, b));
  EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(x, offset, minimum{}))) << "minimum propagates NaN";
  EXPECT_TRUE(is_nan_value(reduce_on<Side, Out>(x, offset, maximum{}))) << "maximum propagates NaN";
  const auto amin = reduce_on<Side, value_index<T>>(x, offset, arg_min{});
  const auto amax = reduce_on<Side, value_index<T>>(x, offset, arg_max{});
  EXPECT_EQ(amin.index, first_nan);
  EXPECT_EQ(amax.index, first_nan);
  EXPECT_TRUE(is_nan_value(amin.value));
  EXPECT_TRUE(is_nan_value(amax.value));
}

TYPED_TEST(ReduceSpecial, InfinitiesAndNaNInExtrema) {
  using S = TypeParam;
  for (int round = 0; round < 3; ++round) {
    check_special_extrema<S, float>(this->rng);
    check_special_extrema<S, double>(this->rng);
    check_special_extrema<S, half>(this->rng);
    check_special_extrema<S, bfloat16>(this->rng);
  }
}

/// Reduces an empty input (a valid pointer, then a null one) into a poisoned
/// output and expects `identity`.
template <class Side, class T, class Out, class Op>
void expect_empty_gives(Op op, const Out& identity, const options& opts = {}) {
  SCOPED_TRACE("empty " + type_name<T>() + " into " + type_name<Out>());
  const std::vector<T> none;
  EXPECT_PRED_FORMAT2(bitwise_equal, (reduce_on<Side, Out>(none, 1, op, opts)), identity);
  buffer<Out> out(Side::on_gpu, 1);
  tally::reduce(Side::backend(), static_cast<const T*>(nullptr), 0, out.data(), op, opts);
  EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], identity);
}

TYPED_TEST(ReduceSpecial, EmptyInputGivesIdentity) {
  using S = TypeParam;
  constexpr float inf = std::numeric_limits<float>::infinity();
  constexpr std::int64_t no_index = std::numeric_limits<std::int64_t>::max();
  options compensated;
  compensated.sum = summation::compensated;

  expect_empty_gives<S, float, float>(plus{}, 0.0f);
  expect_empty_gives<S, double, double>(plus{}, 0.0, compensated);
  expect_empty_gives<S, half, half>(plus{}, convert<half>(0.0f));
  expect_empty_gives<S, complex<double>, complex<double>>(plus{}, complex<double>(0, 0));
  expect_empty_gives<S, std::int32_t, std::int32_t>(plus{}, 0);
  expect_empty_gives<S, float, float>(multiplies{}, 1.0f);
  expect_empty_gives<S, std::uint64_t, std::uint64_t>(multiplies{}, std::uint64_t{1});
  expect_empty_gives<S, float, float>(minimum{}, inf);
  expect_empty_gives<S, double, double>(maximum{}, -std::numeric_limits<double>::infinity());
  expect_empty_gives<S, std::int32_t, std::int32_t>(minimum{}, std::numeric_limits<std::int32_t>::max());
  expect_empty_gives<S, std::uint32_t, std::uint32_t>(maximum{}, std::uint32_t{0});
  expect_empty_gives<S, bfloat16, float>(maximum{}, -inf);
  expect_empty_gives<S, std::uint32_t, std::uint32_t>(bit_and{}, ~std::uint32_t{0});
  expect_empty_gives<S, std::int64_t, std::int64_t>(bit_or{}, std::int64_t{0});
  expect_empty_gives<S, std::uint64_t, std::uint64_t>(bit_xor{}, std::uint64_t{0});
  expect_empty_gives<S, float, value_index<float>>(arg_min{}, value_index<float>{inf, no_index});
  expect_empty_gives<S, half, value_index<half>>(arg_max{}, value_index<half>{convert<half>(-inf), no_index});
  expect_empty_gives<S, mat2, mat2>(matrix_product(), mat2_identity);

  buffer<float> out(S::on_gpu, 1);
  tally::dot(S::backend(), static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), 0, out.data());
  EXPECT_EQ(out.read()[0], 0.0f) << "dot of empty vectors";
  out.poison();
  tally::squared_norm(S::backend(), static_cast<const complex<float>*>(nullptr), 0, out.data());
  EXPECT_EQ(out.read()[0], 0.0f) << "squared_norm of an empty vector";
  EXPECT_EQ(tally::sum(S::backend(), static_cast<const double*>(nullptr), 0), 0.0) << "value-returning sum";
}

}  // namespace
}  // namespace tally::testing
