// What a reduction must return, computed independently of the backends:
//
//  * tree_expected: the fixed tree (the order core/tree.hpp defines) evaluated
//    here on the host, written anew: no tally code but the operator under test
//    and convert<>. Every backend must match it bit for bit.
//  * exact and long double references (exact_sum, long_sum, ...) with error
//    bounds derived from n and epsilon: these check that the tree computes
//    the right thing at all, not only the same thing.
//
// Compensated sums have no bitwise reference here (it would have to repeat
// the library's compensated_plus): tests check them against long double or
// exact sums with a bound a lost tile exceeds.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "tally/tally.hpp"

namespace tally::testing {

// ---------------------------------------------------------------- the tree

/// The tree over leaves leaf(0..n): vectors of V consecutive leaves folded
/// left to right, then node(h+1, k) = node(h, 2k) ⊕ node(h, 2k+1) over the
/// vectors padded with empty ones to a power of two. Empty for n = 0.
/// Subtrees of the top `parallel_levels` levels are evaluated in parallel
/// (OpenMP) for the huge tests; the result does not depend on it.
template <class Acc, class Leaf, class Op>
std::optional<Acc> tree_of(std::int64_t n, int v, const Leaf& leaf, const Op& op, int parallel_levels = 0) {
  const std::int64_t vectors = (n + v - 1) / v;
  if (vectors <= 0) return std::nullopt;
  const auto both = [&](const std::optional<Acc>& a, const std::optional<Acc>& b) -> std::optional<Acc> {
    if (a && b) return op(*a, *b);
    return a ? a : b;
  };
  // node over vectors [first, first + size), size a power of two.
  const auto node = [&](const auto& self, std::int64_t first, std::int64_t size) -> std::optional<Acc> {
    if (first >= vectors) return std::nullopt;
    if (size == 1) {
      const std::int64_t i0 = first * v, end = std::min<std::int64_t>(i0 + v, n);
      Acc acc = leaf(i0);
      for (std::int64_t i = i0 + 1; i < end; ++i) acc = op(acc, leaf(i));
      return acc;
    }
    return both(self(self, first, size / 2), self(self, first + size / 2, size / 2));
  };
  std::int64_t padded = 1;
  while (padded < vectors) padded *= 2;
  const std::int64_t parts = std::min<std::int64_t>(std::int64_t{1} << parallel_levels, padded);
  std::vector<std::optional<Acc>> part(static_cast<std::size_t>(parts));
  const std::int64_t size = padded / parts;
#pragma omp parallel for schedule(dynamic, 1) if (parts > 1)
  for (std::int64_t p = 0; p < parts; ++p) part[static_cast<std::size_t>(p)] = node(node, p * size, size);
  for (std::int64_t width = 1; width < parts; width *= 2)
    for (std::int64_t p = 0; p + width < parts; p += 2 * width)
      part[static_cast<std::size_t>(p)] = both(part[static_cast<std::size_t>(p)], part[static_cast<std::size_t>(p + width)]);
  return part[0];
}

/// The accumulator's value stored into Out: the root, or the operator's
/// identity for an empty input.
template <class Out, class Acc, class Op>
Out finish(const std::optional<Acc>& root, const Op& op) {
  if constexpr (requires { Acc::index; }) return root ? *root : op.template identity<Acc>();
  else return convert<Out>(root ? *root : op.template identity<Acc>());
}

/// What reduce(backend, x, n, out, op) must store (plain summation).
template <class Out, class T, class Op = plus>
Out reduce_expected(const T* x, std::int64_t n, Op op = {}) {
  using Acc = accumulator_for_t<Out>;
  const auto leaf = [&](std::int64_t i) -> Acc {
    if constexpr (requires { Acc::index; }) return Acc{convert<decltype(Acc::value)>(x[i]), i};
    else return convert<Acc>(x[i]);
  };
  return finish<Out>(tree_of<Acc>(n, tree::vector_width<T>, leaf, op), op);
}

/// What transform_reduce(backend, x, n, out, t, op) must store.
template <class Out, class T, class Transform, class Op>
Out transform_reduce_expected(const T* x, std::int64_t n, Transform t, Op op) {
  using Acc = accumulator_for_t<Out>;
  const auto leaf = [&](std::int64_t i) -> Acc { return convert<Acc>(t(x[i])); };
  return finish<Out>(tree_of<Acc>(n, tree::vector_width<T>, leaf, op), op);
}

/// What transform_reduce(backend, x, y, n, out, t, op) must store.
template <class Out, class T, class U, class Transform, class Op>
Out transform_reduce_expected(const T* x, const U* y, std::int64_t n, Transform t, Op op) {
  using Acc = accumulator_for_t<Out>;
  const auto leaf = [&](std::int64_t i) -> Acc { return convert<Acc>(t(x[i], y[i])); };
  return finish<Out>(tree_of<Acc>(n, tree::vector_width<T, U>, leaf, op), op);
}

/// The product x·y as dot forms it: rounded once to the product type (float
/// for half, bfloat16 and float; double for double), written out here.
template <class T, class U>
auto rounded_product(const T& a, const U& b) {
  if constexpr (is_complex_v<T>) {
    using R = typename T::value_type;
    volatile R rr = a.real() * b.real(), ii = a.imag() * b.imag(), ri = a.real() * b.imag(), ir = a.imag() * b.real();
    return T(rr - ii, ri + ir);
  } else if constexpr (std::is_same_v<T, double> || std::is_same_v<U, double>) {
    volatile double p = convert<double>(a) * convert<double>(b);
    return static_cast<double>(p);
  } else {
    volatile float p = convert<float>(a) * convert<float>(b);
    return static_cast<float>(p);
  }
}

/// rounded_product as a transform (the reference for dot).
struct reference_product {
  template <class T, class U>
  auto operator()(const T& a, const U& b) const { return rounded_product(a, b); }
};

/// |x|² as squared_norm forms it (products rounded, complex parts summed).
struct reference_square {
  template <class T>
  auto operator()(const T& a) const {
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      volatile R re = a.real() * a.real(), im = a.imag() * a.imag();
      return static_cast<R>(re + im);
    } else {
      return rounded_product(a, a);
    }
  }
};

// ---------------------------------------------------------------- names

/// A readable name of an element type, for traces.
template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, half>) return "half";
  else if constexpr (std::is_same_v<T, bfloat16>) return "bfloat16";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  else if constexpr (is_complex_v<T>) return "complex<" + type_name<typename T::value_type>() + ">";
  else if constexpr (requires { T::index; }) return "value_index<" + type_name<decltype(T::value)>() + ">";
  else return std::to_string(sizeof(T)) + "-byte struct";
}

// ---------------------------------------------------------- bit equality

/// The bits of a value as text, for failure messages.
template <class T>
std::string bits_of(const T& v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  static const char* hex = "0123456789abcdef";
  std::string s = "0x";
  for (std::size_t i = sizeof(T); i-- > 0;) s += {hex[b[i] >> 4], hex[b[i] & 15]};
  return s;
}

/// Bitwise equality that skips padding (value_index) and compares complex
/// parts separately.
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (requires { a.index; }) {
    return same_bits(a.value, b.value) && a.index == b.index;
  } else if constexpr (is_complex_v<T>) {
    return same_bits(a.real(), b.real()) && same_bits(a.imag(), b.imag());
  } else {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  }
}

/// Printable form of a result: value and bits.
template <class T>
std::string describe(const T& v) {
  if constexpr (requires { v.index; }) {
    return "{" + describe(v.value) + ", index " + std::to_string(v.index) + "}";
  } else if constexpr (is_complex_v<T>) {
    return "(" + describe(v.real()) + ", " + describe(v.imag()) + ")";
  } else if constexpr (is_floating_v<T>) {
    return std::to_string(convert<double>(v)) + " [" + bits_of(v) + "]";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    return bits_of(v);
  }
}

// gtest assertion: EXPECT_PRED_FORMAT2(tally::testing::bitwise_equal, a, b).
template <class T>
::testing::AssertionResult bitwise_equal(const char* a_text, const char* b_text, const T& a, const T& b) {
  if (same_bits(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a_text << " = " << describe(a) << " and " << b_text << " = " << describe(b)
                                       << " differ in their bits";
}

// ------------------------------------------------ higher-precision checks

/// Σ x exactly, wrapped modulo 2^bits of Out like tally's integer sums.
template <class Out, class T>
Out exact_sum(const std::vector<T>& x, std::size_t first = 0) {
  std::uint64_t s = 0;
  for (std::size_t i = first; i < x.size(); ++i) s += static_cast<std::uint64_t>(static_cast<Out>(x[i]));
  return static_cast<Out>(s);
}

/// Σ f(x[i]) in long double, compensated (Neumaier: the rounding error of
/// each addition kept in a second long double), so the reference itself errs
/// by far less than the bounds it checks even over 2^31 terms; with Σ |f(x[i])|
/// for the error bound.
struct long_sum {
  long double value = 0, magnitude = 0;
  void add(long double v) {
    const long double t = high_ + v;
    low_ += std::fabs(high_) >= std::fabs(v) ? (high_ - t) + v : (v - t) + high_;
    high_ = t;
    value = high_ + low_;
    magnitude += std::fabs(v);
  }

 private:
  long double high_ = 0, low_ = 0;
};

/// Bound on |tree sum - exact sum| with accumulator epsilon `eps` over n
/// leaves in vectors of V: each leaf passes through at most V - 1 fold
/// additions and ceil(log2(vectors)) tree additions, each erring by at most
/// eps times the magnitude of everything below it.
inline long double sum_bound(std::int64_t n, int v, long double eps, long double magnitude) {
  const std::int64_t vectors = tree::vector_count(n, v);
  const int depth = vectors > 1 ? std::bit_width(static_cast<std::uint64_t>(vectors - 1)) : 0;
  return (v - 1 + depth + 1) * eps * magnitude * 1.01L;
}

template <class T>
inline constexpr long double epsilon_of = std::numeric_limits<T>::epsilon();
template <>
inline constexpr long double epsilon_of<half> = 0x1p-10L;
template <>
inline constexpr long double epsilon_of<bfloat16> = 0x1p-7L;

/// |computed - expected| <= bound + half an ulp of Out (the final rounding).
template <class Out>
::testing::AssertionResult within(long double computed, long double expected, long double bound) {
  const long double rounding = std::is_integral_v<Out> ? 0 : epsilon_of<Out> * std::fabs(expected);
  if (std::fabs(computed - expected) <= bound + rounding) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "computed " << static_cast<double>(computed) << " but the exact value is "
                                       << static_cast<double>(expected) << ": error "
                                       << static_cast<double>(std::fabs(computed - expected)) << " exceeds the bound "
                                       << static_cast<double>(bound + rounding);
}

}  // namespace tally::testing
