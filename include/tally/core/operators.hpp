// Reduction operators, each with its identity.
//
// Every operator here is associative; none is required to be commutative,
// because tally combines values in index order (see tree.hpp). Integer sums
// and products wrap modulo 2^bits (computed in the unsigned type, so signed
// overflow is defined). min and max propagate NaN; arg_min and arg_max return
// the index of the first extremum, a NaN counting as the extremum.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "tally/core/types.hpp"

namespace tally {

namespace detail {
/// a·b rounded once, never fused with a following add into an FMA: the
/// device would fuse `acc + a*b` where the host does not, and the backends
/// must agree bit for bit.
template <class T>
TALLY_HD_INLINE T multiply_rounded(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, b);
  else if constexpr (std::is_same_v<T, double>) return __dmul_rn(a, b);
  else return a * b;
#else
  return a * b;
#endif
}

/// Complex a·b with each real product rounded on its own (see multiply_rounded).
template <class T>
TALLY_HD_INLINE complex<T> complex_multiply(const complex<T>& a, const complex<T>& b) {
  return complex<T>(multiply_rounded(a.real(), b.real()) - multiply_rounded(a.imag(), b.imag()),
                    multiply_rounded(a.real(), b.imag()) + multiply_rounded(a.imag(), b.real()));
}

template <class T>
TALLY_HD_INLINE T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T>
TALLY_HD_INLINE T wrap_mul(T a, T b) {
  if constexpr (is_complex_v<T>) {
    return complex_multiply(a, b);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else if constexpr (std::is_same_v<T, std::uint16_t> || std::is_same_v<T, unsigned short>) {
    return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
  } else {
    return a * b;
  }
}
template <class T>
TALLY_HD_INLINE T largest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}
template <class T>
TALLY_HD_INLINE T smallest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
}  // namespace detail

/// a + b. Identity 0.
struct plus {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const { return detail::wrap_add(a, b); }
  template <class T>
  TALLY_HD_INLINE T identity() const { return T(0); }
};

/// a × b. Identity 1.
struct multiplies {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const { return detail::wrap_mul(a, b); }
  template <class T>
  TALLY_HD_INLINE T identity() const { return T(1); }
};

/// The smaller value; NaN if either is NaN. Identity +inf (or the type's max).
struct minimum {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const {
    static_assert(!is_complex_v<T>, "tally::minimum: complex numbers are not ordered");
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return b < a ? b : a;
  }
  template <class T>
  TALLY_HD_INLINE T identity() const { return detail::largest<T>(); }
};

/// The larger value; NaN if either is NaN. Identity -inf (or the type's lowest).
struct maximum {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const {
    static_assert(!is_complex_v<T>, "tally::maximum: complex numbers are not ordered");
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a < b ? b : a;
  }
  template <class T>
  TALLY_HD_INLINE T identity() const { return detail::smallest<T>(); }
};

/// Bitwise and, or, xor of integers. Identities ~0, 0, 0.
struct bit_and {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const { return a & b; }
  template <class T>
  TALLY_HD_INLINE T identity() const { return static_cast<T>(~T(0)); }
};
struct bit_or {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const { return a | b; }
  template <class T>
  TALLY_HD_INLINE T identity() const { return T(0); }
};
struct bit_xor {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& a, const T& b) const { return a ^ b; }
  template <class T>
  TALLY_HD_INLINE T identity() const { return T(0); }
};

/// A value with the index it came from: what arg_min and arg_max produce.
template <class T>
struct value_index {
  T value;
  std::int64_t index;
};

namespace detail {
template <class T>
TALLY_HD_INLINE auto ordering_key(const T& x) {
  if constexpr (is_low_precision_v<T>) return convert<float>(x);
  else return x;
}
// True when b should replace a as the extremum: a NaN first, then by value
// (b before a when Before says so), ties to the lower index. This is a total
// preorder, so the operator is associative and commutative.
template <bool Max, class T>
TALLY_HD_INLINE bool extremum_replaces(const value_index<T>& a, const value_index<T>& b) {
  const bool an = is_nan(a.value), bn = is_nan(b.value);
  if (an || bn) return bn && (!an || b.index < a.index);
  const auto ka = ordering_key(a.value), kb = ordering_key(b.value);
  const bool b_before = Max ? (ka < kb) : (kb < ka);
  const bool a_before = Max ? (kb < ka) : (ka < kb);
  return b_before || (!a_before && b.index < a.index);
}
}  // namespace detail

/// Index of the first minimum. Works on value_index<T> leaves, which the
/// algorithms make from each element and its index. Identity: +inf at index max.
struct arg_min {
  static constexpr bool indexed = true;
  template <class T>
  TALLY_HD_INLINE value_index<T> operator()(const value_index<T>& a, const value_index<T>& b) const {
    return detail::extremum_replaces<false>(a, b) ? b : a;
  }
  template <class V>
  TALLY_HD_INLINE V identity() const {
    using T = decltype(V::value);
    return V{convert<T>(detail::largest<decltype(detail::ordering_key(T{}))>()),
             std::numeric_limits<std::int64_t>::max()};
  }
};

/// Index of the first maximum (see arg_min).
struct arg_max {
  static constexpr bool indexed = true;
  template <class T>
  TALLY_HD_INLINE value_index<T> operator()(const value_index<T>& a, const value_index<T>& b) const {
    return detail::extremum_replaces<true>(a, b) ? b : a;
  }
  template <class V>
  TALLY_HD_INLINE V identity() const {
    using T = decltype(V::value);
    return V{convert<T>(detail::smallest<decltype(detail::ordering_key(T{}))>()),
             std::numeric_limits<std::int64_t>::max()};
  }
};

/// True for operators whose leaves carry the element's index (arg_min, arg_max).
template <class Op>
concept indexed_operator = requires { requires Op::indexed; };

/// A user operator: any associative callable (commutative or not) with its
/// identity. Make one with make_op. For the GPU backend the callable must be
/// usable on the device: a __host__ __device__ lambda or function object.
template <class F, class T>
struct custom_op {
  F f;
  T identity_value;
  template <class U>
  TALLY_HD_INLINE U operator()(const U& a, const U& b) const { return f(a, b); }
  template <class U>
  TALLY_HD_INLINE U identity() const { return identity_value; }
};

/// Wraps `f` (associative: f(f(a,b),c) == f(a,f(b,c))) and its identity
/// (f(e,x) == f(x,e) == x) into an operator tally can reduce with.
template <class F, class T>
constexpr custom_op<F, T> make_op(F f, T identity) {
  return {f, identity};
}

/// A running sum with its rounding error, for compensated summation.
template <class T>
struct compensated {
  T sum;
  T error;
};

/// Kahan–Babuška–Neumaier summation as an operator on compensated pairs: the
/// sums are added with Knuth's TwoSum, whose rounding error is exact, and the
/// errors accumulate beside them. resolve() gives sum + error, or the plain
/// sum when that is not finite (inf and NaN pass through unchanged) or when
/// the error is zero (so a sum of -0.0 values stays -0.0, as in plain
/// summation: -0.0 + 0.0 would give +0.0).
struct compensated_plus {
  template <class T>
  TALLY_HD_INLINE compensated<T> operator()(const compensated<T>& a, const compensated<T>& b) const {
    const T s = a.sum + b.sum;
    const T bb = s - a.sum;
    const T e = (a.sum - (s - bb)) + (b.sum - bb);
    return {s, (a.error + b.error) + e};
  }
  template <class V>
  TALLY_HD_INLINE V identity() const { return V{0, 0}; }
  template <class T>
  static TALLY_HD_INLINE T resolve(const compensated<T>& c) {
    return (c.sum - c.sum == T(0) && c.error != T(0)) ? c.sum + c.error : c.sum;
  }
};

}  // namespace tally
