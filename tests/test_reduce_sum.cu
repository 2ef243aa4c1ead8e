// Sums: every element type, accumulators wider than the input, and the
// value-returning form. Each result must equal the fixed tree bit for bit and
// lie within the rounding bound of the exact (long double or integer) sum.
// NaN and ±inf flow through sums, plain and compensated, as operators.hpp
// documents; the empty input gives zero.
#include <cmath>
#include <complex>
#include <limits>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceSum : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceSum, backends, backend_names);

/// Checks `got` against the exact sum of x: equal for integers, within the
/// tree's rounding bound (per part for complex numbers) for reals.
template <class T, class Out>
void expect_near_exact_sum(const std::vector<T>& x, const Out& got) {
  using Acc = accumulator_for_t<Out>;
  constexpr int V = tree::vector_width<T>;
  const auto n = static_cast<std::int64_t>(x.size());
  if constexpr (std::is_integral_v<Out>) {
    EXPECT_EQ(got, exact_sum<Out>(x));
  } else if constexpr (is_complex_v<Out>) {
    using R = typename Out::value_type;
    long_sum re, im;
    for (const T& v : x) {
      re.add(static_cast<long double>(v.real()));
      im.add(static_cast<long double>(v.imag()));
    }
    EXPECT_TRUE(within<R>(got.real(), re.value, sum_bound(n, V, epsilon_of<R>, re.magnitude))) << "real part";
    EXPECT_TRUE(within<R>(got.imag(), im.value, sum_bound(n, V, epsilon_of<R>, im.magnitude))) << "imaginary part";
  } else {
    long_sum s;
    for (const T& v : x) s.add(convert<double>(v));
    EXPECT_TRUE(within<Out>(convert<double>(got), s.value, sum_bound(n, V, epsilon_of<Acc>, s.magnitude)));
  }
}

/// Sum of n random T into Out on Side, from a pointer `offset` elements past
/// an aligned address: bitwise the tree, and close to the exact sum.
template <class Side, class T, class Out = default_accumulator_t<T>>
void check_sum(random_source& rng, std::int64_t n, std::size_t offset) {
  SCOPED_TRACE(type_name<T>() + " summed into " + type_name<Out>() + ", n = " + std::to_string(n) + ", offset " +
               std::to_string(offset));
  const auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  const Out got = reduce_on<Side, Out>(x, offset);
  EXPECT_PRED_FORMAT2(bitwise_equal, got, reduce_expected<Out>(x.data(), n));
  expect_near_exact_sum(x, got);
}

/// check_sum at a few sizes: tiny, around a tile, a random few hundred thousand.
template <class Side, class T, class Out = default_accumulator_t<T>>
void check_sum_sizes(random_source& rng) {
  constexpr std::int64_t tile = std::int64_t{tree::kTileVectors} * tree::vector_width<T>;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{33}, tile + 1, rng.integer(2, 5000), rng.integer(100000, 400000)})
    check_sum<Side, T, Out>(rng, n, static_cast<std::size_t>(rng.integer(0, 3)));
}

TYPED_TEST(ReduceSum, EveryElementTypeMatchesTreeAndExactSum) {
  using S = TypeParam;
  check_sum_sizes<S, std::int32_t>(this->rng);
  check_sum_sizes<S, std::int64_t>(this->rng);
  check_sum_sizes<S, std::uint32_t>(this->rng);
  check_sum_sizes<S, std::uint64_t>(this->rng);
  check_sum_sizes<S, half>(this->rng);
  check_sum_sizes<S, bfloat16>(this->rng);
  check_sum_sizes<S, float>(this->rng);
  check_sum_sizes<S, double>(this->rng);
  check_sum_sizes<S, complex<float>>(this->rng);
  check_sum_sizes<S, complex<double>>(this->rng);
}

TYPED_TEST(ReduceSum, AccumulatorWiderThanInput) {
  using S = TypeParam;
  check_sum_sizes<S, float, double>(this->rng);
  check_sum_sizes<S, half, float>(this->rng);
  check_sum_sizes<S, bfloat16, float>(this->rng);
  check_sum_sizes<S, half, half>(this->rng);  // accumulates in float, rounds once at the end
  check_sum_sizes<S, std::int32_t, std::int64_t>(this->rng);
  check_sum_sizes<S, complex<float>, complex<double>>(this->rng);
}

TYPED_TEST(ReduceSum, ValueReturningSumEqualsReduce) {
  using S = TypeParam;
  const std::int64_t n = this->rng.integer(50000, 200000);
  const auto x = random_values<float>(this->rng, static_cast<std::size_t>(n));
  buffer<float> dx(S::on_gpu, x.size(), 1);
  dx.write(x);
  const float* p = dx.data();

  const float as_float = tally::sum(S::backend(), p, n);
  EXPECT_PRED_FORMAT2(bitwise_equal, as_float, reduce_expected<float>(x.data(), n));
  const double as_double = tally::sum<double>(S::backend(), p, n);
  EXPECT_PRED_FORMAT2(bitwise_equal, as_double, reduce_expected<double>(x.data(), n));
  const float from_span = tally::sum(S::backend(), std::span<const float>(p, static_cast<std::size_t>(n)));
  EXPECT_PRED_FORMAT2(bitwise_equal, from_span, as_float);

  // half input: the value comes back in the float accumulator.
  const auto h = random_values<half>(this->rng, 4097);
  buffer<half> dh(S::on_gpu, h.size(), 3);
  dh.write(h);
  const auto half_sum = tally::sum(S::backend(), static_cast<const half*>(dh.data()), 4097);
  static_assert(std::is_same_v<decltype(half_sum), const float>);
  EXPECT_PRED_FORMAT2(bitwise_equal, half_sum, reduce_expected<float>(h.data(), 4097));
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

TYPED_TEST(ReduceSum, InfinitiesAndNaN) {
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

TYPED_TEST(ReduceSum, EmptyInputGivesZero) {
  using S = TypeParam;
  options compensated;
  compensated.sum = summation::compensated;
  expect_empty_gives<S, float, float>(plus{}, 0.0f);
  expect_empty_gives<S, double, double>(plus{}, 0.0, compensated);
  expect_empty_gives<S, half, half>(plus{}, convert<half>(0.0f));
  expect_empty_gives<S, complex<double>, complex<double>>(plus{}, complex<double>(0, 0));
  expect_empty_gives<S, std::int32_t, std::int32_t>(plus{}, 0);
  EXPECT_EQ(tally::sum(S::backend(), static_cast<const double*>(nullptr), 0), 0.0) << "value-returning sum";
}

}  // namespace
}  // namespace tally::testing
