// A user operator that is associative but not commutative: the product of
// 2x2 matrices of uint32, wrapping modulo 2^32 (so it is exact and any
// change of order shows in the bits).
#pragma once

#include <cstdint>
#include <vector>

#include "random.hpp"
#include "tally/tally.hpp"

namespace tally::testing {

/// [[a, b], [c, d]].
struct mat2 {
  std::uint32_t a, b, c, d;
};

inline constexpr mat2 mat2_identity{1, 0, 0, 1};

/// l × r modulo 2^32 on host and device.
TALLY_HD_INLINE mat2 multiply(const mat2& l, const mat2& r) {
  return {l.a * r.a + l.b * r.c, l.a * r.b + l.b * r.d, l.c * r.a + l.d * r.c, l.c * r.b + l.d * r.d};
}

/// multiply() as a function object, for tests that need the operator's type
/// by name. (UserOperatorKeepsIndexOrder uses a __host__ __device__ lambda.)
struct matrix_multiply {
  TALLY_HD_INLINE mat2 operator()(const mat2& l, const mat2& r) const { return multiply(l, r); }
};

/// The matrix product as a tally operator.
inline custom_op<matrix_multiply, mat2> matrix_product() { return make_op(matrix_multiply{}, mat2_identity); }

/// n random matrices, invertible modulo 2^32 (a, d odd, b even: a group
/// under the product), so long products never collapse to zero and stay
/// sensitive to the order of their factors.
inline std::vector<mat2> random_matrices(random_source& rng, std::size_t n) {
  std::vector<mat2> m(n);
  for (auto& x : m) {
    const std::uint64_t r0 = rng.bits(), r1 = rng.bits();
    x = {static_cast<std::uint32_t>(r0) | 1u, static_cast<std::uint32_t>(r0 >> 32) & ~1u,
         static_cast<std::uint32_t>(r1), static_cast<std::uint32_t>(r1 >> 32) | 1u};
  }
  return m;
}

/// m[0] × m[1] × ... × m[n-1], left to right (exact: the ring is associative).
inline mat2 ordered_product(const std::vector<mat2>& m) {
  mat2 p = mat2_identity;
  for (const mat2& x : m) p = multiply(p, x);
  return p;
}

}  // namespace tally::testing
