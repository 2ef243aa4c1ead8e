// `tally bench cg`: seed 004's ladder on this GPU, Eigen on the host, and
// tally's CG on both backends, every row on the same matrix and b in one
// process, every solution's true residual checked on the host (double)
// before it is reported. Registered with add_bench_cg(bench) (commands.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "bench_cli.hpp"
#include "cli_checks.hpp"
#include "peers/cg_peers.hpp"
#include "solve_cg_problem.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/solvers/solvers.hpp"

namespace tally::cli {
namespace {

struct bench_cg_settings {
  std::vector<int> grids{31, 64, 128, 200};
  std::vector<int> f64_grids{31, 128};
  std::vector<std::string> matrices;
  std::string json;
  double rtol = 1e-6;
  int trials = 5;
  int cpu_max_grid = 128;  ///< Eigen and tally's CPU rows only up to this grid (g = 200 takes minutes)
  int max_iters = 5000;
  bool require_gpu = false;  ///< --gpu: no usable GPU is an error (exit kNoGpuExit), not a skip
  bool cpu = false;          ///< --cpu (the default set's CPU run): nothing to run, said so
};

struct cg_row {
  std::string impl, problem, precision, note;
  std::int64_t rows = 0, nnz = 0;
  int grid = 0;
  std::int64_t iterations = 0;
  double total_ms = 0, us_per_iter = 0, relres = 0, floor_us = NAN, ratio_to_floor = NAN;
  bool verified = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int host_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// A solve to time: runs it once and returns its iterations.
using timed_solve = std::function<std::int64_t()>;

/// Median wall time (ms) and iterations of each solve: one warm-up run each,
/// then `trials` runs of each taken in turn (a, b, a, b, ...), so that a
/// change in the host's load falls on all of them alike. A solve's
/// iterations must not change between its runs. Long solves run fewer trials
/// (about 3 s at most for the slowest).
std::vector<std::pair<double, std::int64_t>> time_solves(int trials, const std::vector<timed_solve>& solves) {
  auto once = [](const timed_solve& solve, std::int64_t& iterations) {
    const auto start = std::chrono::steady_clock::now();
    iterations = solve();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<std::pair<double, std::int64_t>> out(solves.size());
  std::vector<std::vector<double>> ms(solves.size());
  double slowest = 0;
  for (std::size_t k = 0; k < solves.size(); ++k) slowest = std::max(slowest, once(solves[k], out[k].second));
  const int n = std::clamp(static_cast<int>(3000.0 / std::max(slowest, 1e-3)), 1, trials);
  for (int t = 0; t < n; ++t) {
    for (std::size_t k = 0; k < solves.size(); ++k) {
      std::int64_t again = 0;
      ms[k].push_back(once(solves[k], again));
      if (again != out[k].second) throw std::runtime_error("iteration count changed between runs");
    }
  }
  for (std::size_t k = 0; k < solves.size(); ++k) out[k].first = median(ms[k]);
  return out;
}

/// time_solves of one solve.
std::pair<double, std::int64_t> time_solve(int trials, const timed_solve& solve) {
  return time_solves(trials, {solve})[0];
}

template <class T>
void run_problem(const bench_cg_settings& s, const cg_problem<T>& p, std::vector<cg_row>& rows, int& failures) {
  const char* precision = sizeof(T) == 4 ? "f32" : "f64";
  const std::size_t n = static_cast<std::size_t>(p.rows), bytes = n * sizeof(T);
  const double bandwidth = current_device_info().theoretical_bandwidth();
  // The memory-traffic floor of one iteration: the matrix once (values,
  // columns, row offsets) and 11 vector streams (issue 8's 264 bytes a row
  // for the fp32 27-point CSR; 44 matrix-free).
  auto floor_us = [&](bool csr) {
    const double per_row = 11.0 * sizeof(T) +
                           (csr ? static_cast<double>(p.nnz) / p.rows * (sizeof(T) + sizeof(std::int32_t)) + sizeof(std::int32_t) : 0.0);
    return per_row * p.rows / bandwidth * 1e6;
  };

  std::vector<T> dinv(n);
  for (std::int64_t i = 0; i < p.rows; ++i) dinv[i] = T(1) / p.a.view().diagonal(i);
  const solvers::device_csr<T, std::int32_t> a(p.a);
  T *b = nullptr, *x = nullptr, *d_dinv = nullptr;
  TALLY_CUDA(cudaMalloc(&b, bytes));
  TALLY_CUDA(cudaMalloc(&x, bytes));
  TALLY_CUDA(cudaMalloc(&d_dinv, bytes));
  TALLY_CUDA(cudaMemcpy(b, p.b.data(), bytes, cudaMemcpyHostToDevice));
  TALLY_CUDA(cudaMemcpy(d_dinv, dinv.data(), bytes, cudaMemcpyHostToDevice));
  std::vector<T> host_x(n);

  auto add = [&](const std::string& impl, bool csr, std::pair<double, std::int64_t> timed, const std::vector<T>& solution,
                 bool is_tally, bool gpu, const std::string& note) {
    cg_row r;
    r.impl = impl;
    r.problem = p.name;
    r.precision = precision;
    r.rows = p.rows;
    r.nnz = p.nnz;
    r.grid = static_cast<int>(p.grid);
    r.iterations = timed.second;
    r.total_ms = timed.first;
    r.us_per_iter = r.iterations > 0 ? 1000.0 * r.total_ms / r.iterations : NAN;
    r.relres = verify_relative_residual(p, solution);
    r.verified = r.relres <= 1.5 * s.rtol;
    if (gpu) {
      r.floor_us = floor_us(csr);
      r.ratio_to_floor = r.us_per_iter / r.floor_us;
    }
    r.note = note;
    if (!r.verified) {
      r.note += (r.note.empty() ? "" : "; ") + std::string("TRUE RESIDUAL ABOVE 1.5 x rtol");
      if (is_tally) ++failures;
    }
    std::cerr << "  " << std::left << std::setw(26) << impl << " " << precision << " " << p.name << ": " << r.iterations
              << " iterations, " << r.total_ms << " ms, relres " << r.relres << "\n";
    rows.push_back(r);
  };
  auto read_x = [&] {
    TALLY_CUDA(cudaMemcpy(host_x.data(), x, bytes, cudaMemcpyDeviceToHost));
    return host_x;
  };

  // (i)-(vi): the seed's ladder.
  {
    const bench::cg::device_matrix<T> dm{static_cast<int>(p.rows), static_cast<int>(p.nnz), a.view().offsets,
                                         a.view().columns, a.view().values, d_dinv};
    bench::cg::ladder<T> ladder(dm);
    for (const auto rung : bench::cg::kRungs) {
      try {
        const auto timed = time_solve(s.trials, [&] { return std::int64_t{ladder.solve(rung, b, x, s.rtol, s.max_iters)}; });
        add(bench::cg::rung_name(rung), true, timed, read_x(), false, true,
            rung == bench::cg::rung::sample ? "no preconditioner" : "");
      } catch (const std::exception& e) {
        std::cerr << "  " << bench::cg::rung_name(rung) << ": " << e.what() << "\n";
      }
    }
  }
  // Eigen and tally on the host.
  const int threads = host_threads();
  if (p.grid <= s.cpu_max_grid) {
    // Timed in turn (see time_solves): the host's load varies between runs
    // (one run measured both 1.5x slower and tally 4x slower than the next).
    std::vector<T> eigen_x(n), mine_x(n);
    solvers::cg_options o;
    o.rtol = s.rtol;
    o.max_iterations = s.max_iters;
    const auto timed = time_solves(
        s.trials,
        {[&] {
          std::fill(eigen_x.begin(), eigen_x.end(), T(0));
          return std::int64_t{bench::cg::eigen_cg(static_cast<int>(p.rows), p.a.offsets.data(), p.a.columns.data(),
                                                  p.a.values.data(), p.b.data(), eigen_x.data(), s.rtol, s.max_iters,
                                                  threads)};
        },
        [&] {
          std::fill(mine_x.begin(), mine_x.end(), T(0));
          return solvers::cg(tally::cpu, p.a.view(), p.b.data(), mine_x.data(), o).iterations;
        }});
    add("eigen", true, timed[0], eigen_x, false, false, std::to_string(threads) + " threads, timed in turn with tally-cpu");
    add("tally-cpu", true, timed[1], mine_x, true, false, std::to_string(threads) + " threads, timed in turn with eigen");
  }
  // tally on the GPU: each mode, CSR and matrix-free. Timed around cg_async
  // (graph capture included) with one wait at the end.
  solvers::cg_device_result* result = nullptr;
  TALLY_CUDA(cudaMalloc(&result, sizeof *result));
  struct variant {
    const char* name;
    solvers::cg_mode mode;
    int unroll;
    bool pipelined;
  };
  for (const bool free : {false, true}) {
    for (const variant v : {variant{"persistent", solvers::cg_mode::persistent, 1, false},
                            variant{"graph", solvers::cg_mode::graph, 1, false},
                            variant{"graph-unroll8", solvers::cg_mode::graph, 8, false},
                            variant{"replayed8", solvers::cg_mode::replayed, 8, false},
                            variant{"pipelined", solvers::cg_mode::automatic, 1, true}}) {
      solvers::cg_options o;
      o.rtol = s.rtol;
      o.max_iterations = s.max_iters;
      o.mode = v.mode;
      o.graph_unroll = v.unroll;
      o.pipelined = v.pipelined;
      std::string note;
      solvers::cg_mode ran = v.mode;
      solvers::cg_device_result r{};
      auto solve = [&]() -> std::int64_t {
        TALLY_CUDA(cudaMemsetAsync(x, 0, bytes));
        ran = free ? solvers::cg_async(tally::gpu, p.stencil(), static_cast<const T*>(b), x, o, result, &note)
                   : solvers::cg_async(tally::gpu, a.view(), static_cast<const T*>(b), x, o, result, &note);
        TALLY_CUDA(cudaMemcpy(&r, result, sizeof r, cudaMemcpyDeviceToHost));  // the one wait
        return r.iterations;
      };
      try {
        const auto timed = time_solve(s.trials, solve);
        std::string impl = std::string("tally-") + v.name + (free ? "-mf" : "");
        if (r.status != static_cast<int>(solvers::cg_status::converged))
          note += (note.empty() ? "" : "; ") + std::string(solvers::describe(static_cast<solvers::cg_status>(r.status)));
        if (v.pipelined) note += (note.empty() ? "" : "; ") + std::string("ran ") + solvers::mode_name(ran);
        else if (ran != v.mode) note += (note.empty() ? "" : "; ") + std::string("ran ") + solvers::mode_name(ran);
        if (ran == solvers::cg_mode::replayed)  // its cost grows with the limit, not with the iterations run
          note += (note.empty() ? "" : "; ") + std::to_string(solvers::detail::replayed_bodies(o)) + " bodies of " +
                  std::to_string(v.unroll) + " iterations for --max-iters " + std::to_string(o.max_iterations);
        add(impl, !free, timed, read_x(), true, true, note);
      } catch (const std::exception& e) {
        std::cerr << "  tally-" << v.name << (free ? "-mf" : "") << ": " << e.what() << "\n";
        ++failures;
      }
    }
  }
  cudaFree(result);
  cudaFree(b);
  cudaFree(x);
  cudaFree(d_dinv);
}

void print_table(const std::vector<cg_row>& rows, std::ostream& out) {
  out << std::left << std::setw(24) << "impl" << std::setw(18) << "problem" << std::setw(5) << "prec" << std::right
      << std::setw(10) << "rows" << std::setw(7) << "iters" << std::setw(11) << "total ms" << std::setw(11) << "us/iter"
      << std::setw(11) << "relres" << std::setw(10) << "floor us" << std::setw(8) << "x floor"
      << "  notes\n";
  for (const auto& r : rows) {
    std::ostringstream line;
    line << std::left << std::setw(24) << r.impl << std::setw(18) << r.problem << std::setw(5) << r.precision
         << std::right << std::setw(10) << r.rows << std::setw(7) << r.iterations << std::setw(11) << std::fixed
         << std::setprecision(3) << r.total_ms << std::setw(11) << std::setprecision(2) << r.us_per_iter << std::setw(11)
         << std::scientific << std::setprecision(2) << r.relres << std::fixed << std::setw(10) << std::setprecision(1)
         << r.floor_us << std::setw(8) << std::setprecision(2) << r.ratio_to_floor << "  " << r.note;
    out << line.str() << "\n";
  }
}

nlohmann::json to_json(const std::vector<cg_row>& rows, const bench_cg_settings& s) {
  const auto& d = current_device_info();
  nlohmann::json j = {{"command", "tally bench cg"},
                      {"device", {{"name", d.name}, {"sm_count", d.sm_count}, {"bandwidth_gbps", d.theoretical_bandwidth() / 1e9}}},
                      {"host_threads", host_threads()},
                      {"rtol", s.rtol},
                      {"rows", nlohmann::json::array()}};
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& r : rows)
    j["rows"].push_back({{"impl", r.impl}, {"problem", r.problem}, {"grid", r.grid}, {"precision", r.precision},
                         {"type", r.precision}, {"n", r.rows}, {"nnz", r.nnz}, {"iterations", r.iterations},
                         {"total_ms", number(r.total_ms)}, {"us_per_iter", number(r.us_per_iter)},
                         {"median_us", number(r.us_per_iter)}, {"relres", number(r.relres)},
                         {"verified", r.verified}, {"floor_us", number(r.floor_us)},
                         {"ratio_to_floor", number(r.ratio_to_floor)}, {"note", r.note}});
  return j;
}

int run_bench_cg(const bench_cg_settings& s) {
  // Every row of this benchmark is a GPU row or compared with one: without a
  // GPU it runs nothing and says so (exit 0, so the default `tally bench` on a
  // CPU-only machine goes on), unless --gpu asked for one.
  int gpus = 0;
  const bool have_gpu = cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0;
  if (s.cpu || !have_gpu) {
    std::cerr << "tally bench cg: not run: the ladder and tally's GPU rows need a CUDA GPU"
              << (have_gpu ? " (--cpu given)" : " (none here)") << "; the CPU CG alone is `tally solve cg --cpu`\n";
    return s.require_gpu && !have_gpu ? kNoGpuExit : 0;
  }
  std::vector<cg_row> rows;
  int failures = 0;
  std::cerr << "tally bench cg on " << current_device_info().name << ", rtol " << s.rtol << ", " << host_threads()
            << " host threads\n";
  for (const int g : s.grids) {
    run_problem(s, poisson_problem<float>(g, 27, true), rows, failures);
    if (std::find(s.f64_grids.begin(), s.f64_grids.end(), g) != s.f64_grids.end())
      run_problem(s, poisson_problem<double>(g, 27, true), rows, failures);
  }
  for (const auto& m : s.matrices) run_problem(s, file_problem<float>(m, ""), rows, failures);
  print_table(rows, std::cout);
  std::cout << "verification: every row's x checked on the host (double); " << failures << " tally row(s) failed\n";
  if (!s.json.empty()) {
    std::ofstream out(s.json);
    out << to_json(rows, s).dump(1) << "\n";
    if (!out) {
      std::cerr << "tally bench cg: cannot write " << s.json << "\n";
      return 1;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

void add_bench_cg(CLI::App& bench) {
  auto s = std::make_shared<bench_cg_settings>();
  CLI::App* cmd = bench.add_subcommand(
      "cg",
      "Seed 004's CG ladder (cuSPARSE + cuBLAS, then fused kernels), Eigen's ConjugateGradient on all host threads, "
      "and tally's CG (CPU; GPU persistent, graph, graph-unroll8, replayed8 and pipelined, CSR and matrix-free) on 27-point Poisson "
      "problems, Jacobi, each solution verified on the host");
  cmd->add_option("--grids", s->grids, "grid sizes g (g^3 rows), e.g. 31,64")->delimiter(',')->capture_default_str();
  cmd->add_option("--f64-grids", s->f64_grids, "grids also run in f64 (a grid not in --grids: none)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--matrix", s->matrices, "also Matrix Market files (f32, b = A x_true)")->check(CLI::ExistingFile);
  cmd->add_option("--rtol", s->rtol, "relative tolerance")->capture_default_str();
  cmd->add_option("--trials", s->trials, "timed solves per row (median; fewer for solves over a second)")
      ->check(finite_number(true))
      ->capture_default_str();
  cmd->add_option("--cpu-max-grid", s->cpu_max_grid, "largest grid for the host rows (Eigen, tally-cpu)")
      ->capture_default_str();
  cmd->add_option("--max-iters", s->max_iters, "iteration limit of every implementation")->capture_default_str();
  cmd->add_option("--json", s->json, "write the rows as JSON to FILE (bench/results/...)");
  auto* gpu_flag = cmd->add_flag("--gpu", s->require_gpu, "fail (exit 3) instead of skipping when no GPU is usable");
  cmd->add_flag("--cpu", s->cpu, "the CPU backend: this benchmark has no CPU-only rows, so it runs nothing")
      ->excludes(gpu_flag);
  cmd->callback([s] {
    int code = 1;
    try {
      code = run_bench_cg(*s);
    } catch (const std::exception& e) {
      std::cerr << "tally bench cg: " << e.what() << "\n";
    }
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tally::cli
