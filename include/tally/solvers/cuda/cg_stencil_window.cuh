// The matrix-free search's reads, staged in shared memory. A stencil row
// reads the new search direction w = z + β·p at up to 27 neighbours; read
// from global memory, a chunk's rows fetched each neighbour line from L2
// (their y ± 1 and z ± 1 lines are other chunks' rows) and recomputed every
// w nine times: ncu put the graph-mode search at 203 µs an iteration at
// g = 200, f32, latency-bound on L2 hits with 29 % of DRAM bandwidth and
// spilling registers. So a block first computes w once for every row its
// chunk reads, into shared memory, with coalesced loads, and the rows then
// read their neighbours from there. The values are the same (w is computed
// as detail::direction computes it), so the bits are.
//
// A chunk of R consecutive rows from `first` reads, in each of the planes
// z − 1, z, z + 1, the rows from first − g − 1 to first + R + g of that
// plane: three segments of R + 2g + 2 rows, the middle one starting at
// `start` = first − g − 1 and the others one plane (g² rows) before and after
// it. Where g² is smaller than a segment, the segments overlap; each still
// holds w of every row in its range.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tally/solvers/cuda/cg_tree.cuh"
#include "tally/solvers/detail/cg_rows.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::solvers::kernels {

/// Rows a chunk of `chunk_rows` rows reads in each plane of a g-wide grid.
constexpr std::int64_t stencil_segment_rows(std::int64_t g, std::int64_t chunk_rows) { return chunk_rows + 2 * g + 2; }

/// Shared memory the staged search of a chunk of `chunk_rows` rows needs.
template <class T>
constexpr std::size_t stencil_window_bytes(std::int64_t g, std::int64_t chunk_rows) {
  return static_cast<std::size_t>(3 * stencil_segment_rows(g, chunk_rows)) * sizeof(T);
}

/// The new directions of the rows one chunk reads, in shared memory.
template <class T>
struct stencil_window {
  const T* values;      ///< three segments of `length` values
  std::int64_t start;   ///< the middle segment's first row: first − g − 1
  std::int64_t plane;   ///< g²
  std::int64_t g;
  int length;           ///< stencil_segment_rows(g, R)

  /// w at row j. Pre: j is a neighbour of a row of the chunk, inside the grid.
  __device__ __forceinline__ T operator()(std::int64_t j) const {
    const int k = j < start ? 0 : (j < start + plane ? 1 : 2);
    return values[k * length + static_cast<int>(j - start - (k - 1) * plane)];
  }

  /// Σ a(i, j)·w(j) over row i's stencil, as stencil_operator::row_product
  /// sums it (the same bits). A 27-point row whose y and z neighbours are in
  /// the grid reads its nine lines at fixed distances in the window, through
  /// inner_line; other rows take the operator's general loop.
  template <class Value>
  __device__ __forceinline__ T product(const stencil_operator<Value>& a, std::int64_t i) const {
    std::int64_t x, y, z;
    a.coordinates(i, x, y, z);
    if (a.points != 27 || y == 0 || y + 1 == a.g || z == 0 || z + 1 == a.g) return a.template row_product<T>(i, *this);
    const bool left = x > 0, right = x + 1 < a.g;
    const int mid = static_cast<int>(i - start);  // row i in the middle segment
    const int row_step = static_cast<int>(g);
    T acc(0);
#pragma unroll
    for (int line = 0; line < 9; ++line) {
      // Line (dz, dy) = (line / 3 − 1, line % 3 − 1): row i + dz·g² + dy·g,
      // found in segment dz + 1 at mid + dy·g. Its x ± 1 neighbours are in
      // the window too (a segment reaches one row past either end), read
      // whether or not inner_line uses them.
      const int m = (line / 3) * length + mid + (line % 3 - 1) * row_step;
      acc = a.inner_line(acc, line, left, right, values[m - 1], values[m], values[m + 1]);
    }
    return acc;
  }
};

/// Computes w = z + β·p (p from buffer `from`) for every row the chunk of
/// `chunk_rows` rows from `first` reads into `memory` (stencil_window_bytes
/// of shared memory) and returns the window; zero outside the grid (never
/// read). Pre: the whole block calls it; no thread still reads the memory.
/// Post: the block is synchronised, the window complete.
template <class T, class Value, class Fresh>
__device__ stencil_window<T> stage_stencil_window(const stencil_operator<Value>& a, const detail::cg_vectors<T>& v,
                                                  const T* from, T beta, std::int64_t first, std::int64_t chunk_rows,
                                                  unsigned char* memory, const Fresh& fresh) {
  T* values = reinterpret_cast<T*>(memory);
  const stencil_window<T> window{values, first - a.g - 1, a.g * a.g, a.g,
                                 static_cast<int>(stencil_segment_rows(a.g, chunk_rows))};
  __syncthreads();
  // A thread loads a batch of values, all three segments' at each offset,
  // before it stores any: the loads are then in flight together (stores to
  // memory the compiler cannot prove apart from the vectors would otherwise
  // order each load after the previous store: one round trip a value).
  constexpr int kBatch = 4;
  for (int t0 = threadIdx.x; t0 < window.length; t0 += kBatch * kThreads) {
    T w[kBatch][3];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const int t = t0 + u * kThreads;
        const std::int64_t j = window.start + (k - 1) * window.plane + t;
        w[u][k] = (t < window.length && j >= 0 && j < v.n) ? detail::direction(v, from, j, beta, fresh) : T(0);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int t = t0 + u * kThreads;
      if (t < window.length) {
#pragma unroll
        for (int k = 0; k < 3; ++k) values[k * window.length + t] = w[u][k];
      }
    }
  }
  __syncthreads();
  return window;
}

}  // namespace tally::solvers::kernels
