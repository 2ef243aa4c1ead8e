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
//
// Range: r·r, r·z and p·Ap are summed in the value type T (that is part of
// the bits both backends share), so in f32 a residual norm above about
// √FLT_MAX ≈ 1.8e19 (and p·Ap above FLT_MAX) overflows: ‖b‖ ≳ 1.8e19 from a
// zero guess ends at once with status non_finite, and the result's note says
// that b and x0 were finite and the sums overflowed. Scale such systems
// (f64's limit, ≈ 1.3e154, is that of the double norms too).

#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace tally::solvers {

enum class cg_preconditioner { jacobi, none };

/// How the GPU backend runs the iterations (the CPU backend ignores it).
enum class cg_mode {
  /// persistent up to 2^22 rows for a stencil, 2^23 for a CSR matrix, 2^19
  /// for pipelined CG (measured faster there on the H100); graph above, and
  /// for a standard stencil solve whose five working vectors do not fit in
  /// the device's L2 cache (half of it for double values)
  automatic,
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
  non_finite = 5,       ///< NaN or infinity in b, x0 or the iterates, or a sum that overflowed T (see the note)
};

/// Whether cg() checks a CSR matrix's structure (validate_csr) before the
/// solve: a bad one (an offset or a column index out of range) would make
/// the solve read outside the arrays.
enum class cg_matrix_check {
  /// The CPU backend checks: one parallel pass over the offsets and the
  /// column indices, about what one iteration reads of them, against the
  /// dozens of iterations of a solve. The GPU backend does not: there the
  /// check adds four reductions and a host round trip before the solve
  /// (tens of µs by estimate, not measured, where the whole solve at the
  /// seed's size takes about 400), and cg_async() must never wait, so that
  /// it can be captured into a graph. device_csr checks its matrix when it is built, so views
  /// of a device_csr are valid without it; check other device matrices once
  /// with validate_csr.
  automatic,
  always,  ///< both backends check (GPU: not while the stream is captured; invalid_argument)
  never,   ///< neither checks: the caller vouches for the structure
};

/// A short description of a status ("converged", "breakdown: p·Ap <= 0 ...").
const char* describe(cg_status status);

/// The graph mode's iterations a body where cg_options::graph_unroll is 0.
/// H100, 27-point, matrix-free, f32, µs an iteration with 1 / 4 a body
/// (bench/results/h100-2026-11-27-cg-graph-unroll4-probe.txt): g = 128 48.5 /
/// 46.7, g = 156 89.9 / 83.8, g = 200 167.0 / 163.0; f64 g = 200 340.2 /
/// 337.5; and after the lagged x (-cg-unroll-walk-acq-rel-probe.txt): g = 36
/// 22.8 / 21.1, g = 200 156.7 / 152.1.
inline constexpr int kAutomaticGraphUnroll = 4;

/// How to solve. Range: r·r and p·Ap are summed in the value type, so in f32
/// ‖b‖ (and every residual norm) must stay below about 1.8e19 (see "Range"
/// above); above it the result is non_finite with a note saying so.
struct cg_options {
  cg_preconditioner preconditioner = cg_preconditioner::jacobi;
  double rtol = 1e-6;  ///< stop when ‖b − A·x‖ ≤ max(rtol·‖b‖, atol)
  double atol = 0;
  /// Iterations at most; 0 is valid: the initial residual is evaluated (and
  /// written to history[0]) and the status is iteration_limit, or converged
  /// when x0 already meets the tolerance.
  std::int64_t max_iterations = 1000;
  /// Replace the recurrence residual by the true one every this many
  /// iterations (0: only when the recurrence says converged; pipelined f32:
  /// every 25, see above).
  std::int64_t true_residual_interval = 0;
  /// Where to write the residual history (memory of the backend's side), or
  /// null: max_iterations + 1 doubles; entry 0 is the initial true relative
  /// residual, entry k the recurrence's ‖r_k‖/‖b‖ after iteration k. Entry 0
  /// is 0 when b = 0, the empty system (n = 0) included, on both backends;
  /// entries past the last iteration are left as they were.
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
  /// finished). 1 .. 64, or 0: kAutomaticGraphUnroll in the graph mode (each
  /// turn of the while loop costs a few µs; a body that runs past the last
  /// iteration costs its no-op kernels), 1 in the replayed mode.
  int graph_unroll = 0;
  /// Whether to check a CSR matrix's structure first (see cg_matrix_check).
  cg_matrix_check check_matrix = cg_matrix_check::automatic;
};

/// How a solve ended. A non_finite status with b and x0 finite means the
/// value type's sums overflowed (f32: ‖b‖ ≳ 1.8e19); the note says so.
struct cg_result {
  std::int64_t iterations = 0;
  cg_status status = cg_status::running;
  /// ‖b − A·x‖ / ‖b‖ for the returned x, rows and norms accumulated in
  /// double (0 when b = 0).
  double relative_residual = 0;
  double rhs_norm = 0;  ///< ‖b‖ (double accumulation)
  cg_mode mode = cg_mode::automatic;  ///< what the GPU ran (automatic on the CPU)
  /// e.g. why the persistent mode fell back, or that a non_finite status came
  /// from an overflow of T's sums with b and x0 finite (see the range note
  /// at the top of this file).
  std::string note;
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
    case cg_status::non_finite:
      return "NaN or infinity in b, x0 or the iterates, or a sum that overflowed";
  }
  return "unknown status";
}

namespace detail {
/// Adds to r.note why a non_finite solve stopped when b and x0 were finite:
/// its ‖b‖ and last true residual, accumulated in double, are finite (a NaN
/// or infinity in b or x0 makes them NaN or infinite), so a sum in T
/// overflowed. Host arithmetic on the result alone: no cost to the solve.
template <class T>
void note_overflow(cg_result& r) {
  if (r.status != cg_status::non_finite || !std::isfinite(r.rhs_norm) || !std::isfinite(r.relative_residual)) return;
  char text[320];
  std::snprintf(text, sizeof text,
                "b and x0 are finite (|b| = %.3g), so a sum in %s overflowed: r.r and p.Ap are accumulated in the "
                "value type, which holds norms up to about %.2g; scale the system",
                r.rhs_norm, sizeof(T) == 4 ? "float" : "double", std::sqrt(double(std::numeric_limits<T>::max())));
  r.note += (r.note.empty() ? "" : "; ") + std::string(text);
}
}  // namespace detail

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
