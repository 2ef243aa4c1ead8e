// How the row-streaming sweeps (sweep variants rows-1/2/3) cut the grid, and
// so the order in which their deterministic gosa is summed (the CPU mirrors
// it in deterministic_gosa(..., gosa_tree::rows)).
//
// A *row segment* r is up to kRowSegment consecutive interior points of one
// row: r = (j − 1) · segments + g covers k in [1 + g·W, min(1 + (g+1)·W, mk − 1)).
// Its leaves are its planes: leaf (r, i) at index r · P2 + (i − 1), where P2 =
// bit_ceil(planes) (indices past the last plane are zero leaves).
//
//   plane value (r, i) = balanced tree over the 256 threads' values, thread t:
//                        v = ss²(k_lo + t) + ss²(k_lo + t + 256) (missing points 0)
//   gosa               = balanced tree over all bit_ceil(R) · P2 leaves, zero-padded
//
// The GPU groups D consecutive planes of a segment into a *unit* (D a power of
// two, at most 32 and at most P2): unit u = r · (P2 / D) + c holds leaves
// [u·D, u·D + D), an aligned subtree, so D changes how the work is cut but
// never the bits of gosa. D is chosen per launch (load balance); the tree
// depends on the grid size only.
#pragma once

#include <cstdint>

#include "problem.hpp"
#include "tally/core/tree.hpp"

namespace tally::himeno {

inline constexpr int kRowSegment = 512;  ///< W: points of a row segment
inline constexpr int kRowThreads = 256;  ///< threads of a row-streaming block
inline constexpr int kRowPoints = kRowSegment / kRowThreads;  ///< points a thread, per plane
inline constexpr int kMaxRowPlanesPerUnit = 32;               ///< one lane of a warp a plane

/// The row sweeps' cut of one grid (row_tiling_of): its row segments and
/// planes, which fix the deterministic gosa's tree; no launch changes it.
struct row_tiling {
  int rows = 0;      ///< interior rows, mj − 2
  int segments = 0;  ///< segments a row
  int planes = 0;    ///< interior planes, mi − 2
  int padded_planes = 1;  ///< P2 = bit_ceil(planes)
  std::int64_t row_segments() const { return std::int64_t{rows} * segments; }  ///< R
  /// Leaves of the gosa tree, zero padding included: bit_ceil(R) · P2.
  std::int64_t padded_leaves() const {
    return static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(row_segments()))) * padded_planes;
  }
};

/// The row tiling of grid g: mj − 2 rows of ceil((mk − 2) / kRowSegment)
/// segments, mi − 2 planes. Pre: g has at least one interior point
/// (custom_size's check). Post: segments >= 1, padded_planes a power of two
/// >= planes.
inline row_tiling row_tiling_of(const grid_size& g) {
  row_tiling t;
  t.rows = g.mj - 2;
  t.segments = (g.mk - 2 + kRowSegment - 1) / kRowSegment;
  t.planes = g.mi - 2;
  t.padded_planes = static_cast<int>(tree::bit_ceil(static_cast<std::uint64_t>(t.planes)));
  return t;
}

/// How one launch groups planes into units: D planes a unit.
struct row_units {
  int planes_per_unit = 1;  ///< D: a power of two, <= 32, <= P2
  int chunks = 1;           ///< units of a segment that hold planes: ceil(planes / D)
  int chunks_padded = 1;    ///< P2 / D: units of a segment in the tree (a power of two)
  std::int64_t items = 0;   ///< units that hold planes: R · chunks (the work)
  std::int64_t padded_units = 0;  ///< bit_ceil(R) · chunks_padded: the final combine's leaves
  std::int64_t partials = 0;      ///< R · chunks_padded: the partials buffer's length
};

/// How one launch with D = planes_per_unit groups t's planes into units.
/// Pre: planes_per_unit is a power of two, at most kMaxRowPlanesPerUnit and
/// at most t.padded_planes (gpu_problem clamps a larger one to it;
/// choose_planes_per_unit returns one that fits). Post: the fields of row_units for that D; a unit's leaves
/// are an aligned subtree of t's tree, so gosa's bits do not depend on D.
inline row_units row_units_of(const row_tiling& t, int planes_per_unit) {
  row_units u;
  u.planes_per_unit = planes_per_unit;
  u.chunks = (t.planes + planes_per_unit - 1) / planes_per_unit;
  u.chunks_padded = t.padded_planes / planes_per_unit;
  u.items = t.row_segments() * u.chunks;
  u.padded_units = t.padded_leaves() / planes_per_unit;
  u.partials = t.row_segments() * u.chunks_padded;
  return u;
}

/// D for a launch of `blocks` blocks: the power of two (<= 32, <= P2) that
/// minimises the busiest block's work, ceil(items / blocks) units of D planes
/// plus the two extra p planes each unit loads (about 1/7 plane each: p is 4
/// of the 56 bytes a point); ties go to the larger D.
inline int choose_planes_per_unit(const row_tiling& t, int blocks) {
  int best = 1;
  double best_cost = 0;
  for (int d = 1; d <= kMaxRowPlanesPerUnit && d <= t.padded_planes; d *= 2) {
    const row_units u = row_units_of(t, d);
    const std::int64_t per_block = (u.items + blocks - 1) / blocks;
    const double cost = static_cast<double>(per_block) * (d + 2.0 / 7.0);
    if (d == 1 || cost <= best_cost) best = d, best_cost = cost;
  }
  return best;
}

}  // namespace tally::himeno
