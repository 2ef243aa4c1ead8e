// Fixed-point values for deterministic scatter-adds
// (histogram_options::deterministic): each value v becomes the int64
// q = round(v·2^s), the q are summed exactly, and a bin's sum is scaled back
// by 2^-s once. Host and device share these definitions, so both backends
// pick the same scale and round the same way.
#pragma once

#include <cmath>
#include <cstdint>

#include "tally/core/config.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

/// 62 - ceil(log2 n): the largest |q| (as a power of two) that n values may
/// each reach without their sum overflowing an int64.
/// A plain loop, not std::countl_zero/bit_width: with nvcc 13 and
/// libstdc++ 12 those fold to constants in device code (bit_width(n) == 0),
/// and this function is also evaluated on the device.
constexpr int fixed_point_headroom_bits(std::int64_t n) {
  int log2n = 0;  // ceil(log2 n)
  while (log2n < 63 && (std::int64_t(1) << log2n) < n) ++log2n;
  return 62 - log2n;
}

/// Scales s for which 2^s is a normal double: v·2^s is then one correctly
/// rounded multiplication (the same on every backend and compiler).
inline constexpr int kMinFixedPointBits = -1022;
inline constexpr int kMaxFixedPointBits = 1023;

/// The derived scale for values whose largest finite magnitude is `largest`
/// (0 when there is none): s = headroom_bits - 1 - e, e = ilogb(largest), so
/// that every |v|·2^s < 2^headroom_bits; kept within [kMinFixedPointBits,
/// kMaxFixedPointBits] (only data below ~2^-985 lose precision to that bound).
/// headroom_bits = fixed_point_headroom_bits(n), computed on the host (see there).
TALLY_HD_INLINE int derived_fixed_point_bits(double largest, int headroom_bits) {
  if (!(largest > 0)) return 0;
  const int s = headroom_bits - 1 - ilogb(largest);
  return s < kMinFixedPointBits ? kMinFixedPointBits : (s > kMaxFixedPointBits ? kMaxFixedPointBits : s);
}

/// Values rounded to int64 fixed point q = round(v·2^s), with the
/// multiplier 2^s computed once per call (not per value: the quantisation
/// runs once per element and must stay cheaper than the loads). A value
/// whose |q| would reach `limit` = 2^limit_bits (or NaN/inf) gives 0 and
/// raises *bad.
struct fixed_point_value {
  using type = long long;
  double scale;                   ///< 2^s, when scale_on_device is null
  const double* scale_on_device;  ///< 2^s computed on the device (derived scale)
  double limit;                   ///< 2^limit_bits
  unsigned* bad;                  ///< set to 1 on a value outside the contract

  /// The value for scale s (in [kMinFixedPointBits, kMaxFixedPointBits]),
  /// `limit_bits` = fixed_point_headroom_bits(n).
  static fixed_point_value with_bits(int s, int limit_bits, unsigned* bad) {
    return {std::ldexp(1.0, s), nullptr, std::ldexp(1.0, limit_bits), bad};
  }

  template <class B>
  TALLY_HD_INLINE long long operator()(const B& b) const {
    const double scaled = convert<double>(b) * (scale_on_device ? *scale_on_device : scale);
    if (!(scaled > -limit && scaled < limit)) {
#if defined(__CUDA_ARCH__)
      atomicOr(bad, 1u);
#else
      __atomic_fetch_or(bad, 1u, __ATOMIC_RELAXED);
#endif
      return 0;
    }
    return static_cast<long long>(std::nearbyint(scaled));
  }
};

}  // namespace tally::detail
