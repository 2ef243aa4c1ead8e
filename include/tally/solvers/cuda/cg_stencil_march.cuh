// The graph mode's search for a 27-point stencil, marching through planes.
// The window search (cg_stencil_window.cuh) stages, for each chunk of rows,
// the new directions of three planes' worth of lines and then reduces p·Ap
// over the chunk: every direction is staged about three times (once for each
// chunk whose z ± 1 planes hold it), each block stages, waits and computes
// once, and at g = 200 that search was latency-bound at a third of DRAM
// bandwidth (~145 µs of a 270 µs iteration, ncu).
//
// Here a block owns a tile of whole grid lines (y0 .. y0 + lines − 1) through
// a slab of planes (z0 .. z1 − 1) and walks the planes in order. A thread
// holds kV rows of one line and three running sums: the rows one plane
// behind the staged plane, at it, and one ahead. Each plane of new directions
// (its tile's lines and one line either side) is staged once into shared
// memory while the previous one is being summed; its three lines around the
// thread's rows finish the rows behind (their lines 6–8), continue the rows
// at the plane (3–5) and start the rows ahead (0–2): every row's nine lines
// in add_line's order, so lines_row's bits. The products and the new
// directions are stored, and p·Ap's leaves: each aligned group of kMarchGroup
// vectors inside a tile's plane as one (the balanced tree over its vectors'
// p·Ap of kV rows each: a subtree of the chunks' tree), the vectors of the
// groups that straddle a tile's edge one by one; p·Ap is then reduced by its
// own kernel (cg_search_sums_kernel: the chunks' usual tree over those
// leaves), so the bits of the solve do not change. On the H100 at g = 200
// (f32) the march took the graph mode's iteration from 237 to 208 µs.
//
// The persistent kernel does not march: a version of it that did (a tile's
// plane one chunk, reduced by its block) was slower at g = 128 (59 → 65 µs),
// its extra shared memory and registers costing more than the staging saved.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tally/cuda/device/vector_load.cuh"
#include "tally/solvers/cuda/cg_advance_x.cuh"
#include "tally/solvers/cuda/cg_stencil_window.cuh"
#include "tally/solvers/cuda/cg_tree.cuh"
#include "tally/solvers/detail/cg_control.hpp"
#include "tally/solvers/detail/cg_rows.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::solvers::kernels {

/// How the march splits the grid: tiles of `lines` whole grid lines (one
/// thread a vector of kV rows: `per_line` = g / kV threads a line) through
/// slabs of `planes` planes; `blocks` = tiles × slabs.
struct march_shape {
  int per_line = 0;
  int lines = 0;
  std::int64_t tiles = 0;
  std::int64_t planes = 0;
  std::int64_t blocks = 0;
};

/// Vectors of an aligned group whose p·Ap the march stores as one leaf where
/// the group lies inside one tile's plane (march_group_walk): the balanced
/// tree over them, a subtree of every chunk's tree (a chunk holds a multiple
/// of kMarchGroup vectors, and the tree over its vectors is balanced).
inline constexpr int kMarchGroup = 8;

/// The aligned groups of kMarchGroup vectors (of kV<T> rows; `vectors` of
/// them in a g-grid) from group `first` on, in turn, and whether each lies
/// inside the grid and inside one plane of one march tile of `lines` grid
/// lines (then one march block's threads hold the whole group). A tile's
/// plane is a run of rows: z·g² + t·lines·g, min(lines, g − t·lines)·g long.
/// Two divisions find the first group's run; the others step through them,
/// since 64-bit divisions for each group cost the p·Ap sums kernel, which
/// asks of every group, more than its loads.
template <class T>
struct march_group_walk {
  static constexpr std::int64_t kRows = static_cast<std::int64_t>(kMarchGroup) * kV<T>;
  std::int64_t g, run_rows, tiles, vectors;
  std::int64_t group, tile, offset, length;  // the current group, its run and its first row's offset in it

  __host__ __device__ march_group_walk(std::int64_t first, std::int64_t g_, int lines, std::int64_t vectors_)
      : g(g_), run_rows(lines * g_), tiles((g_ + lines - 1) / lines), vectors(vectors_), group(first) {
    const std::int64_t in_plane = first * kRows % (g * g);
    tile = in_plane / run_rows;
    offset = in_plane - tile * run_rows;
    length = run_length();
  }
  /// Whether the current group is inside the grid and one tile's plane.
  __host__ __device__ bool inside() const { return (group + 1) * kMarchGroup <= vectors && offset + kRows <= length; }
  /// On to the next group.
  __host__ __device__ void next() {
    ++group;
    offset += kRows;
    while (offset >= length) {
      offset -= length;
      tile = tile + 1 == tiles ? 0 : tile + 1;
      length = run_length();
    }
  }

 private:
  __host__ __device__ std::int64_t run_length() const {
    const std::int64_t left = g - tile * (run_rows / g);
    return (left < run_rows / g ? left : run_rows / g) * g;
  }
};

/// The most staging vectors a thread holds while the plane before is summed.
inline constexpr int kMarchStageRounds = 2;

/// Grid lines of a march tile for lines of `per_line` vectors: as many as
/// kThreads threads hold, one a vector, at most g.
constexpr std::int64_t march_lines(std::int64_t g, std::int64_t per_line) {
  return per_line > kThreads ? 0 : std::min<std::int64_t>(g, kThreads / per_line);
}

/// Whether the march runs the search of `a` for T: a 27-point stencil whose
/// lines split into whole vectors, a tile's lines and one either side staged
/// in kMarchStageRounds vectors a thread (f32: g <= 680).
template <class T, class Value>
constexpr bool marches(const stencil_operator<Value>& a) {
  if (a.points != 27 || a.g % kV<T> != 0) return false;
  const std::int64_t per_line = a.g / kV<T>, lines = march_lines(a.g, per_line);
  return lines > 0 && (lines + 2) * per_line <= kMarchStageRounds * kThreads;
}

/// The march's split of a g-grid for about `target` resident blocks (no
/// more, so that they run as one wave). Pre: marches<T>(the stencil).
template <class T>
march_shape make_march_shape(std::int64_t g, std::int64_t target) {
  march_shape m;
  m.per_line = static_cast<int>(g / kV<T>);
  m.lines = static_cast<int>(march_lines(g, m.per_line));
  m.tiles = (g + m.lines - 1) / m.lines;
  const std::int64_t slabs = std::clamp<std::int64_t>(target / m.tiles, 1, g);
  m.planes = (g + slabs - 1) / slabs;
  m.blocks = m.tiles * ((g + m.planes - 1) / m.planes);
  return m;
}

/// Dynamic shared memory of a march block: two planes of its tile's lines and
/// one line either side.
template <class T>
constexpr std::size_t march_bytes(std::int64_t g, const march_shape& m) {
  return 2 * static_cast<std::size_t>(m.lines + 2) * static_cast<std::size_t>(g) * sizeof(T);
}

/// One block's march over march unit `unit` (tile unit % m.tiles through
/// slab unit / m.tiles): the search phase's products and new directions
/// (p = z + β·p, Ap; z = M⁻¹·r with the stencil's constant M⁻¹, as
/// phases::direction_at computes it: the update stores no z) of its rows.
/// After each plane of rows is summed, every thread whose rows are inside
/// the grid calls emit(i0, own, products): own and products its kV rows'
/// new directions and Ap, rows i0 .. i0 + kV − 1; then, once the block has
/// synchronised after those calls for plane z, every thread calls
/// after_plane(z) (planes z0 .. z1 − 1 in turn, two planes' emits apart:
/// what emit wrote for plane z to one of two buffers, after_plane(z) may
/// read until after_plane(z + 1) returns). Where control.x_behind, x of
/// the block's rows also gets the α·p it lacks (the old p, which the march
/// reads anyway; see cg_control::lag_x). r and p are read through
/// the read-only path (the graph mode's kernels do not change them while
/// they run). Pre: the whole block calls it; marches<T>(A); m from
/// make_march_shape<T>; the block's dynamic shared memory holds
/// march_bytes<T>(g, m); `control` says the search is next. Post: the
/// block is synchronised.
template <class T, class Value, class Emit, class AfterPlane>
__device__ __forceinline__ void march_unit(const stencil_operator<Value>& A, const detail::cg_vectors<T>& v,
                                           const detail::cg_control<T>& control, const march_shape& m,
                                           std::int64_t unit, const Emit& emit, const AfterPlane& after_plane) {
  constexpr int V = kV<T>;
  using vec = device::vector_of<T, V>;
  const std::int64_t g = A.g;
  const std::int64_t y0 = (unit % m.tiles) * m.lines;
  const std::int64_t z0 = (unit / m.tiles) * m.planes;
  const std::int64_t z1 = std::min(z0 + m.planes, g);
  const T* from = v.direction(control.searches);
  const T beta = control.beta, dinv = control.constant_dinv;
  const int stride = (m.lines + 2) * static_cast<int>(g);  // one staged plane
  T* planes = reinterpret_cast<T*>(cg_window_memory);

  // This thread's rows: line ly of the tile, x0 .. x0 + V − 1.
  const int ly = static_cast<int>(threadIdx.x) / m.per_line;
  const std::int64_t y = y0 + ly, x0 = static_cast<std::int64_t>(threadIdx.x % m.per_line) * V;
  const bool mine = ly < m.lines && y < g;
  const bool left = x0 > 0, right = x0 + V < g;
  const bool y_low = y > 0, y_high = y + 1 < g;

  // Staging of plane P: the tile's lines and one either side, a vector a unit.
  // Where x lags (control.x_behind: cg_control::lag_x), the units of the
  // block's own rows (the tile's lines in the slab's planes) also bring x up
  // to date with the old p they stage: x += α·p, as the update would have.
  const int units = (m.lines + 2) * m.per_line;
  const bool advance = control.x_behind;
  const bool x_aligned = device::vector_aligned<T, V>(v.x);
  const T alpha = control.alpha;
  auto advances = [&](int t, std::int64_t P) {  // unit t of plane P is the block's own
    const std::int64_t line = y0 - 1 + t / m.per_line;
    return advance && t < units && P >= z0 && P < z1 && line >= y0 && line < y0 + m.lines && line < g;
  };
  auto x_at = [&](int t, std::int64_t P) { return v.x + (t % m.per_line) * V + g * (y0 - 1 + t / m.per_line + g * P); };
  vec held_r[kMarchStageRounds], held_p[kMarchStageRounds];
  auto stage_loads = [&](std::int64_t P) {
#pragma unroll
    for (int r = 0; r < kMarchStageRounds; ++r) {
      const int t = static_cast<int>(threadIdx.x) + r * kThreads;
      const std::int64_t line = y0 - 1 + t / m.per_line;
      if (t < units && P >= 0 && P < g && line >= 0 && line < g) {
        const std::int64_t j = (t % m.per_line) * V + g * (line + g * P);
        held_r[r] = device::load_vector<T, V, true>(v.r + j);
        held_p[r] = device::load_vector<T, V, true>(from + j);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) held_r[r].v[e] = held_p[r].v[e] = T(0);
      }
      // x is read when the plane is stored (holding it here spilled the
      // march's registers): fetched into L2 now, so that read waits less.
      if (advances(t, P)) asm volatile("prefetch.global.L2 [%0];" ::"l"(x_at(t, P)));
    }
  };
  auto stage_stores = [&](T* plane, std::int64_t P) {
#pragma unroll
    for (int r = 0; r < kMarchStageRounds; ++r) {
      const int t = static_cast<int>(threadIdx.x) + r * kThreads;
      if (t < units) {
        vec w;
#pragma unroll
        for (int e = 0; e < V; ++e)
          w.v[e] = detail::stencil_direction_value(dinv, held_r[r].v[e], held_p[r].v[e], beta);
        device::store_vector<T, V, true>(plane + (t / m.per_line) * g + (t % m.per_line) * V, w);
      }
      if (advances(t, P)) advance_x_vector(x_at(t, P), held_p[r], alpha, x_aligned);
    }
  };

  // The running sums: rows one plane behind the plane being summed, at it, and one ahead.
  vec behind, at, ahead, own_at, own_behind;
#pragma unroll
  for (int k = 0; k < V; ++k) behind.v[k] = at.v[k] = ahead.v[k] = own_at.v[k] = own_behind.v[k] = T(0);
  // Adds the three lines of `plane` around the thread's rows to the running
  // sums that take them (`behind`, `at`, `ahead` say which do): as lines 6–8
  // of the rows behind, 3–5 of the rows at the plane, 0–2 of the rows ahead.
  // Each line is read from shared memory once for the three.
  auto add_plane = [&](const T* plane, bool plane_inside, bool to_behind, bool to_at, bool to_ahead) {
#pragma unroll
    for (int dy = -1; dy <= 1; ++dy) {
      const T* line = plane + (ly + 1 + dy) * g + x0;  // staged lines start one before the tile
      const vec middle = device::load_vector<T, V, true, false>(line);
      T w[V + 2];
      w[0] = left ? line[-1] : T(0);
#pragma unroll
      for (int t = 0; t < V; ++t) w[t + 1] = middle.v[t];
      w[V + 1] = right ? line[V] : T(0);
      const bool inside = plane_inside && (dy < 0 ? y_low : dy > 0 ? y_high : true);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const bool l = k > 0 || left, r = k + 1 < V || right;
        const T b = A.add_line(behind.v[k], 6 + dy + 1, l, r, w[k], w[k + 1], w[k + 2]);
        const T c = A.add_line(at.v[k], 3 + dy + 1, l, r, w[k], w[k + 1], w[k + 2]);
        const T d = A.add_line(ahead.v[k], dy + 1, l, r, w[k], w[k + 1], w[k + 2]);
        behind.v[k] = inside && to_behind ? b : behind.v[k];
        at.v[k] = inside && to_at ? c : at.v[k];
        ahead.v[k] = inside && to_ahead ? d : ahead.v[k];
      }
      if (dy == 0 && to_at) own_at = middle;
    }
  };

  // Steps: plane P = z0 − 1 .. z1, staged in buffer (P − z0 + 1) & 1.
  __syncthreads();  // no thread still reads the memory (a previous unit's last plane)
  stage_loads(z0 - 1);
  stage_stores(planes, z0 - 1);
  __syncthreads();
  for (std::int64_t P = z0 - 1; P <= z1; ++P) {
    const int buffer = static_cast<int>((P - z0 + 1) & 1);
    if (P < z1) stage_loads(P + 1);  // in flight while this plane is summed
    const T* plane = planes + buffer * stride;
    const bool inside = P >= 0 && P < g;
    if (mine) {
      // The rows behind (then emitted), at the plane, and ahead (their sums started).
#pragma unroll
      for (int k = 0; k < V; ++k) ahead.v[k] = A.template sum_start<T>();
      add_plane(plane, inside, P - 1 >= z0, P >= z0 && P < z1, P + 1 < z1);
    }
    if (mine && P - 1 >= z0) emit(x0 + g * (y + g * (P - 1)), own_behind, behind);
    behind = at;
    own_behind = own_at;
    at = ahead;
    if (P < z1) stage_stores(planes + (buffer ^ 1) * stride, P + 1);
    __syncthreads();
    if (P - 1 >= z0) after_plane(P - 1);
  }
}

}  // namespace tally::solvers::kernels
