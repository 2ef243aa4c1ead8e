// The per-row work of each CG phase, shared verbatim by the CPU loops and the
// GPU kernels (host and device), so that both compute the same bits. Each
// function does row i's part of its phase and returns row i's leaf of the
// phase's reductions.
//
// `Fresh` reads an element of a vector that other threads wrote earlier in
// the solve (on the GPU the persistent kernel must not read those through the
// non-coherent cache); the matrix and b are read plainly.
#pragma once

#include <cstdint>
#include <limits>

#include "tally/core/config.hpp"
#include "tally/solvers/detail/cg_control.hpp"

namespace tally::solvers::detail {

/// The solve's vectors (all of n elements, in the backend's memory).
template <class T>
struct cg_vectors {
  const T* b;
  T* x;
  T* r;
  T* z;
  T* p[2];  ///< search directions: search phase k reads direction(k) and writes direction(k + 1)
  T* ap;
  T* dinv;  ///< Jacobi: 1 / diagonal (NaN where the diagonal is not positive and finite); none: 1
  std::int64_t n;
  // Pipelined CG only (null otherwise): u is z; p is p[0].
  T* w;  ///< A·u
  T* an; ///< n = A·M·w
  T* s;  ///< A·p
  T* q;  ///< M·s
  T* t;  ///< A·q (the paper's z)

  /// p[k & 1], picked by a select rather than an index: a kernel parameter
  /// indexed at run time is copied into every thread's stack, and the graph
  /// mode's update at g = 200 (500 000 threads) then wrote 120 bytes of local
  /// memory a thread, ~60 MB through L2 to DRAM (ncu: 116 MB written against
  /// the 64 of x and r).
  TALLY_HD_INLINE T* direction(std::int64_t k) const { return (k & 1) != 0 ? p[1] : p[0]; }
};

/// Jacobi's entry of M⁻¹ for the diagonal entry d: 1 / d, or NaN where d is
/// not positive and finite (the set-up's reductions then flag it).
template <class T>
TALLY_HD_INLINE T inverse_diagonal(T d) {
  return (d > T(0) && finite(d)) ? divide(T(1), d) : std::numeric_limits<T>::quiet_NaN();
}

/// r = b − A·x with rows accumulated in double, x_j given by x_at(j).
template <class T, class Op, class XAt>
TALLY_HD_INLINE double residual_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, const XAt& x_at) {
  const double ax = A.template row_product<double>(i, [&](std::int64_t j) { return static_cast<double>(x_at(j)); });
  return static_cast<double>(v.b[i]) - ax;
}

/// Set-up: dinv, r = b − A·x0, z = M·r, both p buffers zero.
template <class T, class Op, class Fresh>
TALLY_HD_INLINE residual_sums<T> setup_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, bool jacobi,
                                           const Fresh& fresh) {
  const T dinv = jacobi ? inverse_diagonal<T>(A.diagonal(i)) : T(1);
  const double rd = residual_row(A, v, i, [&](std::int64_t j) { return fresh(v.x + j); });
  const T r = static_cast<T>(rd);
  const T z = multiply_rounded(dinv, r);
  v.dinv[i] = dinv;
  v.r[i] = r;
  v.z[i] = z;
  v.p[0][i] = T(0);
  v.p[1][i] = T(0);
  const double b = static_cast<double>(v.b[i]);
  return {multiply_rounded(b, b), multiply_rounded(rd, rd), multiply_rounded(r, r), multiply_rounded(r, z)};
}

/// A new search direction from its z and old p: z + β·p, rounded as every
/// backend and kernel computes it.
template <class T>
TALLY_HD_INLINE T direction_value(T z, T p, T beta) {
  return z + multiply_rounded(beta, p);
}

/// A stencil's new search direction from its r and old p: M⁻¹·r + β·p with
/// the constant M⁻¹ `dinv`, rounded as the update rounds z (which a stencil's
/// update does not store): direction_value's bits for that z.
template <class T>
TALLY_HD_INLINE T stencil_direction_value(T dinv, T r, T p, T beta) {
  return direction_value(multiply_rounded(dinv, r), p, beta);
}

/// The new search direction at row j: z_j + β·p_j (p from buffer `from`).
template <class T, class Fresh>
TALLY_HD_INLINE T direction(const cg_vectors<T>& v, const T* from, std::int64_t j, T beta, const Fresh& fresh) {
  return direction_value(fresh(v.z + j), fresh(from + j), beta);
}

/// Search: Ap_i = Σ a_ij·p_j for the new p (which `p_at(j)` gives), stored;
/// leaf p_i·Ap_i.
template <class T, class Op, class Direction>
TALLY_HD_INLINE search_sums<T> search_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, T p_i,
                                          const Direction& p_at) {
  const T ap = A.template row_product<T>(i, p_at);
  v.ap[i] = ap;
  return {multiply_rounded(p_i, ap)};
}

/// x + α·p as the update rounds it (x_{k+1} from x_k and the search's p).
template <class T>
TALLY_HD_INLINE T advanced_x(T x, T p, T alpha) {
  return x + multiply_rounded(alpha, p);
}

/// The update's r −= α·Ap, z = M·r (r, z in place); returns the row's leaves
/// r·r and r·z.
template <class T>
TALLY_HD_INLINE update_sums<T> update_residual_values(T& r, T& z, T ap, T dinv, T alpha) {
  r = r - multiply_rounded(alpha, ap);
  z = multiply_rounded(dinv, r);
  return {multiply_rounded(r, r), multiply_rounded(r, z)};
}

/// One row's update from its values: x += α·p, r −= α·Ap, z = M·r
/// (x, r, z updated in place); returns the row's leaves r·r and r·z.
template <class T>
TALLY_HD_INLINE update_sums<T> update_values(T& x, T& r, T& z, T p, T ap, T dinv, T alpha) {
  x = advanced_x(x, p, alpha);
  return update_residual_values(r, z, ap, dinv, alpha);
}

/// Update of row i (update_values); leaves r·r and r·z.
template <class T>
TALLY_HD_INLINE update_sums<T> update_row(const cg_vectors<T>& v, const T* p, std::int64_t i, T alpha) {
  T x = v.x[i], r = v.r[i], z;
  const update_sums<T> sums = update_values(x, r, z, p[i], v.ap[i], v.dinv[i], alpha);
  v.x[i] = x;
  v.r[i] = r;
  v.z[i] = z;
  return sums;
}

/// True residual: r = b − A·x (double rows, x_j given by x_at(j)), z = M·r;
/// leaves ‖b − A·x‖² (double), r·r, r·z.
template <class T, class Op, class XAt>
TALLY_HD_INLINE residual_sums<T> true_residual_row(const Op& A, const cg_vectors<T>& v, std::int64_t i,
                                                   const XAt& x_at) {
  const double rd = residual_row(A, v, i, x_at);
  const T r = static_cast<T>(rd);
  const T z = multiply_rounded(v.dinv[i], r);
  v.r[i] = r;
  v.z[i] = z;
  return {0.0, multiply_rounded(rd, rd), multiply_rounded(r, r), multiply_rounded(r, z)};
}

}  // namespace tally::solvers::detail

namespace tally::solvers::detail {

/// Pipelined set-up: the standard set-up, and s = q = t = 0 (so that the
/// first recurrences, with β = 0, read finite values).
template <class T, class Op, class Fresh>
TALLY_HD_INLINE residual_sums<T> pipelined_setup_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, bool jacobi,
                                                     const Fresh& fresh) {
  v.s[i] = T(0);
  v.q[i] = T(0);
  v.t[i] = T(0);
  return setup_row(A, v, i, jacobi, fresh);
}

/// Pipelined restart: w = A·u (u is v.z). No reduction (a zero leaf).
template <class T, class Op, class Fresh>
TALLY_HD_INLINE search_sums<T> restart_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, const Fresh& fresh) {
  v.w[i] = A.template row_product<T>(i, [&](std::int64_t j) { return fresh(v.z + j); });
  return {T(0)};
}

/// Pipelined gather: n = A·m with m = M·w (each m_j recomputed as the owner
/// computes it); leaves γ = r·u, δ = w·u, r·r.
template <class T, class Op, class Fresh>
TALLY_HD_INLINE pipelined_sums<T> gather_row(const Op& A, const cg_vectors<T>& v, std::int64_t i, const Fresh& fresh) {
  v.an[i] = A.template row_product<T>(i, [&](std::int64_t j) { return multiply_rounded(fresh(v.dinv + j), fresh(v.w + j)); });
  const T r = v.r[i], u = v.z[i], w = v.w[i];
  return {multiply_rounded(r, u), multiply_rounded(w, u), multiply_rounded(r, r)};
}

/// Pipelined vectors: z = n + βz, q = m + βq, s = w + βs, p = u + βp;
/// x += αp, r −= αs, u −= αq, w −= αz. No reduction (a zero leaf).
template <class T>
TALLY_HD_INLINE search_sums<T> vectors_row(const cg_vectors<T>& v, std::int64_t i, T alpha, T beta) {
  const T w = v.w[i], u = v.z[i];
  const T m = multiply_rounded(v.dinv[i], w);
  const T t = v.an[i] + multiply_rounded(beta, v.t[i]);
  const T q = m + multiply_rounded(beta, v.q[i]);
  const T s = w + multiply_rounded(beta, v.s[i]);
  const T p = u + multiply_rounded(beta, v.p[0][i]);
  v.t[i] = t;
  v.q[i] = q;
  v.s[i] = s;
  v.p[0][i] = p;
  v.x[i] = v.x[i] + multiply_rounded(alpha, p);
  v.r[i] = v.r[i] - multiply_rounded(alpha, s);
  v.z[i] = u - multiply_rounded(alpha, q);
  v.w[i] = w - multiply_rounded(alpha, t);
  return {T(0)};
}

}  // namespace tally::solvers::detail
