// The matrix-free search's reads, staged in shared memory. A stencil row
// reads the new search direction w = z + β·p at up to 27 neighbours; read
// from global memory, a chunk's rows fetched each neighbour line from L2
// (their y ± 1 and z ± 1 lines are other chunks' rows) and recomputed every
// w nine times: ncu put the graph-mode search at 203 µs an iteration at
// g = 200, f32, latency-bound on L2 hits with 29 % of DRAM bandwidth and
// spilling registers. So a block first computes w once for every row its
// chunk reads, into shared memory, with coalesced loads, and the rows then
// read their neighbours from there. The values are the same (w is computed
// as phases::direction_at computes it), so the bits are.
//
// A chunk of R consecutive rows from `first` reads, in each of the planes
// z − 1, z, z + 1, the rows from first − g − 1 to first + R + g of that
// plane. The window holds three segments of `length` rows each, the middle
// one from `start` = first − margin (margin >= g + 1) and the others one
// plane (g² rows) before and after it. Where g² is smaller than a segment the
// segments overlap; each still holds w of every row in its range.
//
// When g is a multiple of the vector width V (the whole-vector case), every
// row vector's lines start on a vector of the window: margin and length are
// multiples of 4, as are first, g², and n = g³. The window is then staged,
// and a lane's V rows read, a vector at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tally/cuda/device/vector_load.cuh"
#include "tally/solvers/cuda/cg_tree.cuh"
#include "tally/solvers/detail/cg_rows.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::solvers::kernels {

/// The window's memory: the block's dynamic shared memory. Read through this
/// symbol rather than a pointer kept in a struct, so that the compiler sees
/// shared memory (the persistent kernel's reads became generic loads).
extern __shared__ __align__(16) unsigned char cg_window_memory[];

/// Rows of a segment before the chunk's first: g + 1, rounded up to 4.
constexpr std::int64_t stencil_margin(std::int64_t g) { return (g + 1 + 3) / 4 * 4; }

/// Rows of each of a window's three segments, for chunks of `chunk_rows`
/// rows: from first − margin to first + chunk_rows + g, rounded up to 4.
constexpr std::int64_t stencil_segment_rows(std::int64_t g, std::int64_t chunk_rows) {
  return (stencil_margin(g) + chunk_rows + g + 1 + 3) / 4 * 4;
}

/// Shared memory the staged search of a chunk of `chunk_rows` rows needs.
template <class T>
constexpr std::size_t stencil_window_bytes(std::int64_t g, std::int64_t chunk_rows) {
  return static_cast<std::size_t>(3 * stencil_segment_rows(g, chunk_rows)) * sizeof(T);
}

/// The new directions of the rows one chunk reads, in shared memory: three
/// segments of `length` values.
template <class T>
struct stencil_window {
  /// Rows a lane reads at once in the whole-vector case: the tree's vector.
  static constexpr int V = tree::vector_width<T>;

  std::int64_t start;  ///< the middle segment's first row: first − margin
  std::int64_t plane;  ///< g²
  int length;          ///< stencil_segment_rows(g, R)
  int row_step;        ///< g

  __device__ __forceinline__ static const T* values() { return reinterpret_cast<const T*>(cg_window_memory); }

  /// w at row j. Pre: j is a neighbour of a row of the chunk, inside the grid.
  __device__ __forceinline__ T operator()(std::int64_t j) const {
    const int k = j < start ? 0 : (j < start + plane ? 1 : 2);
    return values()[k * length + static_cast<int>(j - start - (k - 1) * plane)];
  }

  /// Where line `line` (dz = line / 3 − 1, dy = line % 3 − 1) of row i is:
  /// row i + dz·g² + dy·g, in segment dz + 1. A segment reaches at least one
  /// row past either end of the lines its chunk reads, so m − 1 and m + 1 are
  /// in the window too.
  __device__ __forceinline__ int line_index(std::int64_t i, int line) const {
    return (line / 3) * length + static_cast<int>(i - start) + (line % 3 - 1) * row_step;
  }

  /// Σ a(i, j)·w(j) over row i's stencil, as stencil_operator::row_product
  /// sums it (the same bits). A 27-point row reads its lines inside the grid
  /// at fixed distances in the window, through add_line, as lines_row does;
  /// a 7-point row takes the operator's loop.
  template <class Value>
  __device__ __forceinline__ T product(const stencil_operator<Value>& a, std::int64_t i) const {
    std::int64_t x, y, z;
    a.coordinates(i, x, y, z);
    if (a.points != 27) return a.template row_product<T>(i, *this);
    const bool left = x > 0, right = x + 1 < a.g;
    const auto lines = a.lines_inside(y, z);
    T acc = a.template sum_start<T>();
#pragma unroll
    for (int line = 0; line < 9; ++line) {
      // Every line is in the window (see line_products); the x ± 1 values are
      // read whether or not add_line uses them, and a line outside the grid
      // is not added.
      const int m = line_index(i, line);
      const T sum = a.add_line(acc, line, left, right, values()[m - 1], values()[m], values()[m + 1]);
      acc = lines(line) ? sum : acc;
    }
    return acc;
  }

  /// product() of the V rows from i0 into `ap`, and w of those rows into `p`,
  /// for 27-point rows; false (nothing written) for 7-point ones. Pre: the
  /// whole-vector case (g a multiple of V), i0 a multiple of V: the V rows
  /// share a grid line, and each line's V values are one aligned vector of
  /// the window (every line is, outside the grid too: a segment reaches one
  /// row past the lines its chunk reads). The same add_line calls as
  /// product(), so the same bits.
  template <class Value>
  __device__ __forceinline__ bool line_products(const stencil_operator<Value>& a, std::int64_t i0,
                                                device::vector_of<T, V>& p, device::vector_of<T, V>& ap) const {
    if (a.points != 27) return false;
    std::int64_t x0, y, z;
    a.coordinates(i0, x0, y, z);
    const bool left = x0 > 0, right = x0 + V < a.g;
    const auto lines = a.lines_inside(y, z);
#pragma unroll
    for (int k = 0; k < V; ++k) ap.v[k] = a.template sum_start<T>();
#pragma unroll
    for (int line = 0; line < 9; ++line) {
      const int m = line_index(i0, line);
      const auto mid = device::load_vector<T, V, true, false>(values() + m);
      T w[V + 2];  // x0 − 1 .. x0 + V on this line
      w[0] = values()[m - 1];
#pragma unroll
      for (int k = 0; k < V; ++k) w[k + 1] = mid.v[k];
      w[V + 1] = values()[m + V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const T sum = a.add_line(ap.v[k], line, k > 0 || left, k + 1 < V || right, w[k], w[k + 1], w[k + 2]);
        ap.v[k] = lines(line) ? sum : ap.v[k];
      }
      if (line == 4) p = mid;
    }
    return true;
  }
};

/// Computes w = z + β·p (p from buffer `from`, z = dinv·r: the stencil's
/// update stores no z, see phases::direction_at) for every row the chunk of
/// `chunk_rows` rows from `first` reads into the block's dynamic shared
/// memory (stencil_window_bytes of it) and returns the window; zero outside
/// the grid (never read). r and p are read through the read-only path: for
/// the graph mode, whose kernels do not change them while they run. Pre: the
/// whole block calls it; no thread still reads the memory. Post: the block
/// is synchronised, the window complete.
template <class T, class Value>
__device__ stencil_window<T> stage_stencil_window(const stencil_operator<Value>& a, const detail::cg_vectors<T>& v,
                                                  const T* from, T beta, T dinv, std::int64_t first,
                                                  std::int64_t chunk_rows) {
  T* values = reinterpret_cast<T*>(cg_window_memory);
  const stencil_window<T> window{first - stencil_margin(a.g), a.g * a.g,
                                 static_cast<int>(stencil_segment_rows(a.g, chunk_rows)), static_cast<int>(a.g)};
  constexpr int V = stencil_window<T>::V;
  __syncthreads();
  // A thread loads all three segments' values at an offset (a batch of
  // offsets, for single values) before it stores any: the loads are then in
  // flight together (stores to memory the compiler cannot prove apart from
  // the vectors would otherwise order each load after the previous store:
  // one round trip a value). Six 16-byte loads a thread are enough in flight
  // for DRAM; more vectors a batch spilled registers.
  if (a.g % V == 0) {  // block-uniform; whole vectors, each inside the grid or outside it
    using vec = device::vector_of<T, V>;
    const int vectors = window.length / V;
    for (int t = threadIdx.x; t < vectors; t += kThreads) {
      vec w[3];
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        const std::int64_t j = window.start + (k - 1) * window.plane + static_cast<std::int64_t>(t) * V;
        if (j >= 0 && j < v.n) {
          const vec r = device::load_vector<T, V, true>(v.r + j);
          const vec p = device::load_vector<T, V, true>(from + j);
#pragma unroll
          for (int e = 0; e < V; ++e)
            w[k].v[e] = detail::stencil_direction_value(dinv, r.v[e], p.v[e], beta);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) w[k].v[e] = T(0);
        }
      }
#pragma unroll
      for (int k = 0; k < 3; ++k) device::store_vector<T, V, true>(values + k * window.length + t * V, w[k]);
    }
  } else {
    constexpr int kBatch = 4;
    const auto fresh = [](const T* p) { return __ldg(p); };
    for (int t0 = threadIdx.x; t0 < window.length; t0 += kBatch * kThreads) {
      T w[kBatch][3];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
#pragma unroll
        for (int k = 0; k < 3; ++k) {
          const int t = t0 + u * kThreads;
          const std::int64_t j = window.start + (k - 1) * window.plane + t;
          w[u][k] = (t < window.length && j >= 0 && j < v.n)
                        ? detail::stencil_direction_value(dinv, fresh(v.r + j), fresh(from + j), beta)
                        : T(0);
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
  }
  __syncthreads();
  return window;
}

}  // namespace tally::solvers::kernels
