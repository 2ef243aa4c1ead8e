// How the GPU sweep cuts the grid, and so the order in which the
// deterministic gosa is summed (the CPU mirrors it in deterministic_gosa).
//
// The interior's (j, k) plane is cut into tiles of kTileJ x kTileK points;
// a tile's column of points along i is walked plane by plane. One *unit* is
// one tile on D consecutive planes (D = planes_per_unit, 1 up to L, 8 at XL
// so that the last block combines at most 65536 unit values), one value of
// gosa's tree:
//
//   thread t = 32w + l of a tile, on a plane: v = ss²(j0+w, k0+l) + ss²(j0+w, k0+l+32)
//                 (missing points 0); over the unit's planes in order:
//                 acc = v(first plane), then acc = acc + v(next plane) ...
//   unit value  = balanced tree over the 256 threads' acc
//   unit index  = tile · chunks + (i−1) / D,  tile = tj · tiles_k + tk
//   gosa        = balanced tree over unit indices, padded with zeros
//
// All of it depends on the grid size only, never on the launch: the GPU
// splits the units into any number of contiguous ranges, one per block.
// Zero padding is exact here: sums of squares are never −0.
#pragma once

#include <cstdint>

#include "problem.hpp"

namespace tally::himeno {

/// The two orders of the deterministic gosa: the tile sweep's (this file) and
/// the row-streaming sweeps' (row_tiling.hpp).
enum class gosa_tree { tiles, rows };

inline constexpr int kTileJ = 8;    ///< rows of a tile: one warp each
inline constexpr int kTileK = 64;   ///< columns: two points per lane
inline constexpr int kTileThreads = kTileJ * 32;

/// Most units the last block combines (more would make that combine, done
/// by one SM, a visible tail of the sweep).
inline constexpr std::int64_t kMaxUnits = 65536;

/// The tile sweep's cut of one grid (tiling_of): tiles of the (j, k) plane,
/// D planes a unit. It fixes the order of the tile tree's gosa; a launch only
/// splits its units among blocks.
struct tiling {
  int tiles_j = 0, tiles_k = 0;  ///< tiles along j (kTileJ rows each) and k (kTileK points each)
  int planes = 0;           ///< interior planes, mi − 2
  int planes_per_unit = 1;  ///< D
  /// Tiles of one plane, tiles_j · tiles_k (the last along j or k may be partial).
  std::int64_t tiles() const { return std::int64_t{tiles_j} * tiles_k; }
  /// Units along i: planes / D rounded up (the last may be short).
  std::int64_t chunks() const { return (planes + planes_per_unit - 1) / planes_per_unit; }
  /// Units of the grid, tiles() · chunks(): the leaves of gosa's tree before
  /// zero padding, and the work the blocks split.
  std::int64_t units() const { return tiles() * chunks(); }
};

/// The tiling of grid g: D is the smallest power of two that leaves at most
/// max_units units (tests lower max_units to reach D > 1 on small grids).
inline tiling tiling_of(const grid_size& g, std::int64_t max_units = kMaxUnits) {
  tiling t{(g.mj - 2 + kTileJ - 1) / kTileJ, (g.mk - 2 + kTileK - 1) / kTileK, g.mi - 2, 1};
  while (t.units() > max_units && t.planes_per_unit < t.planes) t.planes_per_unit *= 2;
  return t;
}

}  // namespace tally::himeno
