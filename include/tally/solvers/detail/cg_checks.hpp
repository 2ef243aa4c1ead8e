// Argument checks shared by both backends' cg(): the O(1) ones, run on every
// call (the matrix's entries are checked by validate_csr, as
// options.check_matrix says).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "tally/core/error.hpp"
#include "tally/solvers/cg.hpp"
#include "tally/solvers/csr.hpp"
#include "tally/solvers/stencil.hpp"
#include "tally/solvers/validate_csr.hpp"

namespace tally::solvers::detail {

/// cg_options::graph_unroll as `mode` (graph or replayed) runs it: 0 is
/// kAutomaticGraphUnroll in the graph mode, 1 in the replayed mode.
inline int graph_unroll_in(const cg_options& o, cg_mode mode) {
  if (o.graph_unroll > 0) return o.graph_unroll;
  return mode == cg_mode::graph ? kAutomaticGraphUnroll : 1;
}

/// Bodies of graph_unroll iterations the replayed mode chains: enough for
/// max_iterations, and at least one (as the graph mode's while loop runs its
/// body at least once). A pipelined body whose gather asks for the true
/// residual ends without an iteration (the next body restarts the
/// recurrences), and each such check follows at least one iteration, so a
/// pipelined solve needs at most 2·max_iterations + 1 iterations' worth of
/// bodies. Pre: graph_unroll in 0..64, max_iterations >= 0 (a pipelined
/// limit too large to double reads as the most bodies there can be, never as
/// a wrapped count).
inline std::int64_t replayed_bodies(const cg_options& o) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const int unroll = graph_unroll_in(o, cg_mode::replayed);
  if (o.pipelined && o.max_iterations > (kMax - 1) / 2) return kMax / unroll;
  const std::int64_t needed = o.pipelined ? 2 * o.max_iterations + 1 : o.max_iterations;
  return needed <= unroll ? 1 : (needed - 1) / unroll + 1;
}

/// The O(1) checks of a CSR matrix (sizes, null arrays; check_csr_layout).
template <class V, class I>
void check_operator_layout(const csr_view<V, I>& A) {
  check_csr_layout("cg", "A", A);
}

/// A stencil's fields agree (rows = cols = g³, 7 or 27 points): a
/// hand-filled one that does not would make the solve read past b and x.
template <class V>
void check_operator_layout(const stencil_operator<V>& A) {
  using tally::detail::throw_invalid_argument;
  if (A.points != 7 && A.points != 27) throw_invalid_argument("cg", "A.points", "must be 7 or 27");
  if (A.g < 0 || A.g >= (std::int64_t{1} << 21) || A.rows != A.g * A.g * A.g || A.cols != A.rows)
    throw_invalid_argument("cg", "A",
                           "has rows " + std::to_string(A.rows) + " and cols " + std::to_string(A.cols) +
                               " where its grid g = " + std::to_string(A.g) + " needs g³ of each");
}

/// Any other operator: its own invariants are its business.
template <class Op>
void check_operator_layout(const Op&) {}

/// True when cg() on the GPU (`gpu`) or the CPU checks A's entries.
inline bool checks_matrix(const cg_options& o, bool gpu) {
  return o.check_matrix == cg_matrix_check::always || (o.check_matrix == cg_matrix_check::automatic && !gpu);
}

/// True when [p, p + n) and [q, q + n) share an element (std::less: a total
/// order even for pointers into different arrays).
template <class T>
bool overlap(const T* p, const T* q, std::int64_t n) {
  const std::less<const T*> before;
  return n > 0 && before(p, q + n) && before(q, p + n);
}

/// The O(1) checks of cg()'s arguments: A square with a consistent layout
/// (check_operator_layout), b and x non-null and apart when A has rows, every
/// option in its range. Post: returns, or throws invalid_argument
/// ("tally::cg: argument '<name>' ...") for the first that is not.
template <class Op, class T>
void check_cg_arguments(const Op& A, const T* b, const T* x, const cg_options& o) {
  using tally::detail::throw_invalid_argument;
  if (A.rows != A.cols)
    throw_invalid_argument("cg", "A", "must be square (" + std::to_string(A.rows) + " x " + std::to_string(A.cols) + ")");
  if (A.rows < 0) throw_invalid_argument("cg", "A", "has a negative size");
  check_operator_layout(A);
  if (A.rows > 0 && b == nullptr) throw_invalid_argument("cg", "b", "is null");
  if (A.rows > 0 && x == nullptr) throw_invalid_argument("cg", "x", "is null");
  if (overlap<T>(b, x, A.rows)) throw_invalid_argument("cg", "x", "must not overlap b (x = b included)");
  if (o.preconditioner != cg_preconditioner::jacobi && o.preconditioner != cg_preconditioner::none)
    throw_invalid_argument("cg", "options.preconditioner", "is not a cg_preconditioner");
  if (o.mode != cg_mode::automatic && o.mode != cg_mode::persistent && o.mode != cg_mode::graph &&
      o.mode != cg_mode::replayed)
    throw_invalid_argument("cg", "options.mode", "is not a cg_mode");
  if (o.check_matrix != cg_matrix_check::automatic && o.check_matrix != cg_matrix_check::always &&
      o.check_matrix != cg_matrix_check::never)
    throw_invalid_argument("cg", "options.check_matrix", "is not a cg_matrix_check");
  if (!(o.rtol >= 0) || !std::isfinite(o.rtol)) throw_invalid_argument("cg", "options.rtol", "must be finite and >= 0");
  if (!(o.atol >= 0) || !std::isfinite(o.atol)) throw_invalid_argument("cg", "options.atol", "must be finite and >= 0");
  if (o.max_iterations < 0) throw_invalid_argument("cg", "options.max_iterations", "must be >= 0");
  if (o.true_residual_interval < 0) throw_invalid_argument("cg", "options.true_residual_interval", "must be >= 0");
  if (o.graph_unroll < 0 || o.graph_unroll > 64)
    throw_invalid_argument("cg", "options.graph_unroll", "must be in 1..64, or 0 (automatic)");
  // (max_iterations and graph_unroll are valid here: checked above.)
  if (o.mode == cg_mode::replayed && replayed_bodies(o) > kMaxReplayedBodies)
    throw_invalid_argument("cg", "options.max_iterations",
                           "needs more than " + std::to_string(kMaxReplayedBodies) +
                               " replayed bodies in the replayed mode: raise options.graph_unroll or use the graph mode");
  if (o.grid_blocks < 0) throw_invalid_argument("cg", "options.grid_blocks", "must be >= 0");
}

}  // namespace tally::solvers::detail
