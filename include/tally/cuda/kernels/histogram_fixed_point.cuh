// The two small kernels around a deterministic (fixed-point) scatter-add
// whose bins do not fit one block: the largest finite |value| (to derive the
// scale on the device, no host round trip) and the conversion of the exact
// int64 sums back to floating point. (The shared_memory kernel does both
// itself, histogram_shared_memory.cuh.)
#pragma once

#include <cmath>
#include <cstdint>

#include "tally/core/fixed_point.hpp"
#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/types.hpp"
#include "tally/cuda/kernels/histogram_elements.cuh"

namespace tally::kernels::histogram {

/// Scratch words (in the workspace's zeroed bytes) of a deterministic call.
struct fixed_point_words {
  unsigned long long largest_bits;  ///< bits of max|v| as a double (ordered like the values)
  double scale;                     ///< 2^s, derived on the device
  unsigned bad;                     ///< a value outside the contract
  int bits;                         ///< the scale s, derived on the device
};

/// words->largest_bits = max over i of the bits of the finite |double(b[i])|
/// (NaN and inf are checked where their element lands in a bin, by the
/// quantisation). Grid-stride, over b's 16-byte runs (split_vectors, as the
/// scatters read their keys) and then its other elements: one element a load
/// left 2-byte values (index_add's half and bfloat16 single columns) at a
/// quarter of the bandwidth (H100, 994 M bfloat16: ~3 ms for 2 GB).
template <class B>
__global__ void largest_magnitude_kernel(const B* b, std::int64_t n, fixed_point_words* words) {
  unsigned long long largest = 0;
  const auto see = [&](const B& x) {
    const double v = std::fabs(::tally::convert<double>(x));
    if (isfinite(v)) largest = max(largest, static_cast<unsigned long long>(__double_as_longlong(v)));
  };
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const vector_split split = split_vectors(b, n);
  for (std::int64_t r = first; r < split.runs; r += step) {
    B values[kRun<B>];
    load_run(b + split.head + r * kRun<B>, values, true);
#pragma unroll
    for (int e = 0; e < kRun<B>; ++e) see(values[e]);
  }
  for (std::int64_t e = first; e < split.head + (n - split.tail); e += step) see(b[split.extra(e)]);
  // Non-negative doubles order like their bit patterns.
  for (int offset = 16; offset > 0; offset /= 2) largest = max(largest, __shfl_down_sync(0xffffffffu, largest, offset));
  if ((threadIdx.x & 31) == 0 && largest != 0) atomicMax(&words->largest_bits, largest);
}

/// One thread: words->bits = the derived scale s (derived_fixed_point_bits),
/// words->scale = 2^s, and clears largest_bits (the zeroed bytes must be left zero).
template <class Unused = void>  // a template, so the header may be included by many sources
__global__ void derive_scale_kernel(int headroom_bits, fixed_point_words* words) {
  words->bits = ::tally::detail::derived_fixed_point_bits(
      __longlong_as_double(static_cast<long long>(words->largest_bits)), headroom_bits);
  words->scale = ldexp(1.0, words->bits);
  words->largest_bits = 0;
}

/// out[k] plus sums[k]·2^-s, each rounded once (add_fixed_point: left as it
/// was where sums[k] == 0); s from *bits_on_device or `bits`.
template <class V>
__global__ void fixed_point_finish_kernel(const long long* sums, std::int64_t bins, const int* bits_on_device,
                                          int bits, V* out) {
  const int s = bits_on_device ? *bits_on_device : bits;
  for (std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; k < bins;
       k += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[k] = ::tally::detail::add_fixed_point(out[k], sums[k], s);
}

}  // namespace tally::kernels::histogram
