// One point of the Jacobi sweep, written once for the CPU and the GPU.
//
// The operations run in the original C's order (left to right), each rounded
// on its own: on the device through __fmul_rn/__fadd_rn/__fsub_rn, which nvcc
// never fuses into FMAs, on the host under -ffp-contract=off (set by the
// tally target). So the GPU sweep gives the same bits as the original loop.
#pragma once

#include "tally/core/config.hpp"

namespace tally::himeno {

namespace rounded {
TALLY_HD_INLINE float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TALLY_HD_INLINE float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TALLY_HD_INLINE float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
}  // namespace rounded

/// p around a point (i, j, k): named by offset, e.g. ip1_jm1 = p[i+1][j-1][k].
struct neighbourhood {
  float centre;
  float ip1, jp1, kp1, im1, jm1, km1;
  float ip1_jp1, ip1_jm1, im1_jp1, im1_jm1;  // b0's term
  float jp1_kp1, jm1_kp1, jp1_km1, jm1_km1;  // b1's term
  float ip1_kp1, im1_kp1, ip1_km1, im1_km1;  // b2's term
};

/// The coefficients at a point, in the order of himeno::coefficient.
struct point_coefficients {
  float a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1;
};

/// ss and the relaxed value at one point.
struct relaxed {
  float ss;    ///< (s0·a3 − p)·bnd; the point adds ss² to gosa
  float next;  ///< p + omega·ss, the point's value in wrk2
};

/// The original's update of one interior point.
TALLY_HD_INLINE relaxed relax(const point_coefficients& c, const neighbourhood& p, float omega) {
  using namespace rounded;
  float s0 = mul(c.a0, p.ip1);
  s0 = add(s0, mul(c.a1, p.jp1));
  s0 = add(s0, mul(c.a2, p.kp1));
  s0 = add(s0, mul(c.b0, add(sub(sub(p.ip1_jp1, p.ip1_jm1), p.im1_jp1), p.im1_jm1)));
  s0 = add(s0, mul(c.b1, add(sub(sub(p.jp1_kp1, p.jm1_kp1), p.jp1_km1), p.jm1_km1)));
  s0 = add(s0, mul(c.b2, add(sub(sub(p.ip1_kp1, p.im1_kp1), p.ip1_km1), p.im1_km1)));
  s0 = add(s0, mul(c.c0, p.im1));
  s0 = add(s0, mul(c.c1, p.jm1));
  s0 = add(s0, mul(c.c2, p.km1));
  s0 = add(s0, c.wrk1);
  const float ss = mul(sub(mul(s0, c.a3), p.centre), c.bnd);
  return {ss, add(p.centre, mul(omega, ss))};
}

/// ss², rounded on its own.
TALLY_HD_INLINE float square(float ss) { return rounded::mul(ss, ss); }

}  // namespace tally::himeno
