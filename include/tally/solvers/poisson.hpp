// Model problems: the Poisson matrices of the 2D 5-point, 3D 7-point and 3D
// 27-point (HPCG) stencils on g×g(×g) grids with Dirichlet boundaries, as CSR.
//
// Row (z·g + y)·g + x holds the point (x, y, z); its entries are sorted by
// column, which is the order the matrix-free operator (stencil.hpp) sums them
// in, so the two give the same bits.
#pragma once

#include <cstdint>
#include <limits>

#include "tally/core/error.hpp"
#include "tally/solvers/csr.hpp"

namespace tally::solvers {

namespace detail {
/// Appends the entries of a stencil over `dims` (2 or 3) dimensions with
/// neighbour offsets in [-1, 1]^dims: `full` takes all of them (27-point),
/// otherwise only the axis neighbours (5- or 7-point).
template <class Value, class Index>
host_csr<Value, Index> stencil_matrix(std::int64_t g, int dims, bool full, Value diagonal, const char* name) {
  if (g < 1) tally::detail::throw_invalid_argument(name, "g", "must be at least 1");
  const std::int64_t gz = dims == 3 ? g : 1;
  host_csr<Value, Index> a;
  a.rows = a.cols = g * g * gz;
  const std::int64_t per_row = full ? 27 : 2 * dims + 1;
  if (a.rows * per_row > static_cast<std::int64_t>(std::numeric_limits<Index>::max()))
    tally::detail::throw_invalid_argument(name, "g", "gives more entries than the index type holds");
  a.offsets.reserve(static_cast<std::size_t>(a.rows) + 1);
  a.columns.reserve(static_cast<std::size_t>(a.rows * per_row));
  a.values.reserve(static_cast<std::size_t>(a.rows * per_row));
  const int dz_lo = dims == 3 ? -1 : 0, dz_hi = dims == 3 ? 1 : 0;
  for (std::int64_t z = 0; z < gz; ++z)
    for (std::int64_t y = 0; y < g; ++y)
      for (std::int64_t x = 0; x < g; ++x) {
        for (int dz = dz_lo; dz <= dz_hi; ++dz)
          for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
              const int off = (dz != 0) + (dy != 0) + (dx != 0);
              if (!full && off > 1) continue;
              const std::int64_t nx = x + dx, ny = y + dy, nz = z + dz;
              if (nx < 0 || nx >= g || ny < 0 || ny >= g || nz < 0 || nz >= gz) continue;
              a.columns.push_back(static_cast<Index>((nz * g + ny) * g + nx));
              a.values.push_back(off == 0 ? diagonal : Value(-1));
            }
        a.offsets.push_back(static_cast<Index>(a.columns.size()));
      }
  return a;
}
}  // namespace detail

/// The 2D 5-point Laplacian on a g×g grid: 4 on the diagonal, −1 for each
/// neighbour inside the grid. Pre: g >= 1 (invalid_argument otherwise).
template <class Value, class Index>
host_csr<Value, Index> poisson2d_5pt(std::int64_t g) {
  return detail::stencil_matrix<Value, Index>(g, 2, false, Value(4), "poisson2d_5pt");
}

/// The 3D 7-point Laplacian on a g×g×g grid: 6 on the diagonal, −1 for each
/// axis neighbour inside the grid. Pre: g >= 1.
template <class Value, class Index>
host_csr<Value, Index> poisson3d_7pt(std::int64_t g) {
  return detail::stencil_matrix<Value, Index>(g, 3, false, Value(6), "poisson3d_7pt");
}

/// HPCG's 27-point operator on a g×g×g grid: 26 on the diagonal, −1 for each
/// of the up to 26 neighbours inside the grid (g = 31: 29 791 rows, 753 571
/// entries). Pre: g >= 1.
template <class Value, class Index>
host_csr<Value, Index> poisson3d_27pt(std::int64_t g) {
  return detail::stencil_matrix<Value, Index>(g, 3, true, Value(26), "poisson3d_27pt");
}

}  // namespace tally::solvers
