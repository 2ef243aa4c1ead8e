// Element types tally reduces, and the traits the algorithms ask of them.
//
// half and bfloat16 are CUDA's own types (usable on the host too); complex
// numbers are libcu++'s cuda::std::complex, which works on both sides.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include <cuda/std/complex>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tally/core/config.hpp"

namespace tally {

using half = __half;
using bfloat16 = __nv_bfloat16;
template <class T>
using complex = cuda::std::complex<T>;

template <class T>
struct is_complex : std::false_type {};
template <class T>
struct is_complex<cuda::std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_complex_v = is_complex<std::remove_cv_t<T>>::value;

/// half and bfloat16: stored narrow, always accumulated in float.
template <class T>
inline constexpr bool is_low_precision_v =
    std::is_same_v<std::remove_cv_t<T>, half> || std::is_same_v<std::remove_cv_t<T>, bfloat16>;

/// Real floating-point types, narrow ones included.
template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_low_precision_v<T>;

/// The accumulator used when the caller does not name one: float for half and
/// bfloat16, the input type otherwise.
template <class T>
using default_accumulator_t = std::conditional_t<is_low_precision_v<T>, float, std::remove_cv_t<T>>;

/// Converts between element and accumulator types, through float for the
/// narrow types (whose own conversions are not constexpr on every side).
template <class To, class From>
TALLY_HD_INLINE To convert(const From& x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<From, half>) {
    return convert<To>(__half2float(x));
  } else if constexpr (std::is_same_v<From, bfloat16>) {
    return convert<To>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<To, half>) {
    return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// NaN test that also compiles for integers (always false) and complex
/// numbers (either part NaN).
template <class T>
TALLY_HD_INLINE bool is_nan(const T& x) {
  if constexpr (is_complex_v<T>) {
    return is_nan(x.real()) || is_nan(x.imag());
  } else if constexpr (is_low_precision_v<T>) {
    return is_nan(convert<float>(x));
  } else if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

}  // namespace tally
