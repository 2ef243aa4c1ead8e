// Conjugate gradient for symmetric positive definite systems A·x = b, on
// either backend, with the same bits on both:
//
//   auto A = tally::solvers::poisson3d_27pt<float, int>(64);        // or a stencil_operator
//   tally::solvers::cg_result r = tally::solvers::cg(tally::cpu, A.view(), b, x, {});
//
// Every dot product goes through tally's fixed tree (core/tree.hpp) with
// vectors of 16 bytes of the value type; every product is rounded on its own;
// each row of A·x is summed in stored order. So the CPU (OpenMP) and GPU
// backends produce the same iterates, iteration counts and residual
// histories, bit for bit, on every run and at every thread or block count.
//
// The iteration is Jacobi-preconditioned CG in Eigen's order (seed 004), with
// three additions: the stopping test ‖r‖ ≤ max(rtol·‖b‖, atol) runs every
// iteration on the recurrence residual and, when it passes, is confirmed on
// the TRUE residual b − A·x (rows accumulated in double); a failed
// confirmation replaces r by the true residual and goes on (fp32 recurrences
// drift: see issue 8). The same replacement happens every
// `true_residual_interval` iterations when that is set.
//
// Pipelined CG (options.pipelined; Ghysels and Vanroose, Parallel Computing
// 40, 2014, Alg. 3) computes an iteration's three inner products (r·u, w·u,
// r·r) in ONE fused reduction, overlapped with the product n = A·M·w, by
// carrying the extra recurrences w = A·u, s = A·p, q = M·s, z = A·q. The
// price is accuracy: rounding errors in those recurrences are amplified, so
// the recurrence residual drifts from the true one sooner (Cools et al., SIAM
// J. Matrix Anal. Appl. 39, 2018). Here the stopping test is always
// confirmed on the true residual and a failed confirmation restarts the
// recurrences from it, so the answer meets the tolerance either way. In f32
// the recurrences drift fast enough to make p·Ap non-positive on an SPD
// matrix (27-point Poisson, g = 64, at iteration 80): that too restarts them
// from the true residual (a breakdown is reported only on fresh recurrences),
// and in f32 they are restarted every 25 iterations unless
// true_residual_interval says otherwise, which keeps the cost to a few
// iterations (g = 31, 64, 128: 42, 76, 102 against 38, 72, 95; in f64 the
// same count). On one GPU the gain is small: the barrier after the vector
// update remains (two barriers, one reduction).
//
// GPU execution (cuda/cg.cuh) never waits for the device inside the solve.

#pragma once

#include <cstdint>
#include <string>

namespace tally::solvers {

enum class cg_preconditioner { jacobi, none };

/// How the GPU backend runs the iterations (the CPU backend ignores it).
enum class cg_mode {
  automatic,   ///< persistent up to 2^22 rows (2^19 for pipelined CG; measured faster there on the H100), graph above
  persistent,  ///< one cooperative kernel, grid-wide barriers; falls back to graph if the grid cannot be co-resident
  graph,       ///< a CUDA graph of fused kernels looping on the device (conditional while node)
  /// The same kernels in a CUDA graph without a conditional node: the body of
  /// graph_unroll iterations chained ceil(max_iterations / graph_unroll)
  /// times (pipelined: ceil((2·max_iterations + 1) / graph_unroll), as a
  /// true-residual check takes a body of its own), each a no-op once the
  /// solve has finished, so its cost grows with max_iterations, not with the
  /// iterations run; at most kMaxReplayedBodies bodies. Never chosen by
  /// `automatic`; for comparison with `graph`, and for tools that cannot
  /// follow conditional nodes (compute-sanitizer racecheck, Nsight Compute).
  replayed,
};

/// Most bodies the replayed mode chains into one graph.
inline constexpr std::int64_t kMaxReplayedBodies = 4096;

enum class cg_status : int {
  running = 0,          ///< internal: not finished
  converged = 1,        ///< true residual ≤ max(rtol·‖b‖, atol) (x = 0 when b = 0)
  iteration_limit = 2,  ///< max_iterations reached first: a result, not an error
  breakdown = 3,        ///< p·Ap ≤ 0 (or NaN): A is not symmetric positive definite
  bad_diagonal = 4,     ///< Jacobi with a zero, negative or non-finite diagonal entry
  non_finite = 5,       ///< NaN or infinity in b, x0 or the iterates
};

/// A short description of a status ("converged", "breakdown: p·Ap <= 0 ...").
const char* describe(cg_status status);

struct cg_options {
  cg_preconditioner preconditioner = cg_preconditioner::jacobi;
  double rtol = 1e-6;  ///< stop when ‖b − A·x‖ ≤ max(rtol·‖b‖, atol)
  double atol = 0;
  std::int64_t max_iterations = 1000;
  /// Replace the recurrence residual by the true one every this many
  /// iterations (0: only when the recurrence says converged; pipelined f32:
  /// every 25, see above).
  std::int64_t true_residual_interval = 0;
  /// Where to write the residual history (memory of the backend's side), or
  /// null: max_iterations + 1 doubles; entry 0 is the initial true relative
  /// residual, entry k the recurrence's ‖r_k‖/‖b‖ after iteration k.
  double* history = nullptr;
  cg_mode mode = cg_mode::automatic;
  /// Pipelined CG (Ghysels–Vanroose): one fused reduction per iteration
  /// instead of two, at the price of accuracy (see the notes above).
  bool pipelined = false;
  /// GPU: blocks of the persistent kernel (0: as many as fit); more than fit
  /// makes it fall back to the graph mode (tests use this).
  int grid_blocks = 0;
  /// GPU graph and replayed modes: iterations per body of the device-side
  /// while loop, or per replayed body (each becomes a no-op once the solve has
  /// finished).
  int graph_unroll = 1;
};

struct cg_result {
  std::int64_t iterations = 0;
  cg_status status = cg_status::running;
  /// ‖b − A·x‖ / ‖b‖ for the returned x, rows and norms accumulated in
  /// double (0 when b = 0).
  double relative_residual = 0;
  double rhs_norm = 0;  ///< ‖b‖ (double accumulation)
  cg_mode mode = cg_mode::automatic;  ///< what the GPU ran (automatic on the CPU)
  std::string note;                   ///< e.g. why the persistent mode fell back
  /// True when the solve met its tolerance (status converged).
  bool converged() const { return status == cg_status::converged; }
};

/// A phrase for `status`, as `tally solve cg` prints it. Post: never null.
inline const char* describe(cg_status status) {
  switch (status) {
    case cg_status::running: return "running";
    case cg_status::converged: return "converged";
    case cg_status::iteration_limit: return "iteration limit reached";
    case cg_status::breakdown: return "breakdown: p.Ap <= 0, the matrix is not symmetric positive definite";
    case cg_status::bad_diagonal: return "breakdown: Jacobi needs a positive, finite diagonal";
    case cg_status::non_finite: return "NaN or infinity in b, x0 or the iterates";
  }
  return "unknown status";
}

/// The mode's name as `tally solve cg --mode` takes it ("auto", "persistent",
/// "graph", "replayed"). Post: never null.
inline const char* mode_name(cg_mode m) {
  switch (m) {
    case cg_mode::automatic: return "auto";
    case cg_mode::persistent: return "persistent";
    case cg_mode::graph: return "graph";
    case cg_mode::replayed: return "replayed";
  }
  return "?";
}

}  // namespace tally::solvers
