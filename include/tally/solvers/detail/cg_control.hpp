// The scalar side of CG, shared verbatim by the CPU and GPU backends: what
// each phase's reductions yield, and the decisions taken on them. Keeping it
// in one place (host and device) is what makes the backends agree on every
// bit and every branch.
#pragma once

#include <cmath>
#include <cstdint>

#include "tally/core/config.hpp"
#include "tally/core/operators.hpp"
#include "tally/solvers/cg.hpp"

namespace tally::solvers::detail {

/// a / b and √a rounded to nearest, the same on host and device.
template <class T>
TALLY_HD_INLINE T divide(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4) return __fdiv_rn(a, b);
  else return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
template <class T>
TALLY_HD_INLINE T root(T a) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4) return __fsqrt_rn(a);
  else return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
template <class T>
TALLY_HD_INLINE bool finite(T a) {
  return a - a == T(0);
}
template <class T>
TALLY_HD_INLINE T larger(T a, T b) {
  return a < b ? b : a;
}
using tally::detail::multiply_rounded;

/// Partial sums of the set-up phase and of the true-residual phase:
/// ‖b‖² and ‖b − A·x‖² in double, r·r and r·z in T.
template <class T>
struct residual_sums {
  double bb, true_rr;
  T rr, rz;
  TALLY_HD_INLINE residual_sums operator+(const residual_sums& o) const {
    return {bb + o.bb, true_rr + o.true_rr, rr + o.rr, rz + o.rz};
  }
};
/// Partial sums of the update phase: r·r and r·z.
template <class T>
struct update_sums {
  T rr, rz;
  TALLY_HD_INLINE update_sums operator+(const update_sums& o) const { return {rr + o.rr, rz + o.rz}; }
};
/// Partial sum of the search phase: p·Ap.
template <class T>
struct search_sums {
  T pap;
  TALLY_HD_INLINE search_sums operator+(const search_sums& o) const { return {pap + o.pap}; }
};

/// Partial sums of pipelined CG's one reduction: γ = r·u, δ = w·u, r·r.
template <class T>
struct pipelined_sums {
  T gamma, delta, rr;
  TALLY_HD_INLINE pipelined_sums operator+(const pipelined_sums& o) const {
    return {gamma + o.gamma, delta + o.delta, rr + o.rr};
  }
};

/// Adds two partial-sum structs member by member (each member follows the tree).
struct add_sums {
  template <class S>
  TALLY_HD_INLINE S operator()(const S& a, const S& b) const { return a + b; }
};

/// Which phase the solve needs next.
enum class cg_phase : int {
  search = 0,         ///< standard: p = z + β·p, Ap, p·Ap
  update = 1,         ///< standard: x, r, z; r·r, r·z
  true_residual = 2,  ///< both: r = b − A·x, z (u) = M·r
  done = 3,
  restart = 4,        ///< pipelined: w = A·u (after set-up or a true residual)
  gather = 5,         ///< pipelined: n = A·M·w; γ, δ, r·r
  vectors = 6,        ///< pipelined: the eight vector recurrences
};

/// The true-residual interval of pipelined CG in f32 when the caller sets
/// none (cg_options::true_residual_interval = 0): chosen on the 27-point
/// Poisson problems (g = 31, 64, 80, 128: 42, 76, 102, 102 iterations
/// against plain CG's 38, 72, 91, 95; every 20: 40, 81, 111, 107).
inline constexpr std::int64_t kPipelinedF32Interval = 25;

/// The solve's scalar state and its transitions. Every backend runs the same
/// sequence: start() after the set-up phase; then per iteration
/// after_search(), after_update(), and after_true_residual() when
/// after_update() asked for it; finish() ends it.
template <class T>
struct cg_control {
  // Settings.
  T rtol, atol;
  std::int64_t max_iterations, interval;
  bool jacobi;
  bool pipelined;
  double* history;  ///< null, or max_iterations + 1 entries
  /// A stencil's M⁻¹, one constant as its diagonal is (the value the set-up
  /// stores in dinv), which the GPU's standard CG uses in place of stored z
  /// (z = M⁻¹·r); 0 otherwise (the CPU backend and matrices).
  T constant_dinv = 0;
  /// The GPU's graph mode where a stencil's search marches (cg_stencil_march.cuh):
  /// the update leaves x alone and the next search, which reads the same p
  /// anyway, adds α·p to x (one read of p an iteration fewer); false otherwise.
  bool lag_x = false;
  // State.
  double bnorm = 0, true_threshold = 0, true_rr = 0;
  T threshold = 0;          ///< (max(rtol·‖b‖, atol))² in T
  T rr = 0, rz = 0, rz_previous = 0, alpha = 0, beta = 0;
  std::int64_t iterations = 0;
  std::int64_t searches = 0;  ///< search phases run: picks the p buffer
  cg_status status = cg_status::running;
  cg_phase next = cg_phase::search;
  bool true_current = true;  ///< true_rr is that of the current x
  /// lag_x only: x still lacks α·p of the last search (p = direction(searches)
  /// in cg_vectors, α = alpha); whoever reads x adds it, with the update's rounding.
  bool x_behind = false;
  // Pipelined CG (Ghysels–Vanroose) only.
  bool first = true;  ///< the next gather starts a recurrence (β = 0)
  T gamma = 0, gamma_previous = 0, alpha_previous = 0;

  static cg_control make(const cg_options& o) {
    cg_control c{};
    c.rtol = static_cast<T>(o.rtol);
    c.atol = static_cast<T>(o.atol);
    c.max_iterations = o.max_iterations;
    c.interval = o.true_residual_interval;
    // f32 pipelined recurrences drift fast: left alone on the 27-point
    // Poisson at g = 64 they reach a non-positive p·Ap at iteration 80 with
    // a true residual of 0.23, and the restart that follows starts far back
    // (204 iterations in all). Restarting them from the true residual every
    // kPipelinedF32Interval iterations keeps them near (76; plain CG: 72).
    if (c.interval == 0 && o.pipelined && sizeof(T) == 4) c.interval = kPipelinedF32Interval;
    c.jacobi = o.preconditioner == cg_preconditioner::jacobi;
    c.history = o.history;
    c.pipelined = o.pipelined;
    c.first = true;
    c.status = cg_status::running;
    c.next = cg_phase::search;
    c.true_current = true;
    return c;
  }

  /// After the set-up phase (r = b − A·x0, z = M·r, p = 0).
  TALLY_HD void start(const residual_sums<T>& s) {
    bnorm = root(s.bb);
    true_rr = s.true_rr;
    rr = s.rr;
    rz = s.rz;
    const double true_tol = larger(multiply_rounded(static_cast<double>(rtol), bnorm), static_cast<double>(atol));
    true_threshold = multiply_rounded(true_tol, true_tol);
    const T tol = larger(multiply_rounded(rtol, static_cast<T>(bnorm)), atol);
    threshold = multiply_rounded(tol, tol);
    beta = 0;
    if (history) history[0] = relative_residual();
    if (!finite(s.bb) || !finite(s.true_rr) || !finite(s.rr)) status = cg_status::non_finite;
    else if (s.bb == 0) status = cg_status::converged;  // x = 0 is the solution; the set-up wrote it
    else if (jacobi && !finite(s.rz)) status = cg_status::bad_diagonal;
    else if (true_rr <= true_threshold) status = cg_status::converged;
    else if (max_iterations <= 0) status = cg_status::iteration_limit;
    next = status != cg_status::running ? cg_phase::done : pipelined ? cg_phase::restart : cg_phase::search;
  }

  /// After the search phase (p = z + β·p, Ap, p·Ap). Pre: next == search.
  TALLY_HD void after_search(const search_sums<T>& s) {
    ++searches;
    x_behind = false;  // the search brought x up to date (lag_x)
    if (!(s.pap > T(0))) {  // also NaN
      status = finite(s.pap) ? cg_status::breakdown : cg_status::non_finite;
      next = cg_phase::done;
      return;
    }
    alpha = divide(rz, s.pap);
    next = cg_phase::update;
  }

  /// After the update phase (x += αp unless lag_x, r −= αAp, z = M·r, r·r, r·z).
  /// The history (if any) gets ‖r‖/‖b‖ at [iterations].
  TALLY_HD void after_update(const update_sums<T>& s) {
    ++iterations;
    true_current = false;
    x_behind = lag_x;
    rr = s.rr;
    rz_previous = rz;
    rz = s.rz;
    if (history) history[iterations] = divide(root(static_cast<double>(rr)), bnorm);
    if (!finite(rr) || !finite(rz)) {
      status = cg_status::non_finite;
      next = cg_phase::done;
      return;
    }
    const bool check = rr <= threshold || (interval > 0 && iterations % interval == 0) || iterations >= max_iterations;
    if (check) {
      next = cg_phase::true_residual;
      return;
    }
    beta = divide(rz, rz_previous);
    next = cg_phase::search;
  }

  /// After a true-residual phase (r = b − A·x, z = M·r): the stopping test
  /// on the true residual, or the recurrence goes on from it.
  TALLY_HD void after_true_residual(const residual_sums<T>& s) {
    true_rr = s.true_rr;
    true_current = true;
    if (status != cg_status::running) {  // the final measurement after a breakdown
      next = cg_phase::done;
      return;
    }
    rr = s.rr;
    rz = s.rz;
    if (!finite(s.true_rr) || !finite(rr) || !finite(rz)) status = cg_status::non_finite;
    else if (true_rr <= true_threshold) status = cg_status::converged;
    else if (iterations >= max_iterations) status = cg_status::iteration_limit;
    if (status != cg_status::running) {
      next = cg_phase::done;
      return;
    }
    if (pipelined) {  // restart the recurrences from the true residual
      first = true;
      next = cg_phase::restart;
      return;
    }
    beta = divide(rz, rz_previous);
    next = cg_phase::search;
  }

  /// Pipelined: after w = A·u.
  TALLY_HD void after_restart() { next = cg_phase::gather; }

  /// Pipelined: after the gather phase (n = A·M·w and its one reduction):
  /// the stopping test on r·r, then α and β (Ghysels & Vanroose 2014, Alg. 3).
  TALLY_HD void after_gather(const pipelined_sums<T>& s) {
    gamma = s.gamma;
    rr = s.rr;
    if (history && iterations > 0 && !true_current) history[iterations] = divide(root(static_cast<double>(rr)), bnorm);
    if (!finite(s.gamma) || !finite(s.delta) || !finite(s.rr)) {
      status = cg_status::non_finite;
      next = cg_phase::done;
      return;
    }
    const bool check = rr <= threshold || (interval > 0 && iterations % interval == 0) || iterations >= max_iterations;
    if (check && !true_current) {  // after a true residual, go on without asking again
      next = cg_phase::true_residual;
      return;
    }
    beta = first ? T(0) : divide(gamma, gamma_previous);
    // p·Ap of the recurrence: δ − β·γ/α_previous.
    const T pap = first ? s.delta : s.delta - multiply_rounded(beta, divide(gamma, alpha_previous));
    if (!(pap > T(0))) {
      // On an SPD matrix the recurrences' p·Ap can still turn non-positive:
      // their rounding errors grow (f32, 27-point Poisson from g = 64: at
      // iteration 80). Restart them from the true residual, as a failed
      // convergence check does. Only on fresh recurrences -- the first gather
      // after a (re)start, where p·Ap = u·A·u comes from the vectors
      // themselves -- is it a breakdown of A. Each restart follows at least
      // one iteration, so max_iterations bounds them.
      if (finite(pap) && !first) {
        next = cg_phase::true_residual;
        return;
      }
      status = finite(pap) ? cg_status::breakdown : cg_status::non_finite;
      next = cg_phase::done;
      return;
    }
    alpha = divide(gamma, pap);
    next = cg_phase::vectors;
  }

  /// Pipelined: after the vector recurrences (x, r, u, w, p, s, q, z).
  TALLY_HD void after_vectors() {
    ++iterations;
    true_current = false;
    first = false;
    gamma_previous = gamma;
    alpha_previous = alpha;
    next = cg_phase::gather;
  }

  /// True when the solve stopped with an x whose true residual is unknown
  /// (a breakdown mid-iteration): run one more true-residual phase.
  TALLY_HD bool needs_final_residual() const {
    return status != cg_status::running && !true_current && status != cg_status::non_finite;
  }

  /// ‖b − A·x‖ / ‖b‖ from the last true residual: 0 when b = 0 (x = 0 solves
  /// it), NaN when ‖b‖ is NaN (a NaN in b; it read 0 before, as if solved).
  TALLY_HD double relative_residual() const { return bnorm == 0 ? 0.0 : divide(root(true_rr), bnorm); }
};

}  // namespace tally::solvers::detail
