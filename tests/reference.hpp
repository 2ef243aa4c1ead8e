// What a reduction must return, computed independently of the backends:
//
//  * tree_expected: the fixed tree evaluated by tree::reduce_reference on the
//    host, with the same sources and operators the API builds. Every backend
//    must match it bit for bit.
//  * exact and long double references (exact_sum, long_sum, ...) with error
//    bounds derived from n and epsilon: these check that the tree computes
//    the right thing at all, not only the same thing.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "tally/tally.hpp"

namespace tally::testing {

// ---------------------------------------------------------------- the tree

/// The tree's root over src's leaves, evaluated sequentially on the host.
template <class Source, class Op>
tree::maybe<typename Source::acc_type> tree_root(const Source& src, const Op& op) {
  using Acc = typename Source::acc_type;
  constexpr int V = Source::V;
  const auto fold = [&](std::int64_t j) {
    const std::int64_t first = j * V, last = std::min<std::int64_t>(first + V, src.n);
    Acc acc = src.leaf_at(first);
    for (std::int64_t i = first + 1; i < last; ++i) acc = op(acc, src.leaf_at(i));
    return acc;
  };
  return tree::reduce_reference<Acc>(tree::vector_count(src.n, V), fold, op);
}

/// The value any backend must store for `src` reduced with `op` into Out,
/// mirroring detail::dispatch_reduce (compensated summation included).
template <class Out, class Source, class Op>
Out tree_expected(const Source& src, const Op& op, const options& opts = {}) {
  using Acc = typename Source::acc_type;
  if constexpr (std::is_same_v<Op, plus> && std::is_floating_point_v<Acc>) {
    if (opts.sum == summation::compensated) {
      const compensated_source<Source> wrapped(src);
      return detail::finalize<compensated<Acc>, Out, compensated_plus>{{}}(tree_root(wrapped, compensated_plus{}));
    }
  }
  return detail::finalize<Acc, Out, Op>{op}(tree_root(src, op));
}

/// tree_expected for reduce(backend, x, n, out, op, opts) with host x.
template <class Out, class T, class Op = plus>
Out reduce_expected(const T* x, std::int64_t n, Op op = {}, const options& opts = {}) {
  if constexpr (indexed_operator<Op>) {
    return tree_expected<Out>(unary_source<T, Out, identity_transform>{x, n, {}}, op, opts);
  } else {
    return tree_expected<Out>(unary_source<T, accumulator_for_t<Out>, identity_transform>{x, n, {}}, op, opts);
  }
}

/// tree_expected for transform_reduce(backend, x, n, out, t, op, opts).
template <class Out, class T, class Transform, class Op>
Out transform_reduce_expected(const T* x, std::int64_t n, Transform t, Op op, const options& opts = {}) {
  return tree_expected<Out>(unary_source<T, accumulator_for_t<Out>, Transform>{x, n, t}, op, opts);
}

/// tree_expected for transform_reduce(backend, x, y, n, out, t, op, opts).
template <class Out, class T, class U, class Transform, class Op>
Out transform_reduce_expected(const T* x, const U* y, std::int64_t n, Transform t, Op op, const options& opts = {}) {
  return tree_expected<Out>(binary_source<T, U, accumulator_for_t<Out>, Transform>{x, y, n, t}, op, opts);
}

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

/// Σ f(x[i]) in long double, with Σ |f(x[i])| for the error bound.
struct long_sum {
  long double value = 0, magnitude = 0;
  void add(long double v) {
    value += v;
    magnitude += std::fabs(v);
  }
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
