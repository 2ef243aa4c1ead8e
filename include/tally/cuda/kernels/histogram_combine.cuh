// The second phase of the shared_memory scatter (histogram_shared_memory.cuh): after
// a grid-wide barrier, every block's private bins lie in global memory as
// one row per block; this sums the rows bin by bin and hands each bin's
// total to `finish`, which writes the output (no atomics: each bin has one
// owner thread).
//
// Work is spread so that small bin counts still use the whole grid: a warp
// covers 32/R columns of 16 bytes (V bins each) and R row groups, lane
// (g, c) summing rows g, g + R, ... of column c; the R partial sums are then
// combined by a butterfly of shuffles. R is a power of two fixed by the grid
// and the problem, so the order of combination, and hence a floating-point
// result, is the same on every run with the same grid.
#pragma once

#include <cstdint>
#include <cstring>

#include "tally/cuda/device/shuffle.cuh"

namespace tally::kernels::histogram {

/// finish(k, total) for every bin k < bins, total = op-fold over the rows of
/// partials[row · stride + k] (row < rows), each converted to Acc.
/// Pre: called by every thread of the grid, after a grid-wide barrier that
/// orders the rows' writes before it; stride is a multiple of V = 16 /
/// sizeof(S) and partials is 16-byte aligned.
template <class S, class Acc, class Op, class Finish>
__device__ __forceinline__ void combine_rows(const S* partials, int rows, std::int64_t stride, std::int64_t bins,
                                             Acc identity, const Op& op, const Finish& finish) {
  static_assert(16 % sizeof(S) == 0, "rows are read 16 bytes at a time");
  constexpr int V = static_cast<int>(16 / sizeof(S));
  const std::int64_t columns = stride / V;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  int R = 1;  // row groups per column: enough to keep every thread busy
  while (R < 32 && R * 2 <= rows && columns * R * 2 <= threads) R *= 2;
  const int width = 32 / R;  // columns per warp
  const int lane = threadIdx.x & 31;
  const int g = lane / width;
  const int c = lane % width;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t warps = threads >> 5;
  for (std::int64_t first = warp * width; first < columns; first += warps * width) {  // warp-uniform
    const std::int64_t column = first + c;
    Acc total[V];
#pragma unroll
    for (int j = 0; j < V; ++j) total[j] = identity;
    if (column < columns) {
      const S* p = partials + column * V;
#pragma unroll 4
      for (int row = g; row < rows; row += R) {
        // L2 loads (.cg): the rows were written by other SMs in this kernel.
        const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(p + row * stride));
        S s[V];
        std::memcpy(s, &raw, sizeof(s));
#pragma unroll
        for (int j = 0; j < V; ++j) total[j] = op(total[j], static_cast<Acc>(s[j]));
      }
    }
    for (int offset = width; offset < 32; offset *= 2)
#pragma unroll
      for (int j = 0; j < V; ++j) total[j] = op(total[j], device::shuffle_xor(total[j], offset));
    if (column < columns && g == 0)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const std::int64_t k = column * V + j;
        if (k < bins) finish(k, total[j]);
      }
  }
}

}  // namespace tally::kernels::histogram
