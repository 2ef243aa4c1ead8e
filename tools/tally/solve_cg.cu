// `tally solve cg`: one conjugate-gradient solve, on the GPU (or --cpu), of a
// Poisson problem or a Matrix Market file; prints iterations, the true
// residual (the solver's, and the host's own check), total time and time per
// iteration, and a progress line on stderr once a solve runs past a second
// (solve_progress.hpp). Registered with add_solve_cg(solve) (commands.hpp).
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "cli_checks.hpp"
#include "solve_cg_problem.hpp"
#include "solve_progress.hpp"
#include "tally/cuda/check.cuh"
#include "tally/solvers/solvers.hpp"

namespace tally::cli {
namespace {

struct solve_cg_settings {
  std::string matrix, rhs, json;
  std::int64_t poisson27 = 0, poisson7 = 0;
  std::string precision = "f32", precond = "jacobi", mode = "auto";
  double rtol = 1e-6;
  std::int64_t max_iters = 10000;
  int grid_blocks = 0, graph_unroll = 0;
  bool matrix_free = false, cpu = false;
  double progress_every = 1.0;  ///< seconds between progress lines, the first after one interval
};

/// The most iterations whose residual history the progress line reads
/// (2^24 + 1 doubles: 128 MiB); a larger --max-iters solves without it.
constexpr std::int64_t kMaxProgressIterations = std::int64_t{1} << 24;

constexpr const char* kCommand = "tally solve cg";

struct solve_report {
  solvers::cg_result result;
  double ms = 0;
  double host_relres = 0;
};

/// Solves on the GPU twice from x = 0, timing the second solve; `history`
/// (mapped, or null: no progress line) is o.history's memory.
template <class T, class Op>
solve_report solve_gpu(const Op& op, const cg_problem<T>& p, const solvers::cg_options& o, residual_history* history,
                       double progress_every) {
  const std::size_t bytes = p.b.size() * sizeof(T);
  T *b = nullptr, *x = nullptr;
  TALLY_CUDA(cudaMalloc(&b, bytes));
  TALLY_CUDA(cudaMalloc(&x, bytes));
  solve_report r;
  try {
    TALLY_CUDA(cudaMemcpy(b, p.b.data(), bytes, cudaMemcpyHostToDevice));
    // A first solve loads the kernels and sizes the workspace; the second is timed.
    for (int run = 0; run < 2; ++run) {
      TALLY_CUDA(cudaMemset(x, 0, bytes));
      TALLY_CUDA(cudaDeviceSynchronize());
      const progress_line line(history, kCommand, run == 0 ? " into the warm-up solve" : "", progress_every);
      const auto start = std::chrono::steady_clock::now();
      r.result = solvers::cg(tally::gpu, op, static_cast<const T*>(b), x, o);
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    std::vector<T> host(p.b.size());
    TALLY_CUDA(cudaMemcpy(host.data(), x, bytes, cudaMemcpyDeviceToHost));
    r.host_relres = verify_relative_residual(p, host);
  } catch (...) {
    cudaFree(b);
    cudaFree(x);
    throw;
  }
  cudaFree(b);
  cudaFree(x);
  return r;
}

/// Solves on the CPU backend once from x = 0; `history` (host memory, or
/// null: no progress line) is o.history's memory.
template <class T, class Op>
solve_report solve_cpu(const Op& op, const cg_problem<T>& p, const solvers::cg_options& o, residual_history* history,
                       double progress_every) {
  std::vector<T> x(p.b.size(), T(0));
  solve_report r;
  {
    const progress_line line(history, kCommand, "", progress_every);
    const auto start = std::chrono::steady_clock::now();
    r.result = solvers::cg(tally::cpu, op, p.b.data(), x.data(), o);
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  r.host_relres = verify_relative_residual(p, x);
  return r;
}

template <class T>
int run_solve(const solve_cg_settings& s) {
  solvers::cg_options o;
  o.rtol = s.rtol;
  o.max_iterations = s.max_iters;
  o.preconditioner = s.precond == "none" ? solvers::cg_preconditioner::none : solvers::cg_preconditioner::jacobi;
  o.mode = s.mode == "persistent" ? solvers::cg_mode::persistent
           : s.mode == "graph"    ? solvers::cg_mode::graph
           : s.mode == "replayed" ? solvers::cg_mode::replayed
                                  : solvers::cg_mode::automatic;
  o.pipelined = s.mode == "pipelined";
  o.graph_unroll = s.graph_unroll;
  o.grid_blocks = s.grid_blocks;
  const std::int64_t g = s.poisson27 > 0 ? s.poisson27 : s.poisson7;
  const int points = s.poisson27 > 0 ? 27 : 7;
  const cg_problem<T> p = s.matrix.empty() ? poisson_problem<T>(g, points, !s.matrix_free)
                                           : file_problem<T>(s.matrix, s.rhs);
  std::cerr << kCommand << ": " << p.name << ", " << p.rows << " rows, " << p.nnz << " non-zeros, "
            << s.precision << ", " << (s.matrix_free ? "matrix-free" : "CSR") << ", on the "
            << (s.cpu ? "CPU" : "GPU") << (p.rows > (1 << 22) ? " (a long solve: building and solving)" : "")
            << "..." << std::endl;
  std::unique_ptr<residual_history> history;
  if (s.max_iters <= kMaxProgressIterations) {
    history = std::make_unique<residual_history>(s.max_iters + 1, !s.cpu);
    o.history = history->for_solver();
  } else {
    std::cerr << kCommand << ": no progress line above --max-iters " << kMaxProgressIterations << "\n";
  }
  const double every = s.progress_every;
  solve_report r;
  if (s.cpu) {
    r = s.matrix_free ? solve_cpu(p.stencil(), p, o, history.get(), every)
                      : solve_cpu(p.a.view(), p, o, history.get(), every);
  } else if (s.matrix_free) {
    r = solve_gpu(p.stencil(), p, o, history.get(), every);
  } else {
    const solvers::device_csr<T, std::int32_t> a(p.a);
    r = solve_gpu(a.view(), p, o, history.get(), every);
  }
  const double per_iteration = r.result.iterations > 0 ? 1000.0 * r.ms / r.result.iterations : 0.0;
  // --mode pipelined picks the algorithm; the GPU still chooses (or was told)
  // how to run it, which r.result.mode reports.
  const std::string algorithm = o.pipelined ? "pipelined CG" : "CG";
  const std::string backend =
      s.cpu ? "cpu, " + algorithm : "gpu, " + std::string(solvers::mode_name(r.result.mode)) + " mode, " + algorithm;
  std::cout << "problem        " << p.name << " (" << p.rows << " rows, " << p.nnz << " non-zeros)\n"
            << "status         " << solvers::describe(r.result.status) << "\n"
            << "iterations     " << r.result.iterations << "\n"
            << "true residual  " << r.result.relative_residual << " (solver), " << r.host_relres
            << " (host check, double)\n"
            << "total time     " << r.ms << " ms\n"
            << "per iteration  " << per_iteration << " us\n"
            << "backend        " << backend << "\n";
  if (!r.result.note.empty()) std::cout << "note           " << r.result.note << "\n";
  if (!s.json.empty()) {
    nlohmann::json j = {{"command", kCommand},
                        {"problem", p.name},
                        {"rows", p.rows},
                        {"nnz", p.nnz},
                        {"precision", s.precision},
                        {"matrix_free", s.matrix_free},
                        {"backend", s.cpu ? "cpu" : "gpu"},
                        {"mode", s.cpu ? "cpu" : solvers::mode_name(r.result.mode)},
                        {"requested_mode", s.mode},
                        {"pipelined", o.pipelined},
                        {"preconditioner", s.precond},
                        {"rtol", s.rtol},
                        {"status", solvers::describe(r.result.status)},
                        {"converged", r.result.converged()},
                        {"iterations", r.result.iterations},
                        {"relative_residual", r.result.relative_residual},
                        {"host_relative_residual", r.host_relres},
                        {"total_ms", r.ms},
                        {"us_per_iteration", per_iteration}};
    std::ofstream out(s.json);
    out << j.dump(2) << "\n";
    if (!out) {
      std::cerr << kCommand << ": cannot write " << s.json << "\n";
      return 1;
    }
  }
  // The solver's claim must survive the independent check.
  if (r.result.converged() && !(r.host_relres <= 1.5 * s.rtol + 1e-12)) {
    std::cerr << kCommand << ": the host check disagrees with the solver's residual\n";
    return 1;
  }
  return r.result.converged() ? 0 : 3;
}

}  // namespace

void add_solve_cg(CLI::App& solve) {
  auto s = std::make_shared<solve_cg_settings>();
  CLI::App* cmd = solve.add_subcommand(
      "cg",
      "Solve A x = b by conjugate gradient (Jacobi by default) on the GPU or the CPU; b = A x_true for a fixed "
      "pseudo-random x_true unless --rhs is given. A solve that runs past a second prints its iteration and "
      "residual on stderr once a second. Exit code 0 when converged, 3 when not, 1 on errors.");
  auto* matrix = cmd->add_option("--matrix", s->matrix, "Matrix Market file (coordinate real/integer/pattern, "
                                                       "general/symmetric)")->check(CLI::ExistingFile);
  cmd->add_option("--rhs", s->rhs, "right-hand side as a Matrix Market vector (with --matrix)")
      ->check(CLI::ExistingFile)
      ->needs(matrix);
  auto* p27 = cmd->add_option("--poisson27", s->poisson27, "27-point Poisson (HPCG) on a G x G x G grid")
                  ->check(CLI::Range(1, 1200));
  auto* p7 = cmd->add_option("--poisson7", s->poisson7, "7-point Poisson on a G x G x G grid")->check(CLI::Range(1, 1200));
  matrix->excludes(p27)->excludes(p7);
  p27->excludes(p7);
  cmd->add_option("--precision", s->precision, "f32 or f64")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  cmd->add_option("--precond", s->precond, "jacobi or none")->check(CLI::IsMember({"jacobi", "none"}))->capture_default_str();
  cmd->add_option("--rtol", s->rtol, "stop when ||b - A x|| <= rtol ||b|| (true residual)")
      ->check(finite_number(true))
      ->capture_default_str();
  cmd->add_option("--max-iters", s->max_iters, "iteration limit")->check(finite_number(false))->capture_default_str();
  cmd->add_option("--mode", s->mode, "GPU execution: auto, persistent (one cooperative kernel), graph (CUDA graph "
                                     "with a device-side loop), replayed (the graph's body chained max-iters / "
                                     "graph-unroll times, no conditional node) or pipelined (pipelined CG, run "
                                     "in the mode auto picks; on the CPU too)")
      ->check(CLI::IsMember({"auto", "persistent", "graph", "replayed", "pipelined"}))
      ->capture_default_str();
  cmd->add_option("--grid-blocks", s->grid_blocks,
                  "GPU persistent mode: blocks of the cooperative kernel (0: as many as fit; more than fit "
                  "falls back to the graph mode, saying so)")
      ->check(finite_number(false))
      ->capture_default_str();
  cmd->add_option("--graph-unroll", s->graph_unroll,
                  "GPU graph and replayed modes: iterations a body (1..64; 0: " +
                      std::to_string(solvers::kAutomaticGraphUnroll) +
                      " in the graph mode, 1 replayed); the replayed mode chains max-iters / graph-unroll bodies, "
                      "at most " +
                      std::to_string(solvers::kMaxReplayedBodies))
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd->add_flag("--matrix-free", s->matrix_free, "apply the Poisson stencil instead of a matrix (with --poisson27/7)");
  cmd->add_flag("--cpu", s->cpu, "run the CPU backend (OpenMP) instead of the GPU");
  cmd->add_option("--json", s->json, "also write the result as JSON to FILE");
  // Hidden: lets the tests see progress lines without a solve of several seconds.
  cmd->add_option("--progress-every", s->progress_every, "seconds between progress lines, the first after one")
      ->check(CLI::Range(1e-3, 3600.0))
      ->group("");
  cmd->callback([s] {
    if (s->matrix.empty() && s->poisson27 == 0 && s->poisson7 == 0)
      throw CLI::ValidationError(kCommand, "give --matrix FILE, --poisson27 G or --poisson7 G");
    if (s->matrix_free && !s->matrix.empty())
      throw CLI::ValidationError("--matrix-free", "needs --poisson27 or --poisson7");
    int gpus = 0;
    if (!s->cpu && (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)) {
      std::cerr << kCommand << ": no CUDA GPU here; use --cpu\n";
      throw CLI::RuntimeError(1);
    }
    int code = 1;
    try {
      code = s->precision == "f64" ? run_solve<double>(*s) : run_solve<float>(*s);
    } catch (const std::exception& e) {
      std::cerr << kCommand << ": " << e.what() << "\n";
      throw CLI::RuntimeError(1);
    }
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tally::cli
