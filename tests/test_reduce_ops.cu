// The other operators: multiplies, the bitwise ones and a user operator that
// is not commutative (minimum/maximum and arg_min/arg_max have their own
// files). Each result equals the fixed tree bit for bit and the exact answer
// (a sequential fold where the operator is exact, a long double product
// otherwise); the empty input gives the operator's identity.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"
#include "user_operators.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceOps : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceOps, backends, backend_names);

/// Product of n values of T: odd integers (so the wrapped product never
/// collapses to zero) or reals near 1 (so it neither overflows nor vanishes).
template <class Side, class T, class Out = default_accumulator_t<T>>
void check_product(random_source& rng, std::int64_t n) {
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("product of " + type_name<T>() + " into " + type_name<Out>(), n, offset));
  std::vector<T> x;
  if constexpr (std::is_integral_v<T>) {
    x = random_values<T>(rng, static_cast<std::size_t>(n));
    for (T& v : x) v |= T(1);
  } else {
    x = random_values<T>(rng, static_cast<std::size_t>(n), 0.97, 1.03);
  }
  const Out got = reduce_on<Side, Out>(x, offset, multiplies{});
  EXPECT_PRED_FORMAT2(bitwise_equal, got, reduce_expected<Out>(x.data(), n, multiplies{}));
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<Out>;
    U exact = 1;
    for (T v : x) exact = static_cast<U>(exact * static_cast<U>(static_cast<Out>(v)));
    EXPECT_EQ(got, static_cast<Out>(exact));
  } else {
    long double exact = 1;
    for (T v : x) exact *= convert<double>(v);
    // Each of the n - 1 multiplications errs by at most eps/2 relative.
    const long double bound = (n + 1) * epsilon_of<accumulator_for_t<Out>> * std::fabs(exact);
    EXPECT_TRUE(within<Out>(convert<double>(got), exact, bound));
  }
}

TYPED_TEST(ReduceOps, MultipliesMatchesTreeAndExactProduct) {
  using S = TypeParam;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{37}, this->rng.integer(5000, 60000)}) {
    check_product<S, std::int32_t>(this->rng, n);
    check_product<S, std::int64_t>(this->rng, n);
    check_product<S, std::uint32_t>(this->rng, n);
    check_product<S, std::uint64_t>(this->rng, n);
    check_product<S, float>(this->rng, n);
    check_product<S, double>(this->rng, n);
    check_product<S, half>(this->rng, n);
    check_product<S, bfloat16, float>(this->rng, n);
  }
}

/// Sparse bits: n values of all ones (clear = true) or all zeros, with one
/// random bit flipped in a random element as many times as T has bits. Each
/// bit position is flipped about once, so the AND (OR) keeps about 37 % of
/// its bits set (clear), and the result hangs on single elements: dropping
/// or repeating the wrong one shows.
template <class T>
std::vector<T> sparse_bits(random_source& rng, std::size_t n, bool clear) {
  constexpr int kBits = 8 * sizeof(T);
  std::vector<T> x(n, clear ? static_cast<T>(~T(0)) : T(0));
  for (int k = 0; k < kBits; ++k) {
    T& v = x[static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(n) - 1))];
    v = static_cast<T>(v ^ static_cast<T>(T(1) << rng.integer(0, kBits - 1)));
  }
  return x;
}

/// bit_and, bit_or, bit_xor against the sequential fold (exact), on data
/// whose and/or are neither all ones nor zero.
template <class Side, class T>
void check_bitwise(random_source& rng, std::int64_t n) {
  const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
  SCOPED_TRACE(trace_of("bitwise of " + type_name<T>(), n, offset));
  const auto size = static_cast<std::size_t>(n);
  std::vector<T> mostly_set, mostly_clear;
  T all = 0, any = 0;
  // Redraw in the rare case the planted bits saturate (e.g. n = 1 with a repeated bit).
  do {
    mostly_set = sparse_bits<T>(rng, size, true);
    all = static_cast<T>(~T(0));
    for (T v : mostly_set) all &= v;
  } while (all == T(0) || all == static_cast<T>(~T(0)));
  do {
    mostly_clear = sparse_bits<T>(rng, size, false);
    any = 0;
    for (T v : mostly_clear) any |= v;
  } while (any == T(0) || any == static_cast<T>(~T(0)));
  const auto random = random_values<T>(rng, size);
  T parity = 0;
  for (T v : random) parity ^= v;
  EXPECT_EQ((reduce_on<Side, T>(mostly_set, offset, bit_and{})), all);
  EXPECT_EQ((reduce_on<Side, T>(mostly_clear, offset, bit_or{})), any);
  EXPECT_EQ((reduce_on<Side, T>(random, offset, bit_xor{})), parity);
}

TYPED_TEST(ReduceOps, EmptyInputGivesIdentity) {
  using S = TypeParam;
  expect_empty_gives<S, float, float>(multiplies{}, 1.0f);
  expect_empty_gives<S, std::uint64_t, std::uint64_t>(multiplies{}, std::uint64_t{1});
  expect_empty_gives<S, std::uint32_t, std::uint32_t>(bit_and{}, ~std::uint32_t{0});
  expect_empty_gives<S, std::int64_t, std::int64_t>(bit_or{}, std::int64_t{0});
  expect_empty_gives<S, std::uint64_t, std::uint64_t>(bit_xor{}, std::uint64_t{0});
}

TYPED_TEST(ReduceOps, BitwiseOperatorsMatchSequentialFold) {
  using S = TypeParam;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{32}, this->rng.integer(100, 9000), this->rng.integer(100000, 300000)}) {
    check_bitwise<S, std::int32_t>(this->rng, n);
    check_bitwise<S, std::int64_t>(this->rng, n);
    check_bitwise<S, std::uint32_t>(this->rng, n);
    check_bitwise<S, std::uint64_t>(this->rng, n);
  }
}

}  // namespace

// Outside the anonymous namespace: nvcc wants the function enclosing an
// extended lambda to be an ordinary named one.
namespace ops_tests {

/// Reduces random matrices with make_op over a __host__ __device__ lambda:
/// the result must be the product in index order.
template <class Side>
void check_lambda_operator_keeps_order(random_source& rng) {
  const auto product = make_op([] __host__ __device__(const mat2& l, const mat2& r) { return multiply(l, r); },
                               mat2_identity);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{2}, std::int64_t{1025}, rng.integer(3, 5000),
                         rng.integer(100000, 300000)}) {
    const auto offset = static_cast<std::size_t>(rng.integer(0, 3));
    SCOPED_TRACE(trace_of("2x2 matrix product", n, offset));
    const auto x = random_matrices(rng, static_cast<std::size_t>(n));
    const mat2 got = reduce_on<Side, mat2>(x, offset, product);
    EXPECT_PRED_FORMAT2(bitwise_equal, got, ordered_product(x));
    EXPECT_PRED_FORMAT2(bitwise_equal, got, reduce_expected<mat2>(x.data(), n, product));
    if (n == 1) expect_empty_gives<Side, mat2, mat2>(product, mat2_identity);
    if (n >= 2) {  // the operator really is not commutative on these inputs
      auto swapped = x;
      std::swap(swapped[0], swapped[1]);
      EXPECT_FALSE(same_bits(ordered_product(swapped), got)) << "inputs too regular to detect an order error";
    }
  }
}

}  // namespace ops_tests

namespace {

TYPED_TEST(ReduceOps, UserOperatorKeepsIndexOrder) {
  ops_tests::check_lambda_operator_keeps_order<TypeParam>(this->rng);
}

}  // namespace
}  // namespace tally::testing
