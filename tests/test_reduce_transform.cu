// transform_reduce (one and two inputs, user lambdas), dot, squared_norm and
// compensated summation. Each result equals the fixed tree bit for bit and
// lies within the rounding bound of a long double reference.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceTransform : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceTransform, backends, backend_names);

std::vector<std::int64_t> some_sizes(random_source& rng) {
  return {1, 7, 4097, rng.integer(2, 3000), rng.integer(100000, 300000)};
}

}  // namespace

// Outside the anonymous namespace: nvcc wants a function enclosing an
// extended lambda to be an ordinary named one, with a declared return type.
namespace transform_tests {

/// Σ |x| and max |x| through a user __host__ __device__ lambda, for float in
/// and float or double out.
template <class Side>
void check_unary_transform(random_source& rng) {
  const auto magnitude = [] __host__ __device__(float v) { return v < 0 ? -v : v; };
  for (std::int64_t n : some_sizes(rng)) {
    const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
    SCOPED_TRACE(trace_of("transform_reduce |x|", n, offset));
    const auto x = random_values<float>(rng, static_cast<std::size_t>(n));
    long_sum exact;
    float largest = 0;
    for (float v : x) {
      exact.add(std::fabs(v));
      largest = std::max(largest, std::fabs(v));
    }
    const auto sum_into = [&](auto out_type, auto op) {
      using Out = decltype(out_type);
      return run_unary<Side, Out>(x, offset, [&](const float* p, std::int64_t m, Out* out) {
        tally::transform_reduce(Side::backend(), p, m, out, magnitude, op);
      });
    };
    const float sum_f = sum_into(float{}, plus{});
    const double sum_d = sum_into(double{}, plus{});
    const float max_f = sum_into(float{}, maximum{});
    EXPECT_PRED_FORMAT2(bitwise_equal, sum_f, transform_reduce_expected<float>(x.data(), n, magnitude, plus{}));
    EXPECT_PRED_FORMAT2(bitwise_equal, sum_d, transform_reduce_expected<double>(x.data(), n, magnitude, plus{}));
    EXPECT_PRED_FORMAT2(bitwise_equal, max_f, largest);
    constexpr int V = tree::vector_width<float>;
    EXPECT_TRUE(within<float>(sum_f, exact.value, sum_bound(n, V, epsilon_of<float>, exact.magnitude)));
    EXPECT_TRUE(within<double>(sum_d, exact.value, sum_bound(n, V, epsilon_of<double>, exact.magnitude)));
  }
}

/// Σ |x - y| and max |x - y| over float x and double y: two inputs of
/// different types, through a user lambda.
template <class Side>
void check_binary_transform(random_source& rng) {
  const auto distance = [] __host__ __device__(float a, double b) { return a < b ? b - a : a - b; };
  for (std::int64_t n : some_sizes(rng)) {
    const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
    SCOPED_TRACE(trace_of("transform_reduce |x - y|", n, offset));
    const auto x = random_values<float>(rng, static_cast<std::size_t>(n));
    const auto y = random_values<double>(rng, static_cast<std::size_t>(n));
    long_sum exact;
    double largest = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      exact.add(std::fabs(static_cast<long double>(x[i]) - y[i]));
      largest = std::max(largest, distance(x[i], y[i]));
    }
    const auto run = [&](auto op) {
      return run_binary<Side, double>(x, y, offset, [&](const float* xp, const double* yp, std::int64_t m, double* out) {
        tally::transform_reduce(Side::backend(), xp, yp, m, out, distance, op);
      });
    };
    const double sum = run(plus{});
    const double max = run(maximum{});
    EXPECT_PRED_FORMAT2(bitwise_equal, sum, transform_reduce_expected<double>(x.data(), y.data(), n, distance, plus{}));
    EXPECT_PRED_FORMAT2(bitwise_equal, max, largest);
    constexpr int V = tree::vector_width<float, double>;
    // One rounding of each difference, then the tree's.
    const long double bound = sum_bound(n, V, epsilon_of<double>, exact.magnitude) + epsilon_of<double> * exact.magnitude;
    EXPECT_TRUE(within<double>(sum, exact.value, bound));
  }
}

}  // namespace transform_tests

namespace {

TYPED_TEST(ReduceTransform, UnaryTransformWithUserLambda) {
  transform_tests::check_unary_transform<TypeParam>(this->rng);
}

TYPED_TEST(ReduceTransform, BinaryTransformWithUserLambda) {
  transform_tests::check_binary_transform<TypeParam>(this->rng);
}

/// Long double Σ x·y (complex: unconjugated) with Σ |x|·|y| per part.
template <class T, class U>
std::pair<long_sum, long_sum> exact_dot(const std::vector<T>& x, const std::vector<U>& y) {
  long_sum re, im;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if constexpr (is_complex_v<T>) {
      const long double xr = x[i].real(), xi = x[i].imag(), yr = y[i].real(), yi = y[i].imag();
      re.add(xr * yr);
      re.add(-xi * yi);
      im.add(xr * yi);
      im.add(xi * yr);
    } else {
      re.add(static_cast<long double>(convert<double>(x[i])) * convert<double>(y[i]));
    }
  }
  return {re, im};
}

/// dot(x, y) into Out: bitwise the tree, and within the bound of the exact
/// value (one rounding per product, two per complex part, then the tree's).
template <class Side, class T, class U, class Out>
void check_dot(random_source& rng, std::int64_t n) {
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("dot of " + type_name<T>() + " and " + type_name<U>() + " into " + type_name<Out>(), n, offset));
  const auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  const auto y = random_values<U>(rng, static_cast<std::size_t>(n));
  const Out got = run_binary<Side, Out>(x, y, offset, [&](const T* xp, const U* yp, std::int64_t m, Out* out) {
    tally::dot(Side::backend(), xp, yp, m, out);
  });
  EXPECT_PRED_FORMAT2(bitwise_equal, got,
                      transform_reduce_expected<Out>(x.data(), y.data(), n, reference_product{}, plus{}));
  using Product = decltype(rounded_product(x[0], y[0]));
  constexpr int V = tree::vector_width<T, U>;
  const auto [re, im] = exact_dot(x, y);
  if constexpr (is_complex_v<Out>) {
    using R = typename Out::value_type;
    const auto bound = [&](const long_sum& s) {
      return 2 * epsilon_of<R> * s.magnitude + sum_bound(n, V, epsilon_of<R>, s.magnitude);
    };
    EXPECT_TRUE(within<R>(got.real(), re.value, bound(re))) << "real part";
    EXPECT_TRUE(within<R>(got.imag(), im.value, bound(im))) << "imaginary part";
  } else {
    const long double bound = epsilon_of<Product> * re.magnitude +
                              sum_bound(n, V, epsilon_of<accumulator_for_t<Out>>, re.magnitude);
    EXPECT_TRUE(within<Out>(convert<double>(got), re.value, bound));
  }
}

TYPED_TEST(ReduceTransform, DotMatchesTreeAndExactValue) {
  using S = TypeParam;
  for (std::int64_t n : some_sizes(this->rng)) {
    check_dot<S, float, float, float>(this->rng, n);
    check_dot<S, double, double, double>(this->rng, n);
    check_dot<S, float, float, double>(this->rng, n);
    check_dot<S, half, half, float>(this->rng, n);
    check_dot<S, bfloat16, bfloat16, float>(this->rng, n);
    check_dot<S, complex<float>, complex<float>, complex<float>>(this->rng, n);
    check_dot<S, complex<double>, complex<double>, complex<double>>(this->rng, n);
  }
}

/// squared_norm(x) into Out (real): bitwise the tree, close to Σ |x|².
template <class Side, class T, class Out>
void check_squared_norm(random_source& rng, std::int64_t n) {
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("squared_norm of " + type_name<T>() + " into " + type_name<Out>(), n, offset));
  const auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  const Out got = run_unary<Side, Out>(x, offset, [&](const T* p, std::int64_t m, Out* out) {
    tally::squared_norm(Side::backend(), p, m, out);
  });
  EXPECT_PRED_FORMAT2(bitwise_equal, got,
                      transform_reduce_expected<Out>(x.data(), n, reference_square{}, plus{}));
  long_sum exact;
  for (const T& v : x) {
    if constexpr (is_complex_v<T>) {
      exact.add(static_cast<long double>(v.real()) * v.real() + static_cast<long double>(v.imag()) * v.imag());
    } else {
      exact.add(static_cast<long double>(convert<double>(v)) * convert<double>(v));
    }
  }
  using Acc = accumulator_for_t<Out>;
  constexpr int V = tree::vector_width<T>;
  const long double bound = 2 * epsilon_of<Acc> * exact.magnitude + sum_bound(n, V, epsilon_of<Acc>, exact.magnitude);
  EXPECT_TRUE(within<Out>(convert<double>(got), exact.value, bound));
}

TYPED_TEST(ReduceTransform, EmptyInputGivesZero) {
  using S = TypeParam;
  buffer<float> out(S::on_gpu, 1);
  tally::dot(S::backend(), static_cast<const float*>(nullptr), static_cast<const float*>(nullptr), 0, out.data());
  EXPECT_EQ(out.read()[0], 0.0f) << "dot of empty vectors";
  out.poison();
  tally::squared_norm(S::backend(), static_cast<const complex<float>*>(nullptr), 0, out.data());
  EXPECT_EQ(out.read()[0], 0.0f) << "squared_norm of an empty vector";
}

TYPED_TEST(ReduceTransform, SquaredNormMatchesTreeAndExactValue) {
  using S = TypeParam;
  for (std::int64_t n : some_sizes(this->rng)) {
    check_squared_norm<S, float, float>(this->rng, n);
    check_squared_norm<S, double, double>(this->rng, n);
    check_squared_norm<S, half, float>(this->rng, n);
    check_squared_norm<S, complex<float>, float>(this->rng, n);
    check_squared_norm<S, complex<double>, double>(this->rng, n);
  }
}

/// An ill-conditioned sum: small values in [-1, 1) and large ones, 2^k (k =
/// bits of T's mantissa - 3), planted in pairs +B, -B far apart, so the plain
/// tree loses most of the small values' bits. The exact sum is that of the
/// small values, computed in long double.
template <class Side, class T>
void check_compensated_beats_plain(random_source& rng) {
  const std::int64_t n = rng.integer(150000, 250000);
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("compensated sum of " + type_name<T>(), n, offset));
  auto x = random_values<T>(rng, static_cast<std::size_t>(n));
  std::vector<bool> planted(x.size(), false);
  const T big = std::ldexp(T(1), std::numeric_limits<T>::digits - 3);
  for (int pair = 0; pair < 2000; ++pair) {
    const auto i = static_cast<std::size_t>(rng.integer(0, n / 2 - 1));
    const auto j = static_cast<std::size_t>(rng.integer(n / 2, n - 1));
    if (planted[i] || planted[j]) continue;
    const T b = big * static_cast<T>(rng.integer(1, 7));
    x[i] = b;
    x[j] = -b;
    planted[i] = planted[j] = true;
  }
  long_sum small, all;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!planted[i]) small.add(x[i]);
    all.add(std::fabs(x[i]));
  }
  options compensated_opts;
  compensated_opts.sum = summation::compensated;
  const T plain = reduce_on<Side, T>(x, offset);
  const T compensated = reduce_on<Side, T>(x, offset, plus{}, compensated_opts);
  EXPECT_PRED_FORMAT2(bitwise_equal, plain, reduce_expected<T>(x.data(), n));

  // Compensated: one rounding of the result, plus second-order terms of the
  // error accumulation (eps² per tree level over the magnitudes).
  const long double eps = epsilon_of<T>;
  const int levels = std::bit_width(static_cast<std::uint64_t>(n)) + 1;
  const long double compensated_bound = 2 * eps * std::fabs(small.value) + levels * eps * eps * all.magnitude;
  const long double plain_error = std::fabs(plain - small.value);
  const long double compensated_error = std::fabs(compensated - small.value);
  EXPECT_LE(compensated_error, compensated_bound) << "compensated " << compensated << ", exact " << static_cast<double>(small.value);
  EXPECT_GT(plain_error, 10 * compensated_bound) << "the input should defeat plain summation (plain " << plain << ")";
  EXPECT_LT(compensated_error, plain_error);
}

TYPED_TEST(ReduceTransform, CompensatedSumBeatsPlainOnIllConditionedInput) {
  check_compensated_beats_plain<TypeParam, float>(this->rng);
  check_compensated_beats_plain<TypeParam, double>(this->rng);
}

/// Compensated results lie within two roundings of the exact sum of their
/// leaves (plus second-order terms): checked against long double sums of the
/// leaves (each leaf as the entry point forms it: converted, or a product
/// rounded once), not against a compensated reference.
template <class Out>
void expect_compensated(Out got, const long_sum& leaves, std::int64_t n) {
  const long double eps = epsilon_of<Out>;
  const int levels = std::bit_width(static_cast<std::uint64_t>(n)) + 1;
  const long double bound = 2 * eps * std::fabs(leaves.value) + levels * eps * eps * leaves.magnitude;
  EXPECT_LE(std::fabs(static_cast<long double>(got) - leaves.value), bound)
      << "compensated " << got << ", exact " << static_cast<double>(leaves.value);
}

TYPED_TEST(ReduceTransform, CompensatedWorksThroughEveryEntryPoint) {
  using S = TypeParam;
  options opts;
  opts.sum = summation::compensated;
  // Past a group (4M floats), so compensated values cross the group level too.
  const std::int64_t n = this->rng.integer(5000, 50000) + (S::on_gpu ? std::int64_t{5} << 20 : 0);
  const auto h = random_values<half>(this->rng, static_cast<std::size_t>(n));
  const auto x = random_values<float>(this->rng, static_cast<std::size_t>(n));
  const auto y = random_values<float>(this->rng, static_cast<std::size_t>(n));
  long_sum hs, xs, dots, squares;
  for (std::int64_t i = 0; i < n; ++i) {
    hs.add(convert<double>(h[i]));
    xs.add(x[i]);
    dots.add(rounded_product(x[i], y[i]));
    squares.add(rounded_product(x[i], x[i]));
  }
  expect_compensated(reduce_on<S, float>(h, 1, plus{}, opts), hs, n);
  expect_compensated(reduce_on<S, double>(x, 2, plus{}, opts), xs, n);
  expect_compensated(reduce_on<S, float>(x, 0, plus{}, opts), xs, n);
  const float dot = run_binary<S, float>(x, y, 3, [&](const float* xp, const float* yp, std::int64_t m, float* out) {
    tally::dot(S::backend(), xp, yp, m, out, opts);
  });
  expect_compensated(dot, dots, n);
  const float norm = run_unary<S, float>(x, 0, [&](const float* p, std::int64_t m, float* out) {
    tally::squared_norm(S::backend(), p, m, out, opts);
  });
  expect_compensated(norm, squares, n);
  const double value = tally::sum<double>(tally::cpu, x.data(), n, opts);
  expect_compensated(value, xs, n);
}

}  // namespace
}  // namespace tally::testing
