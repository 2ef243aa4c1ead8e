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
    Acc acc(0);
    bool first = true;
    auto add = [&](std::int64_t j, Acc a) {
      const Acc term = tally::detail::multiply_rounded(a, static_cast<Acc>(v(j)));
      acc = first ? term : acc + term;
      first = false;
    };
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
  /// (a warp holds rows at both x ends, so a branch would diverge).
  /// Pre: points == 27, (x, y, z) the coordinates of row i.
  template <class Acc, class Vector>
  TALLY_HD_INLINE Acc lines_row(std::int64_t i, std::int64_t x, std::int64_t y, std::int64_t z,
                                const Vector& v) const {
    const bool left = x > 0, right = x + 1 < g;
    const int first = first_line(y, z);
    auto at = [&](std::int64_t j) { return static_cast<Acc>(v(j)); };
    Acc acc(0);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int line = 0; line < 9; ++line) {
      if (!line_inside(line, y, z)) continue;
      const std::int64_t j = i + line_offset(line);
      acc = add_line(acc, line == first, line, left, right, left ? at(j - 1) : Acc(0), at(j),
                     right ? at(j + 1) : Acc(0));
    }
    return acc;
  }

  /// Line `line` (0 .. 8: dz = line / 3 − 1, dy = line % 3 − 1) of a 27-point
  /// row: its terms added to `acc` in the row's order, given the values at
  /// x − 1 (`before`, read only when `left`), x and x + 1 (`after`, only when
  /// `right`). The row's first line inside the grid (`first`, see first_line)
  /// starts the sum (`acc` is ignored there). a(i, j) = −1 is applied as a
  /// subtraction: −1·v is exact, so acc + (−1·v) and acc − v are the same
  /// bits, and the diagonal's product is rounded on its own. lines_row and
  /// the GPU's several-rows-a-thread searches all go through it, so they
  /// give the same bits as each other and as the sorted CSR row.
  template <class Acc>
  TALLY_HD_INLINE Acc add_line(Acc acc, bool first, int line, bool left, bool right, Acc before, Acc mid,
                               Acc after) const {
    const Acc term = line == 4 ? tally::detail::multiply_rounded(static_cast<Acc>(center()), mid) : -mid;
    if (first) acc = left ? -before + term : term;
    else acc = (left ? acc - before : acc) + term;
    if (right) acc = acc - after;
    return acc;
  }

  /// The first of a 27-point row's lines (see add_line) inside the grid: its
  /// z − 1 and y − 1 lines are missing on the z = 0 and y = 0 faces.
  TALLY_HD_INLINE static int first_line(std::int64_t y, std::int64_t z) { return 3 * (z == 0) + (y == 0); }

  /// Whether line `line` of a row at (y, z) lies inside the grid.
  TALLY_HD_INLINE bool line_inside(int line, std::int64_t y, std::int64_t z) const {
    const std::int64_t ly = y + line % 3 - 1, lz = z + line / 3 - 1;
    return ly >= 0 && ly < g && lz >= 0 && lz < g;
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
