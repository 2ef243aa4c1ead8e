// How the GPU sweep cuts the grid, and so the order in which the
// deterministic gosa is summed (the CPU mirrors it in deterministic_gosa).
//
// The interior's (j, k) plane is cut into tiles of kTileJ x kTileK points;
// a tile's column of points along i is walked plane by plane. One *unit* is
// one tile on one plane: 512 points, one value of gosa's tree:
//
//   unit value  = balanced tree over the tile's 256 threads (thread t = 32w+l
//                 holds ss²(j0+w, k0+l) + ss²(j0+w, k0+l+32), missing points 0)
//   unit index  = tile · (mi−2) + (i−1),  tile = tj · tiles_k + tk
//   gosa        = balanced tree over unit indices, padded with zeros
//
// All of it depends on the grid size only, never on the launch: the GPU
// splits the units into any number of contiguous ranges, one per block.
// Zero padding is exact here: sums of squares are never −0.
#pragma once

#include <cstdint>

#include "problem.hpp"

namespace tally::himeno {

inline constexpr int kTileJ = 8;    ///< rows of a tile: one warp each
inline constexpr int kTileK = 64;   ///< columns: two points per lane
inline constexpr int kTileThreads = kTileJ * 32;

struct tiling {
  int tiles_j = 0, tiles_k = 0;
  int planes = 0;  ///< interior planes, mi − 2
  std::int64_t tiles() const { return std::int64_t{tiles_j} * tiles_k; }
  std::int64_t units() const { return tiles() * planes; }
};

inline tiling tiling_of(const grid_size& g) {
  return {(g.mj - 2 + kTileJ - 1) / kTileJ, (g.mk - 2 + kTileK - 1) / kTileK, g.mi - 2};
}

}  // namespace tally::himeno
