// Fixed-point sums back to floating point, rounded once (the deterministic
// modes of index_add, scatter_reduce and the weighted histograms): q·2^-s
// correctly rounded to V, and the addition of that to the output, also
// rounded once. Host and device share these definitions, so both backends
// produce the same bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tally/core/config.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

/// q as a double rounded to odd: exact when |q| < 2^53, else the 53 leading
/// bits with the last one set when any dropped bit was. A second rounding
/// to nearest of this to at most 51 bits (float, half, bfloat16) is then the
/// correct rounding of q itself (Boldo & Melquiond, "Emulation of FMA and
/// correctly rounded sums: proved algorithms using rounding to odd", 2008).
TALLY_HD_INLINE double to_double_rounded_to_odd(long long q) {
  const unsigned long long magnitude =
      q < 0 ? 0ull - static_cast<unsigned long long>(q) : static_cast<unsigned long long>(q);
  if (magnitude < (1ull << 53)) return static_cast<double>(q);
#if defined(__CUDA_ARCH__)
  const int width = 64 - __clzll(static_cast<long long>(magnitude));
#else
  const int width = 64 - __builtin_clzll(magnitude);
#endif
  const int dropped = width - 53;
  unsigned long long kept = magnitude >> dropped;
  if ((magnitude & ((1ull << dropped) - 1)) != 0) kept |= 1;
  const double d = std::ldexp(static_cast<double>(kept), dropped);  // kept < 2^53: exact
  return q < 0 ? -d : d;
}

/// q·2^-s rounded once to V (to nearest, ties to even). Exact in every case
/// but one: a double result below 2^-1022 in magnitude (subnormal) may be
/// rounded twice. s in [kMinFixedPointBits, kMaxFixedPointBits].
template <class V>
TALLY_HD_INLINE V fixed_point_to(long long q, int s) {
  if constexpr (std::is_same_v<V, double>) {
    return std::ldexp(static_cast<double>(q), -s);  // one rounding (q to 53 bits), then exact
  } else {
    // Rounded to odd, scaled exactly (a double-subnormal result is far
    // below V's smallest value and rounds to ±0 either way), rounded once more.
    const double odd = std::ldexp(to_double_rounded_to_odd(q), -s);
    if constexpr (std::is_same_v<V, float>) return static_cast<float>(odd);
    else if constexpr (std::is_same_v<V, half>) return __double2half(odd);
    else return __double2bfloat16(odd);
  }
}

/// out + delta rounded once to V. half and bfloat16 add in float: the sum
/// of two such values rounded to float and then to V is their correctly
/// rounded sum, as float's 24 bits are at least 2p + 2 for p = 11 and 8
/// (Figueroa, "When is double rounding innocuous?", 1995).
template <class V>
TALLY_HD_INLINE V add_rounded(const V& out, const V& delta) {
  if constexpr (is_low_precision_v<V>) return convert<V>(convert<float>(out) + convert<float>(delta));
  else return out + delta;
}

/// out plus the fixed-point sum q·2^-s: add_rounded(out, fixed_point_to<V>(q, s)),
/// or out itself, bit for bit, when q == 0. An element whose sum is exactly
/// zero -- no value reached it, or its values cancelled -- is left as it was
/// (-0 stays -0, a NaN keeps its payload): the GPU's scatter strategies do
/// not mark the elements they reach, so "reached" cannot be told from
/// "summed to zero", and this rule gives the same bits on every strategy
/// and backend.
template <class V>
TALLY_HD_INLINE V add_fixed_point(const V& out, long long q, int s) {
  return q == 0 ? out : add_rounded(out, fixed_point_to<V>(q, s));
}

}  // namespace tally::detail
