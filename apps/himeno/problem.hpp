// The Himeno benchmark's problem (RIKEN's himenoBMTxpa, as issue 9 defines
// it): the grid sizes, the fields and their initial values, and what one
// sweep counts as (floating-point operations, bytes moved).
//
// Sizes follow the issue and the fixed-size himenoBMTxps: XS is 33 x 33 x 65
// points, and p starts as i^2 / (imax-1)^2 with imax = mimax - 1. (The
// dynamic-size himenoBMTxpa.c uses 32 x 32 x 64 and divides by imax^2;
// the stencil and the 34 operations a point are the same.)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tally::himeno {

/// The relaxation factor of the original (a float there too).
inline constexpr float kOmega = 0.8f;
/// Floating-point operations the score counts per interior point and sweep.
inline constexpr double kFlopsPerPoint = 34.0;
/// The memory-traffic floor per interior point and sweep: 13 arrays read
/// once (p, a0..a3, b0..b2, c0..c2, bnd, wrk1) and one written (wrk2).
inline constexpr double kFloorBytesPerPoint = 56.0;
/// Number of coefficient arrays (a0..a3, b0..b2, c0..c2, bnd, wrk1).
inline constexpr int kCoefficients = 12;

/// Grid points along i, j and k (k contiguous in memory), boundaries included.
struct grid_size {
  int mi = 0, mj = 0, mk = 0;
  /// Points in one array.
  std::int64_t points() const { return std::int64_t{mi} * mj * mk; }
  /// Points one sweep updates: (mi-2)(mj-2)(mk-2).
  std::int64_t interior() const { return std::int64_t{mi - 2} * (mj - 2) * (mk - 2); }
  /// Operations one sweep counts: 34 per interior point.
  double flops_per_sweep() const { return kFlopsPerPoint * static_cast<double>(interior()); }
  /// The floor of bytes one sweep moves: 56 per interior point.
  double floor_bytes_per_sweep() const { return kFloorBytesPerPoint * static_cast<double>(interior()); }
  /// Bytes of the 14 arrays (p, wrk2 and the 12 coefficient arrays).
  std::int64_t field_bytes() const { return 14 * points() * static_cast<std::int64_t>(sizeof(float)); }
};

/// The named sizes XS, S, M, L, XL.
inline constexpr std::array<std::string_view, 5> kSizeNames = {"XS", "S", "M", "L", "XL"};

/// The grid of a named size (XS, S, M, L, XL; lower case accepted).
/// Throws tally::invalid_argument naming the size and the valid ones otherwise.
grid_size size_by_name(std::string_view name);

/// A grid of any shape, for tests. Pre: every extent >= 3 (one interior point).
/// Throws tally::invalid_argument otherwise.
grid_size custom_size(int mi, int mj, int mk);

/// Coefficient arrays in the order the kernels take them.
enum coefficient : int { a0, a1, a2, a3, b0, b1, b2, c0, c1, c2, bnd, wrk1 };

/// Initial value of coefficient array `c` (the same at every point).
float initial_coefficient(int c);

/// Initial p at plane i: i^2 / (imax-1)^2, rounded as the original does (float).
inline float initial_p(int i, const grid_size& g) {
  const int imax = g.mi - 1;
  return static_cast<float>(i * i) / static_cast<float>((imax - 1) * (imax - 1));
}

/// The fields on the host, each `points()` floats in [i][j][k] order.
struct host_fields {
  grid_size size;
  std::vector<float> p, wrk2;
  std::array<std::vector<float>, kCoefficients> coef;
  /// Flat index of point (i, j, k).
  std::int64_t at(int i, int j, int k) const {
    return (std::int64_t{i} * size.mj + j) * size.mk + k;
  }
};

/// Fields holding the benchmark's initial values. wrk2 starts equal to p (the
/// original starts it at 0, but never reads it outside the interior; equal
/// boundaries let the GPU swap p and wrk2 instead of copying back).
host_fields make_host_fields(const grid_size& g);

}  // namespace tally::himeno
