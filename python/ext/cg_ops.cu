// cg: tally::solvers::cg on a CSR matrix (float32/float64 values, int32/int64
// indices), its structure checked by the library on either backend
// (cg_options::check_matrix = always: a bad offset or column would otherwise
// make the solver read outside the arrays; the call waits anyway), or on the
// matrix-free Poisson stencil.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <tally/cuda/check.cuh>
#include <tally/solvers/solvers.hpp>

#include "dispatch.cuh"

namespace tally_py {

namespace {

const char* status_name(tally::solvers::cg_status s) {
  using tally::solvers::cg_status;
  switch (s) {
    case cg_status::converged:
      return "converged";
    case cg_status::iteration_limit:
      return "iteration_limit";
    case cg_status::breakdown:
      return "breakdown";
    case cg_status::bad_diagonal:
      return "bad_diagonal";
    case cg_status::non_finite:
      return "non_finite";
    default:
      return "running";
  }
}

/// x = x0 (or zeros), then tally::solvers::cg(A, b, x) on the place's backend.
template <class V, class Op>
cg_report solve(const place& where, const Op& A, const view& b, const view* x0, const view& x, double* history,
                const cg_settings& settings) {
  tally::solvers::cg_options o;
  o.rtol = settings.rtol;
  o.atol = settings.atol;
  o.max_iterations = settings.max_iterations;
  o.true_residual_interval = settings.true_residual_interval;
  o.preconditioner =
      settings.jacobi ? tally::solvers::cg_preconditioner::jacobi : tally::solvers::cg_preconditioner::none;
  o.pipelined = settings.pipelined;
  o.history = history;
  o.check_matrix = tally::solvers::cg_matrix_check::always;
  auto* xs = static_cast<V*>(x.data);
  const auto* bs = static_cast<const V*>(b.data);
  const std::size_t bytes = static_cast<std::size_t>(x.n) * sizeof(V);
  tally::solvers::cg_result r;
  if (where.gpu) {
    if (x0 != nullptr)
      TALLY_CUDA(cudaMemcpyAsync(xs, x0->data, bytes, cudaMemcpyDeviceToDevice, where.stream));
    else
      TALLY_CUDA(cudaMemsetAsync(xs, 0, bytes, where.stream));
    r = tally::solvers::cg(tally::gpu.on(where.stream), A, bs, xs, o);
  } else {
    if (x0 != nullptr)
      std::copy_n(static_cast<const V*>(x0->data), x.n, xs);
    else
      std::fill_n(xs, x.n, V(0));
    r = tally::solvers::cg(tally::cpu, A, bs, xs, o);
  }
  return {r.iterations,
          status_name(r.status),
          tally::solvers::describe(r.status),
          r.relative_residual,
          r.rhs_norm,
          tally::solvers::mode_name(r.mode),
          r.note};
}

}  // namespace

cg_report cg(const place& where, const csr_matrix& A, const view& b, const view* x0, const view& x, double* history,
             const cg_settings& settings) {
  cg_report report{};
  visit_integer(A.offsets.type, "cg", "A (its index arrays)", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    visit_float(A.values.type, "cg", "A (its values)", [&](auto value_tag) {
      using V = typename decltype(value_tag)::type;
      const tally::solvers::csr_view<V, I> matrix{A.rows,
                                                  A.cols,
                                                  A.values.n,
                                                  static_cast<const I*>(A.offsets.data),
                                                  static_cast<const I*>(A.columns.data),
                                                  static_cast<const V*>(A.values.data)};
      report = solve<V>(where, matrix, b, x0, x, history, settings);
    });
  });
  return report;
}

cg_report cg(const place& where, const stencil& A, const view& b, const view* x0, const view& x, double* history,
             const cg_settings& settings) {
  cg_report report{};
  visit_float(b.type, "cg", "b", [&](auto value_tag) {
    using V = typename decltype(value_tag)::type;
    const auto op = tally::solvers::stencil_operator<V>::make(A.g, A.points);
    report = solve<V>(where, op, b, x0, x, history, settings);
  });
  return report;
}

}  // namespace tally_py
