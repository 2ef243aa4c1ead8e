// Matrix-free operators: the 3D 7-point and 27-point constant-coefficient
// Poisson stencils on a g×g×g grid (poisson.hpp builds the same matrices as
// CSR). The solvers take one in place of a matrix; it reads vectors only.
//
// Like csr_view, it is a linear_operator (operator.hpp), and it sums
// each row's terms in the order the CSR matrix stores them (increasing
// column), so both give the same bits.
#pragma once

#include <cstdint>

#include "tally/core/config.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"

namespace tally::solvers {

/// A g×g×g Poisson stencil: `points` is 7 (6 on the diagonal) or 27 (26,
/// HPCG's), −1 for each neighbour inside the grid.
template <class Value>
struct stencil_operator {
  using value_type = Value;
  std::int64_t g = 0;
  int points = 27;
  std::int64_t rows = 0;  ///< g³
  std::int64_t cols = 0;  ///< g³

  /// Pre: g >= 1 and points is 7 or 27 (invalid_argument otherwise).
  static stencil_operator make(std::int64_t g, int points) {
    if (g < 1) tally::detail::throw_invalid_argument("stencil_operator", "g", "must be at least 1");
    if (points != 7 && points != 27)
      tally::detail::throw_invalid_argument("stencil_operator", "points", "must be 7 or 27");
    return {g, points, g * g * g, g * g * g};
  }

  /// The diagonal entry, the same in every row: 26 for 27 points, 6 for 7.
  /// Pre: points is 7 or 27 (make() ensures it; cg() checks it).
  TALLY_HD_INLINE Value center() const { return points == 27 ? Value(26) : Value(6); }

  /// Σ a(i, j)·v(j) over the stencil's points inside the grid, in increasing
  /// j, each product rounded on its own (see csr_view::row_product).
  /// Pre: 0 <= i < rows, and rows = cols = g³ (as make() builds it).
  template <class Acc = Value, class Vector>
  TALLY_HD_INLINE Acc row_product(std::int64_t i, const Vector& v) const {
    std::int64_t x, y, z;
    coordinates(i, x, y, z);
    if (points == 27) return lines_row<Acc>(i, x, y, z, v);
    Acc acc = sum_start<Acc>();  // the 7-point row: its terms in order
    auto add = [&](std::int64_t j, Acc a) { acc = acc + tally::detail::multiply_rounded(a, static_cast<Acc>(v(j))); };
    const Acc minus_one(-1), diag = static_cast<Acc>(center());
    if (z > 0) add(i - g * g, minus_one);
    if (y > 0) add(i - g, minus_one);
    if (x > 0) add(i - 1, minus_one);
    add(i, diag);
    if (x + 1 < g) add(i + 1, minus_one);
    if (y + 1 < g) add(i + g, minus_one);
    if (z + 1 < g) add(i + g * g, minus_one);
    return acc;
  }

  /// row_product of a 27-point row at (x, y, z): its nine grid lines in the
  /// row's order, those outside the grid left out, through add_line; the x
  /// neighbours that fall outside left out by a select instead of a branch
  /// (a warp holds rows at both x ends, so a branch would diverge), and the
  /// lines outside the grid by a select too.
  /// Pre: points == 27, (x, y, z) the coordinates of row i.
  template <class Acc, class Vector>
  TALLY_HD_INLINE Acc lines_row(std::int64_t i, std::int64_t x, std::int64_t y, std::int64_t z, const Vector& v) const {
    const bool left = x > 0, right = x + 1 < g;
    const line_mask inside = lines_inside(y, z);
    auto at = [&](std::int64_t j) { return static_cast<Acc>(v(j)); };
    Acc acc = sum_start<Acc>();
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int line = 0; line < 9; ++line) {
      // A line outside the grid reads row i's own line and is not added:
      // reads without a condition can all be in flight at once.
      const bool in = inside(line);
      const std::int64_t j = i + (in ? line_offset(line) : 0);
      const Acc sum = add_line(acc, line, left, right, left ? at(j - 1) : Acc(0), at(j), right ? at(j + 1) : Acc(0));
      acc = in ? sum : acc;
    }
    return acc;
  }

  /// What a row's sum starts from: −0, the identity of IEEE addition
  /// (−0 + x is x for every x, +0 and −0 included), so that adding the
  /// row's first term to it gives the bits of a sum that starts with that
  /// term, as csr_view::row_product's does, and a line outside the grid can
  /// be left out wherever it falls.
  template <class Acc>
  TALLY_HD_INLINE static Acc sum_start() {
    return -Acc(0);
  }

  /// Line `line` (0 .. 8: dz = line / 3 − 1, dy = line % 3 − 1) of a 27-point
  /// row: its terms added to `acc` (sum_start() before the row's first line)
  /// in the row's order, given the values at x − 1 (`before`, read only when
  /// `left`), x and x + 1 (`after`, only when `right`). a(i, j) = −1 is
  /// applied as a subtraction: −1·v is exact, so acc + (−1·v) and acc − v are
  /// the same bits; the diagonal's product is rounded on its own. lines_row
  /// and the GPU's several-rows-a-thread searches all go through it, so they
  /// give the same bits as each other and as the sorted CSR row.
  template <class Acc>
  TALLY_HD_INLINE Acc add_line(Acc acc, int line, bool left, bool right, Acc before, Acc mid, Acc after) const {
    if (left) acc = acc - before;
    acc = line == 4 ? acc + tally::detail::multiply_rounded(static_cast<Acc>(center()), mid) : acc - mid;
    if (right) acc = acc - after;
    return acc;
  }

  /// Which of a 27-point row's nine lines lie inside the grid (lines_inside):
  /// the z − 1 and z + 1 lines are missing on the z faces, the y − 1 and
  /// y + 1 lines on the y faces.
  struct line_mask {
    bool y_low, y_high, z_low, z_high;  ///< the lines at y − 1, y + 1, z − 1, z + 1 are inside
    /// Pre: 0 <= line < 9 (a constant after unrolling: one test a line).
    TALLY_HD_INLINE bool operator()(int line) const {
      const int dy = line % 3, dz = line / 3;
      return (dy == 0 ? y_low : dy == 2 ? y_high : true) && (dz == 0 ? z_low : dz == 2 ? z_high : true);
    }
  };

  /// The line_mask of a row at (y, z).
  TALLY_HD_INLINE line_mask lines_inside(std::int64_t y, std::int64_t z) const {
    return {y > 0, y + 1 < g, z > 0, z + 1 < g};
  }

  /// j − i from row i to its neighbour at x on line `line` (see add_line).
  TALLY_HD_INLINE std::int64_t line_offset(int line) const { return ((line / 3 - 1) * g + (line % 3 - 1)) * g; }

  /// Row i's grid point: i = x + g·(y + g·z). Two divisions, in 32 bits
  /// where the grid allows: a 64-bit division is a long instruction sequence
  /// on the GPU, and the matrix-free search does this once a row.
  TALLY_HD_INLINE void coordinates(std::int64_t i, std::int64_t& x, std::int64_t& y, std::int64_t& z) const {
    if (rows <= std::int64_t{0xffffffff}) {
      const auto i32 = static_cast<std::uint32_t>(i), g32 = static_cast<std::uint32_t>(g);
      const std::uint32_t line = i32 / g32, plane = line / g32;
      x = static_cast<std::int64_t>(i32 - line * g32);
      y = static_cast<std::int64_t>(line - plane * g32);
      z = static_cast<std::int64_t>(plane);
    } else {
      const std::int64_t line = i / g;
      x = i - line * g;
      y = line % g;
      z = line / g;
    }
  }

  /// a(i, i) = center(). Pre: 0 <= i < rows (any i gives center()).
  TALLY_HD_INLINE Value diagonal(std::int64_t) const { return center(); }
};

}  // namespace tally::solvers
