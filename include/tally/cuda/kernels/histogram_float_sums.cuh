// Sums into half or bfloat16 outputs (index_add's single columns run as
// scatter-adds): the histogram kernels sum in a float scratch, and each
// element is then rounded once to its type. The scratch starts at -0, the
// identity of + that leaves every value's bits (x + -0 == x, also for
// x = +0), so an element no value reached is recognised and left untouched.
#pragma once

#include <cstdint>

#include "tally/core/types.hpp"

namespace tally::kernels::histogram {

/// The bits of -0.0f.
inline constexpr unsigned kNegativeZeroBits = 0x80000000u;

/// sums[0, bins) = -0.0f. Grid-stride.
template <int = 0>  // a template, so that every translation unit may hold it
__global__ void negative_zeros_kernel(float* sums, std::int64_t bins) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < bins;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    sums[k] = __uint_as_float(kNegativeZeroBits);
}

/// out[k] = V(float(out[k]) + sums[k]), rounded once, for every k whose sum
/// is not -0 (no value reached it, or only -0s did: out[k] + -0 is out[k]).
/// Grid-stride.
template <class V>
__global__ void float_sums_finish_kernel(const float* sums, std::int64_t bins, V* out) {
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < bins;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float s = sums[k];
    if (__float_as_uint(s) != kNegativeZeroBits) out[k] = ::tally::convert<V>(::tally::convert<float>(out[k]) + s);
  }
}

}  // namespace tally::kernels::histogram
