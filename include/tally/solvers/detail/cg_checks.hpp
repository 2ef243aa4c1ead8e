// Argument checks shared by both backends' cg().
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "tally/core/error.hpp"
#include "tally/solvers/cg.hpp"

namespace tally::solvers::detail {

/// Bodies of graph_unroll iterations the replayed mode chains: enough for
/// max_iterations, and at least one (as the graph mode's while loop runs its
/// body at least once). A pipelined body whose gather asks for the true
/// residual ends without an iteration (the next body restarts the
/// recurrences), and each such check follows at least one iteration, so a
/// pipelined solve needs at most 2·max_iterations + 1 iterations' worth of
/// bodies. Pre: graph_unroll >= 1.
inline std::int64_t replayed_bodies(const cg_options& o) {
  const std::int64_t needed = o.pipelined ? 2 * o.max_iterations + 1 : o.max_iterations;
  return needed <= o.graph_unroll ? 1 : (needed + o.graph_unroll - 1) / o.graph_unroll;
}

template <class Op, class T>
void check_cg_arguments(const Op& A, const T* b, const T* x, const cg_options& o) {
  using tally::detail::throw_invalid_argument;
  if (A.rows != A.cols)
    throw_invalid_argument("cg", "A", "must be square (" + std::to_string(A.rows) + " x " + std::to_string(A.cols) + ")");
  if (A.rows < 0) throw_invalid_argument("cg", "A", "has a negative size");
  if (A.rows > 0 && b == nullptr) throw_invalid_argument("cg", "b", "is null");
  if (A.rows > 0 && x == nullptr) throw_invalid_argument("cg", "x", "is null");
  if (A.rows > 0 && static_cast<const void*>(b) == static_cast<const void*>(x))
    throw_invalid_argument("cg", "x", "must not be b");
  if (!(o.rtol >= 0) || !std::isfinite(o.rtol)) throw_invalid_argument("cg", "options.rtol", "must be finite and >= 0");
  if (!(o.atol >= 0) || !std::isfinite(o.atol)) throw_invalid_argument("cg", "options.atol", "must be finite and >= 0");
  if (o.max_iterations < 0) throw_invalid_argument("cg", "options.max_iterations", "must be >= 0");
  if (o.true_residual_interval < 0) throw_invalid_argument("cg", "options.true_residual_interval", "must be >= 0");
  if (o.graph_unroll < 1 || o.graph_unroll > 64) throw_invalid_argument("cg", "options.graph_unroll", "must be in 1..64");
  // (max_iterations and graph_unroll are valid here: checked above.)
  if (o.mode == cg_mode::replayed && replayed_bodies(o) > kMaxReplayedBodies)
    throw_invalid_argument("cg", "options.max_iterations",
                           "needs more than " + std::to_string(kMaxReplayedBodies) +
                               " replayed bodies in the replayed mode: raise options.graph_unroll or use the graph mode");
  if (o.grid_blocks < 0) throw_invalid_argument("cg", "options.grid_blocks", "must be >= 0");
}

}  // namespace tally::solvers::detail
