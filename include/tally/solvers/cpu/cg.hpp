// The CPU backend of cg(): OpenMP loops over aligned chunks of rows, each
// loop fused the way the GPU kernels are (SpMV with p·Ap; x, r, z with r·r
// and r·z), every reduction through the fixed tree (detail/host_tree.hpp),
// every scalar decision in detail/cg_control.hpp. Same bits as the GPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "tally/core/backend.hpp"
#include "tally/core/config.hpp"
#include "tally/core/tree.hpp"
#include "tally/cpu/reduce.hpp"
#include "tally/solvers/cg.hpp"
#include "tally/solvers/detail/cg_checks.hpp"
#include "tally/solvers/detail/cg_control.hpp"
#include "tally/solvers/detail/cg_rows.hpp"
#include "tally/solvers/detail/host_tree.hpp"
#include "tally/solvers/operator.hpp"
#include "tally/solvers/validate_csr.hpp"

namespace tally::solvers {

namespace detail {

/// Rows per chunk on the CPU: an aligned power-of-two subtree of the tree
/// (any such size gives the same root), kHostChunkRows unless that leaves
/// the threads fewer than kHostChunksPerThread chunks each: then halved, down
/// to kHostMinChunkRows. (At g = 31, 29 791 rows, 4096-row chunks kept 8 of
/// the H100 host's 16 threads busy.)
inline constexpr std::int64_t kHostChunkRows = 4096;
inline constexpr std::int64_t kHostMinChunkRows = 256;
inline constexpr std::int64_t kHostChunksPerThread = 2;

/// The chunk size for n rows on `threads` threads (see kHostChunkRows).
inline std::int64_t host_chunk_rows(std::int64_t n, int threads) {
  std::int64_t rows = kHostChunkRows;
  while (rows > kHostMinChunkRows && (n + rows - 1) / rows < kHostChunksPerThread * threads) rows /= 2;
  return rows;
}

/// Plain reads (host code; __host__ __device__ only so the shared row
/// functions can call it in either compilation pass).
struct plain_read {
  template <class T>
  TALLY_HD_INLINE T operator()(const T* p) const { return *p; }
};

/// No pass over the rows before reduce_rows' leaves.
struct no_prelude {};

/// Runs prelude(i) for every row (if given), then leaf(i) for every row,
/// chunk by chunk, in one parallel region (a barrier between the two), and
/// returns the tree's root over the leaves (V leaves to a vector).
template <int V, class S, class Leaf, class Prelude = no_prelude>
S reduce_rows(std::int64_t n, int threads, const Leaf& leaf, const Prelude& prelude = {}) {
  const std::int64_t chunk_rows = host_chunk_rows(n, threads);
  const std::int64_t chunks = (n + chunk_rows - 1) / chunk_rows;
  std::vector<S> values(static_cast<std::size_t>(chunks));
#pragma omp parallel num_threads(threads) if (chunks > 1)
  {
    if constexpr (!std::is_same_v<Prelude, no_prelude>) {
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < n; ++i) prelude(i);
    }
    std::vector<S> leaves(static_cast<std::size_t>(chunk_rows)), scratch(static_cast<std::size_t>(chunk_rows / 2));
#pragma omp for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t first = c * chunk_rows, count = std::min(chunk_rows, n - first);
      for (std::int64_t k = 0; k < count; ++k) leaves[k] = leaf(first + k);
      values[c] = chunk_value<V>(leaves.data(), count, scratch.data(), add_sums{});
    }
  }
  return root_value(values, add_sums{});
}

}  // namespace detail

/// Solves A·x = b by (Jacobi-preconditioned) conjugate gradient on the CPU.
/// A is a linear_operator (operator.hpp): a csr_view (host memory), a
/// stencil_operator or the caller's own; b and x hold A.rows elements of host
/// memory, x the initial guess on entry.
/// Pre: A symmetric positive definite for convergence (else a breakdown
/// result); options valid and a CSR matrix's structure valid (checked unless
/// options.check_matrix is never; invalid_argument otherwise, before x is
/// touched).
/// Post: x holds the last iterate (0 when b = 0); the result's status says
/// why it stopped. Same bits as the GPU backend for any thread count.
template <class Op, class T>
cg_result cg(const cpu_backend& backend, const Op& A, const T* b, T* x, const cg_options& options = {}) {
  static_assert(linear_operator<Op>, "tally::solvers::cg: A must model tally::solvers::linear_operator");
  detail::check_cg_arguments(A, b, x, options);
  if constexpr (detail::is_csr_view<Op>)
    if (detail::checks_matrix(options, false)) detail::check_csr_entries(backend, A, "cg", "A");
  constexpr int V = tree::vector_width<T>;
  const std::int64_t n = A.rows;
  const int threads = tally::detail::cpu_reduce::thread_count(backend);
  std::vector<T> r(n), z(n), p0(n), p1(n), ap(n), dinv(n);
  const std::int64_t extra = options.pipelined ? n : 0;
  std::vector<T> w(extra), an(extra), s(extra), q(extra), t(extra);
  const detail::cg_vectors<T> v{b,      x,       r.data(), z.data(), {p0.data(), p1.data()}, ap.data(), dinv.data(), n,
                                w.data(), an.data(), s.data(), q.data(), t.data()};
  const detail::plain_read fresh;
  auto control = detail::cg_control<T>::make(options);
  cg_result result;

  if (n == 0) {  // the empty system: b = 0
    control.start({0.0, 0.0, T(0), T(0)});
  } else {
    control.start(detail::reduce_rows<V, detail::residual_sums<T>>(n, threads, [&](std::int64_t i) {
      return control.pipelined ? detail::pipelined_setup_row(A, v, i, control.jacobi, fresh)
                               : detail::setup_row(A, v, i, control.jacobi, fresh);
    }));
  }
  if (control.status == cg_status::converged && control.bnorm == 0) std::fill(x, x + n, T(0));

  auto true_residual = [&] {
    const auto x_at = [&](std::int64_t j) { return x[j]; };
    control.after_true_residual(detail::reduce_rows<V, detail::residual_sums<T>>(
        n, threads, [&](std::int64_t i) { return detail::true_residual_row(A, v, i, x_at); }));
  };
  while (control.next != detail::cg_phase::done) {
    switch (control.next) {
      case detail::cg_phase::search: {
        const T* from = v.direction(control.searches);
        T* to = v.direction(control.searches + 1);
        const T beta = control.beta;
        // The new direction first (the GPU recomputes it per gather instead:
        // the same bits), then the product with it.
        control.after_search(detail::reduce_rows<V, detail::search_sums<T>>(
            n, threads,
            [&](std::int64_t i) { return detail::search_row(A, v, i, to[i], [&](std::int64_t j) { return to[j]; }); },
            [&](std::int64_t i) { to[i] = detail::direction(v, from, i, beta, fresh); }));
        break;
      }
      case detail::cg_phase::update: {
        const T* p = v.direction(control.searches);
        const T alpha = control.alpha;
        control.after_update(detail::reduce_rows<V, detail::update_sums<T>>(
            n, threads, [&](std::int64_t i) { return detail::update_row(v, p, i, alpha); }));
        break;
      }
      case detail::cg_phase::true_residual: true_residual(); break;
      case detail::cg_phase::restart:
#pragma omp parallel for num_threads(threads) schedule(static) if (n > detail::kHostChunkRows)
        for (std::int64_t i = 0; i < n; ++i) detail::restart_row(A, v, i, fresh);
        control.after_restart();
        break;
      case detail::cg_phase::gather:
        control.after_gather(detail::reduce_rows<V, detail::pipelined_sums<T>>(
            n, threads, [&](std::int64_t i) { return detail::gather_row(A, v, i, fresh); }));
        break;
      case detail::cg_phase::vectors: {
        const T alpha = control.alpha, beta = control.beta;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > detail::kHostChunkRows)
        for (std::int64_t i = 0; i < n; ++i) detail::vectors_row(v, i, alpha, beta);
        control.after_vectors();
        break;
      }
      case detail::cg_phase::done: break;
    }
  }
  if (control.needs_final_residual()) true_residual();

  result.iterations = control.iterations;
  result.status = control.status;
  result.relative_residual = control.relative_residual();
  result.rhs_norm = control.bnorm;
  detail::note_overflow<T>(result);
  return result;
}

}  // namespace tally::solvers
