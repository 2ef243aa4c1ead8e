// `tally bench cg`: seed 004's ladder on this GPU, Eigen on the host, and
// tally's CG on both backends, every row on the same matrix and b in one
// process. Every row takes the bench library's one path (bench/measure.hpp):
// a solve checked on the host (the true relative residual in double, the
// solver's own status, the same iteration count as every earlier solve of
// the row), then timed (CUDA events on the legacy stream for the GPU rows,
// the steady clock for the host rows), then a solve checked again. Without a
// usable GPU (or with --cpu) the host rows run alone. Registered with
// add_bench_cg(bench) (commands.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "bench_cli.hpp"
#include "cli_checks.hpp"
#include "device_memory.cuh"
#include "gpu_harness.cuh"
#include "measure.hpp"
#include "peers/cg_peers.hpp"
#include "solve_cg_problem.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/solvers/solvers.hpp"

namespace tally::cli {
namespace {

struct bench_cg_settings {
  bench_options common;
  std::vector<int> grids{31, 64, 128, 200};
  std::vector<int> f64_grids{31, 128};
  std::vector<std::string> matrices;
  double rtol = 1e-6;
  int cpu_max_grid = 128;  ///< Eigen and tally's CPU rows only up to this grid (g = 200 takes minutes)
  int max_iters = 5000;
  /// Trials of the host rows from kLongHostRows rows on (one solve a trial,
  /// no warm-up: a solve there takes about a second).
  int long_trials = 3;
};

/// Rows (g = 128) from which the host rows time single solves, long_trials of them.
constexpr std::int64_t kLongHostRows = 2'000'000;

int host_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// What one solve reported: its iterations and whether it converged.
struct solve_outcome {
  std::int64_t iterations = 0;
  bool converged = false;
};

/// What the solves of one row did: the iterations of the first, whether a
/// later one differed (the same inputs must take the same path), and whether
/// the solver reported convergence for every one of them.
struct solve_log {
  std::int64_t iterations = -1;
  std::int64_t differing = -1;  ///< the first count that differed from `iterations`, or -1
  bool converged = true;        ///< false once any solve did not converge

  void record(const solve_outcome& o) {
    if (iterations < 0)
      iterations = o.iterations;
    else if (o.iterations != iterations && differing < 0)
      differing = o.iterations;
    converged = converged && o.converged;
  }
};

/// The check of one solve: the solver said it converged, its iteration count
/// never changed, and ‖b − A·x‖ / ‖b‖ (double, on the host) <= 1.5 rtol.
template <class T>
bench::check check_solution(const cg_problem<T>& p, const std::vector<T>& x, const solve_log& log, double rtol,
                            double& relres) {
  relres = verify_relative_residual(p, x);
  const double bound = 1.5 * rtol;
  if (log.differing >= 0)
    return bench::check::fail("iterations changed between solves: " + std::to_string(log.iterations) + " then " +
                              std::to_string(log.differing));
  if (!log.converged) return bench::check::fail("a solve did not report convergence", relres, bound);
  if (!(relres <= bound)) return bench::check::fail("true relative residual above 1.5 rtol", relres, bound);
  return bench::check::pass("true relative residual <= 1.5 rtol", relres, bound);
}

/// The figures of a timed row: iterations, µs an iteration, the true residual
/// over rtol and, for GPU rows, the memory-traffic floor of an iteration and
/// the row's multiple of it.
void add_solve_metrics(bench::row& row, const solve_log& log, double relres, double rtol, double floor_us) {
  const double per_iter = row.time.measured() && log.iterations > 0 ? row.time.median_us / log.iterations : NAN;
  row.set_metric("iters", log.iterations >= 0 ? static_cast<double>(log.iterations) : NAN);
  row.set_metric("us/iter", per_iter);
  row.set_metric("res/rtol", relres / rtol);
  row.set_metric("floor us", floor_us);
  row.set_metric("x floor", per_iter / floor_us);
  row.extra["iterations"] = log.iterations;
  row.extra["relres"] = std::isfinite(relres) ? bench::json(relres) : bench::json(nullptr);
}

/// One row of solves through bench::measure: `peer` named, noted and with its
/// reset; `solve` runs one solve from x = 0 and says what it did; `read_x`
/// returns x on the host. Adds the solve metrics (floor_us NaN: none).
template <class T>
bench::row& measure_solves(bench::harness& h, const bench::row& proto, const cg_problem<T>& p, double rtol,
                           bench::peer peer, const std::function<solve_outcome()>& solve,
                           const std::function<std::vector<T>()>& read_x, double floor_us) {
  solve_log log;
  double relres = NAN;
  peer.run = [&] { log.record(solve()); };
  peer.verify = [&] { return check_solution(p, read_x(), log, rtol, relres); };
  bench::row& row = bench::measure(h, peer, proto);  // before reading relres, which its checks set
  add_solve_metrics(row, log, relres, rtol, floor_us);
  return row;
}

template <class T>
void run_problem(const bench_cg_settings& s, const cg_problem<T>& p, bool gpu, bench::report& r) {
  const std::size_t n = static_cast<std::size_t>(p.rows), bytes = n * sizeof(T);
  bench::row proto;
  proto.benchmark = "cg";
  proto.params = {{"problem", p.name}, {"type", sizeof(T) == 4 ? "f32" : "f64"}};
  proto.extra = {{"n", p.rows}, {"nnz", p.nnz}, {"grid", p.grid}};

  // Eigen and tally on the host.
  const int threads = host_threads();
  if (p.grid <= s.cpu_max_grid) {
    bench::trial_settings settings = s.common.trials;
    if (p.rows >= kLongHostRows) settings = {s.long_trials, 1.0, 0};
    bench::harness host = bench::host_harness(r, settings);
    std::vector<T> x(n);
    for (const bool eigen : {true, false}) {
      bench::peer peer;
      peer.name = eigen ? "eigen" : "tally-cpu";
      peer.note = std::to_string(threads) + " threads";
      peer.reset = [&] { std::fill(x.begin(), x.end(), std::numeric_limits<T>::quiet_NaN()); };
      auto solve = [&]() -> solve_outcome {
        std::fill(x.begin(), x.end(), T(0));
        if (eigen)  // Eigen says nothing of convergence: the residual check decides
          return {bench::cg::eigen_cg(static_cast<int>(p.rows), p.a.offsets.data(), p.a.columns.data(),
                                      p.a.values.data(), p.b.data(), x.data(), s.rtol, s.max_iters, threads),
                  true};
        solvers::cg_options o;
        o.rtol = s.rtol;
        o.max_iterations = s.max_iters;
        const auto result = solvers::cg(tally::cpu, p.a.view(), p.b.data(), x.data(), o);
        return {result.iterations, result.status == solvers::cg_status::converged};
      };
      measure_solves<T>(host, proto, p, s.rtol, peer, solve, [&] { return x; }, NAN);
    }
  }
  if (!gpu) return;

  const double bandwidth = current_device_info().theoretical_bandwidth();
  // The memory-traffic floor of one iteration: the matrix once (values,
  // columns, row offsets) and 11 vector streams (issue 8's 264 bytes a row
  // for the fp32 27-point CSR; 44 matrix-free).
  auto floor_us = [&](bool csr) {
    const double per_row =
        11.0 * sizeof(T) +
        (csr ? static_cast<double>(p.nnz) / p.rows * (sizeof(T) + sizeof(std::int32_t)) + sizeof(std::int32_t) : 0.0);
    return per_row * p.rows / bandwidth * 1e6;
  };
  std::vector<T> dinv(n);
  for (std::int64_t i = 0; i < p.rows; ++i) dinv[i] = T(1) / p.a.view().diagonal(i);
  const solvers::device_csr<T, std::int32_t> a(p.a);
  bench::device_buffer<T> b(p.rows), x(p.rows), d_dinv(p.rows);
  bench::device_buffer<solvers::cg_device_result> result(1);
  TALLY_CUDA(cudaMemcpy(b.data(), p.b.data(), bytes, cudaMemcpyHostToDevice));
  TALLY_CUDA(cudaMemcpy(d_dinv.data(), dinv.data(), bytes, cudaMemcpyHostToDevice));
  // Every GPU row runs on the legacy default stream: the seed's ladder does
  // (and blocks the host every iteration or every 20), tally's solves take
  // the one wait a caller of cg_async() takes, so the events time whole solves.
  bench::harness device = bench::gpu_harness(r, nullptr, s.common.trials);
  auto solution = [&] { return bench::read_back(x.data(), p.rows, nullptr); };

  // (i)-(vi): the seed's ladder (each solve zeroes x itself).
  {
    const bench::cg::device_matrix<T> dm{static_cast<int>(p.rows), static_cast<int>(p.nnz), a.view().offsets,
                                         a.view().columns,         a.view().values,         d_dinv.data()};
    bench::cg::ladder<T> ladder(dm);
    for (const auto rung : bench::cg::kRungs) {
      bench::peer peer;
      peer.name = bench::cg::rung_name(rung);
      peer.note = rung == bench::cg::rung::sample ? "no preconditioner" : "";
      peer.reset = [&] { bench::poison(x.data(), bytes, nullptr); };
      auto solve = [&]() -> solve_outcome {  // the seed's code says nothing of convergence either
        return {ladder.solve(rung, b.data(), x.data(), s.rtol, s.max_iters), true};
      };
      measure_solves<T>(device, proto, p, s.rtol, peer, solve, solution, floor_us(true));
    }
  }
  // tally on the GPU: each mode, CSR and matrix-free (Poisson problems only:
  // a file's matrix has no stencil); a call is x zeroed, cg_async (graph
  // capture included) and the one wait for its result.
  if (!p.has_stencil()) r.notes.push_back(p.name + ": no matrix-free rows (a Matrix Market matrix has no stencil)");
  struct variant {
    const char* name;
    solvers::cg_mode mode;
    int unroll;
    bool pipelined;
  };
  for (const bool free : {false, true}) {
    if (free && !p.has_stencil()) continue;
    for (const variant v : {variant{"persistent", solvers::cg_mode::persistent, 1, false},
                            variant{"graph", solvers::cg_mode::graph, 0, false},
                            variant{"graph-unroll8", solvers::cg_mode::graph, 8, false},
                            variant{"replayed8", solvers::cg_mode::replayed, 8, false},
                            variant{"pipelined", solvers::cg_mode::automatic, 0, true}}) {
      solvers::cg_options o;
      o.rtol = s.rtol;
      o.max_iterations = s.max_iters;
      o.mode = v.mode;
      o.graph_unroll = v.unroll;
      o.pipelined = v.pipelined;
      std::string note;
      solvers::cg_mode ran = v.mode;
      bench::peer peer;
      peer.name = std::string("tally-") + v.name + (free ? "-mf" : "");
      peer.reset = [&] {
        bench::poison(x.data(), bytes, nullptr);
        bench::poison(result.data(), sizeof(solvers::cg_device_result), nullptr);
      };
      auto solve = [&]() -> solve_outcome {
        TALLY_CUDA(cudaMemsetAsync(x.data(), 0, bytes));
        note.clear();
        ran = free ? solvers::cg_async(tally::gpu, p.stencil(), static_cast<const T*>(b.data()), x.data(), o,
                                       result.data(), &note)
                   : solvers::cg_async(tally::gpu, a.view(), static_cast<const T*>(b.data()), x.data(), o,
                                       result.data(), &note);
        solvers::cg_device_result done{};
        TALLY_CUDA(cudaMemcpy(&done, result.data(), sizeof done, cudaMemcpyDeviceToHost));  // the one wait
        return {done.iterations, done.status == static_cast<int>(solvers::cg_status::converged)};
      };
      bench::row& row = measure_solves<T>(device, proto, p, s.rtol, peer, solve, solution, floor_us(!free));
      auto append = [&row](const std::string& text) {
        if (!text.empty()) row.note += (row.note.empty() ? "" : "; ") + text;
      };
      append(note);
      if (v.pipelined || ran != v.mode) append(std::string("ran ") + solvers::mode_name(ran));
      if (ran == solvers::cg_mode::replayed)  // its cost grows with the limit, not with the iterations run
        append(std::to_string(solvers::detail::replayed_bodies(o)) + " bodies of " +
               std::to_string(solvers::detail::graph_unroll_in(o, ran)) +
               " iterations for --max-iters " + std::to_string(o.max_iterations));
    }
  }
}

void run_bench_cg(const bench_cg_settings& s) {
  const std::string command = "tally bench cg";
  const bool gpu = use_gpu(s.common, command);
  bench::report r = start_report(command, gpu, s.common);
  r.settings.update(
      bench::json{{"host_rows_from_2e6_rows", std::to_string(s.long_trials) + " trials of one solve, no warm-up"},
                  {"grids", s.grids},
                  {"f64_grids", s.f64_grids},
                  {"matrices", s.matrices},
                  {"rtol", s.rtol},
                  {"max_iters", s.max_iters},
                  {"cpu_max_grid", s.cpu_max_grid},
                  {"host_threads", host_threads()}});
  r.check_mode =
      "each solve's x on the host: ||b - A x|| / ||b|| in double <= 1.5 rtol, the solver's own status converged, the "
      "same iteration count in every solve of the row";
  r.header = {
      "one call = one solve from x = 0 (GPU: x zeroed on the device, the solve, the one wait for its result); "
      "us/iter = us / iters; res/rtol = the true relative residual / rtol; floor us = an iteration's "
      "memory traffic (the matrix once and 11 vectors; matrix-free: the vectors) at the theoretical "
      "bandwidth; x floor = us/iter / floor us"};
  if (!gpu)
    r.header.push_back("the CPU backend: Eigen and tally-cpu only (the ladder and tally's GPU rows need a GPU)");
  else
    bench::warm_up_clocks();
  std::cerr << command << (gpu ? " on " + current_device_info().name : std::string(" on the host")) << ", rtol "
            << s.rtol << ", " << host_threads() << " host threads\n";
  for (const int g : s.grids) {
    if (!gpu && g > s.cpu_max_grid) {  // no row would run: not even the matrix is built
      r.notes.push_back("g = " + std::to_string(g) + ": not run (above --cpu-max-grid " +
                        std::to_string(s.cpu_max_grid) + ", and the GPU rows need a GPU)");
      continue;
    }
    run_problem(s, poisson_problem<float>(g, 27, true), gpu, r);
    if (std::find(s.f64_grids.begin(), s.f64_grids.end(), g) != s.f64_grids.end())
      run_problem(s, poisson_problem<double>(g, 27, true), gpu, r);
  }
  for (const auto& m : s.matrices) run_problem(s, file_problem<float>(m, ""), gpu, r);
  finish_command(r, s.common);
}

}  // namespace

void add_bench_cg(CLI::App& bench) {
  auto s = std::make_shared<bench_cg_settings>();
  s->common.trials = {5, 10.0, 1};  // a solve lasts milliseconds to a second: fewer trials than the kernels' rows
  CLI::App* cmd = bench.add_subcommand(
      "cg",
      "Seed 004's CG ladder (cuSPARSE + cuBLAS, then fused kernels), Eigen's ConjugateGradient on all host threads, "
      "and tally's CG (CPU; GPU persistent, graph, graph-unroll8, replayed8 and pipelined, CSR and matrix-free) on "
      "27-point Poisson problems and --matrix files (no matrix-free rows for those), Jacobi; every solve checked on "
      "the host before and after timing. Without a GPU (or with --cpu): Eigen and tally-cpu only");
  add_bench_options(*cmd, s->common);
  cmd->add_option("--grids", s->grids, "grid sizes g (g^3 rows), e.g. 31,64")
      ->delimiter(',')
      ->check(CLI::Range(1, 1200))
      ->capture_default_str();
  cmd->add_option("--f64-grids", s->f64_grids, "grids also run in f64 (a grid not in --grids: none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--matrix", s->matrices, "also Matrix Market files (f32, b = A x_true; CSR rows only)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--rtol", s->rtol, "relative tolerance")->check(finite_number(true))->capture_default_str();
  cmd->add_option("--cpu-max-grid", s->cpu_max_grid, "largest grid for the host rows (Eigen, tally-cpu)")
      ->capture_default_str();
  cmd->add_option("--long-trials", s->long_trials, "trials of the host rows from 2e6 rows on (one solve each)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--max-iters", s->max_iters, "iteration limit of every implementation")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  cmd->callback([s] { run_reporting_errors("tally bench cg", [&] { run_bench_cg(*s); }); });
}

}  // namespace tally::cli
