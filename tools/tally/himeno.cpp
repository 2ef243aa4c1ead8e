// `tally himeno`: the Himeno benchmark (seed 003, issue 9) run like the
// original program: a rehearsal of 3 sweeps, then enough sweeps for the
// requested time (or a fixed number), gosa after the last one, MFLOPS; plus
// GFLOPS and the share of the 56 B/point memory-traffic floor at the read
// probe's bandwidth (the GPU's, or with --cpu the host's: host_read_probe.hpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "cli_checks.hpp"
#include "commands.hpp"
#include "cpu.hpp"
#include "gpu.hpp"
#include "himeno_shared.hpp"
#include "host_read_probe.hpp"
#include "peers/reduce_peers.hpp"
#include "problem.hpp"
#include "run_info.hpp"
#include "tally/core/error.hpp"
#include "tally/cuda/check.cuh"

namespace tally::cli {

double himeno_read_probe_gbps(cudaStream_t stream, int trials, std::size_t* bytes_used) {
  constexpr std::size_t kGiB = std::size_t{1} << 30, kMinimum = std::size_t{256} << 20;
  std::size_t free_bytes = 0, total = 0;
  TALLY_CUDA(cudaMemGetInfo(&free_bytes, &total));
  std::size_t bytes = std::min(kGiB, free_bytes / 2) & ~std::size_t{15};
  if (bytes < kMinimum) {
    if (bytes_used) *bytes_used = 0;
    return 0;
  }
  void* data = nullptr;
  unsigned* sink = nullptr;
  TALLY_CUDA(cudaMalloc(&data, bytes));
  TALLY_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  double gbps = 0;
  try {
    TALLY_CUDA(cudaMemsetAsync(data, 0x5A, bytes, stream));
    gbps = bench::measure_read_probe(data, bytes, sink, stream, trials, 20.0).gbps;
  } catch (...) {
    cudaFree(data);
    cudaFree(sink);
    throw;
  }
  TALLY_CUDA(cudaFree(data));
  TALLY_CUDA(cudaFree(sink));
  if (bytes_used) *bytes_used = bytes;
  return gbps;
}

namespace {

using namespace tally::himeno;

struct himeno_options {
  std::string size = "M";
  int sweeps = 0;         // 0: as many as fit in `seconds`
  double seconds = 0;     // 0: the default (5 s on the GPU, 20 s on the CPU)
  std::string gosa;       // "": deterministic on the GPU, serial with --cpu
  bool cpu = false;
  std::string json_path;
  double tolerance = -1;  // >= 0: converge on the device
  int blocks = 0;
  std::string variant;    // "": the default sweep variant
};

/// The host read probe's buffer: well past any host's last-level cache.
constexpr std::size_t kHostProbeBytes = std::size_t{256} << 20;

using steady = std::chrono::steady_clock;
double since(steady::time_point start) { return std::chrono::duration<double>(steady::now() - start).count(); }

double mflops(const grid_size& g, int sweeps, double seconds) {
  return g.flops_per_sweep() * sweeps / seconds * 1e-6;
}

/// A run's last gosa and how long it took.
struct timed {
  float gosa;
  double seconds;
};

void run_himeno(const himeno_options& o) {
  const grid_size g = size_by_name(o.size);  // before anything is allocated
  if (o.sweeps < 0) detail::throw_invalid_argument("himeno", "sweeps", "must be at least 1");
  const std::string pattern_name = o.gosa.empty() ? (o.cpu ? "serial" : "deterministic") : o.gosa;
  if (o.cpu && pattern_name != "serial" && pattern_name != "openmp")
    detail::throw_invalid_argument("himeno", "gosa", "is '" + pattern_name + "'; with --cpu: serial or openmp");
  const gpu_pattern pattern = o.cpu ? gpu_pattern::none : gpu_pattern_by_name(pattern_name);
  if (o.tolerance >= 0 && (o.cpu || pattern != gpu_pattern::deterministic))
    detail::throw_invalid_argument("himeno", "tolerance", "converges on the GPU with the deterministic gosa only");
  if (!o.cpu && pattern == gpu_pattern::none && o.tolerance >= 0)
    detail::throw_invalid_argument("himeno", "gosa", "none has no gosa to converge on");
  const double target = o.seconds > 0 ? o.seconds : (o.cpu ? 20.0 : 5.0);
  const sweep_variant variant = o.variant.empty() ? default_variant(g) : sweep_variant_by_name(o.variant);
  const launch_shape shape{o.blocks, true, variant, 0};

  std::printf("mimax = %d mjmax = %d mkmax = %d\n", g.mi, g.mj, g.mk);
  std::printf("imax = %d jmax = %d kmax =%d\n", g.mi - 1, g.mj - 1, g.mk - 1);
  std::printf("gosa pattern: %s on the %s\n", pattern_name.c_str(), o.cpu ? "CPU" : "GPU");
  if (!o.cpu) std::printf("sweep variant: %s\n", std::string(name_of(variant)).c_str());

  nlohmann::ordered_json out;
  out["command"] = "tally himeno";
  out["size"] = o.size;
  out["mimax"] = g.mi, out["mjmax"] = g.mj, out["mkmax"] = g.mk;
  out["backend"] = o.cpu ? "cpu" : "gpu";
  out["gosa_pattern"] = pattern_name;
  if (!o.cpu) out["variant"] = name_of(variant);

  std::unique_ptr<gpu_problem> gpu;
  std::unique_ptr<host_fields> host;
  double probe_gbps = 0;
  if (o.cpu) {
    host = std::make_unique<host_fields>(make_host_fields(g));
    probe_gbps = host_read_probe_gbps(kHostProbeBytes, 5);
    std::printf("read probe: %.1f GB/s over %.0f MiB (host, %d OpenMP threads, %d streams each)\n", probe_gbps,
                kHostProbeBytes / 1048576.0, omp_get_max_threads(), static_cast<int>(kProbeStreams));
  } else {
    const bool host_patterns = pattern == gpu_pattern::host_serial || pattern == gpu_pattern::host_openmp;
    gpu = std::make_unique<gpu_problem>(g, host_patterns);  // checks device memory first
    std::size_t probe_bytes = 0;
    probe_gbps = himeno_read_probe_gbps(gpu->stream(), 5, &probe_bytes);
    if (probe_gbps > 0)
      std::printf("read probe: %.1f GB/s over %.0f MiB (16-byte loads)\n", probe_gbps, probe_bytes / 1048576.0);
    else
      std::printf("read probe: not run (under 256 MiB of device memory left)\n");
    out["metadata"] = bench::gpu_run_metadata();
  }
  // Runs n sweeps and returns {gosa, seconds}, by the wall clock as the
  // original times itself (for the GPU: from the first launch to gosa on the host).
  auto sweeps_of = [&](int n) -> timed {
    const auto start = steady::now();
    float gosa = 0;
    if (o.cpu) {
      gosa = pattern_name == "serial" ? sweep_original(*host, n) : sweep_openmp(*host, n);
    } else {
      gpu->run(pattern, n, shape);
      gosa = pattern == gpu_pattern::none ? 0.0f : gpu->gosa();
      if (pattern == gpu_pattern::none) TALLY_CUDA(cudaStreamSynchronize(gpu->stream()));
    }
    return {gosa, since(start)};
  };

  constexpr int kRehearsal = 3;
  std::printf(" Start rehearsal measurement process.\n");
  std::printf(" Measure the performance in %d times.\n\n", kRehearsal);
  const timed rehearsal = sweeps_of(kRehearsal);
  std::printf(" MFLOPS: %f time(s): %f %e\n\n", mflops(g, kRehearsal, rehearsal.seconds), rehearsal.seconds,
              rehearsal.gosa);

  int sweeps = 0;
  timed run{};
  if (o.tolerance >= 0) {
    const int limit = o.sweeps > 0 ? o.sweeps : 1000000;
    std::printf(" Now, sweep until gosa < %e (at most %d sweeps), tested on the device.\n", o.tolerance, limit);
    gpu->reset();
    const auto start = steady::now();
    const convergence c = gpu->converge(static_cast<float>(o.tolerance), limit, shape);
    run = {c.gosa, since(start)};
    sweeps = c.sweeps;
    std::printf(" %s after %d sweeps\n", c.converged ? "Converged" : "Not converged", c.sweeps);
    out["tolerance"] = o.tolerance;
    out["converged"] = c.converged;
  } else {
    // Clamped to what --sweeps allows before the cast: converting a double
    // past INT_MAX (a long --seconds over a fast rehearsal) is undefined.
    constexpr double kMostSweeps = 1 << 30;
    sweeps = o.sweeps > 0 ? o.sweeps
                          : static_cast<int>(std::clamp(target / (rehearsal.seconds / kRehearsal), 1.0, kMostSweeps));
    std::printf(" Now, start the actual measurement process.\n");
    std::printf(" The loop will be excuted in %d times\n", sweeps);
    std::printf(" This will take about %.0f seconds.\n", sweeps * rehearsal.seconds / kRehearsal);
    std::printf(" Wait for a while\n\n");
    run = sweeps_of(sweeps);
  }
  const double mf = mflops(g, sweeps, run.seconds);
  std::printf(" Loop executed for %d times\n", sweeps);
  if (pattern == gpu_pattern::none && !o.cpu) std::printf(" Gosa : not computed (pattern none)\n");
  else std::printf(" Gosa : %e \n", run.gosa);
  std::printf(" MFLOPS measured : %f\tcpu : %f\n", mf, run.seconds);
  std::printf(" Score based on Pentium III 600MHz using Fortran 77: %f\n", mf / 82.84);
  std::printf(" GFLOPS: %.1f\n", mf * 1e-3);
  double percent = 0;
  if (probe_gbps > 0) {
    const double floor_seconds = g.floor_bytes_per_sweep() * sweeps / (probe_gbps * 1e9);
    percent = 100.0 * floor_seconds / run.seconds;
    std::printf(" Memory-traffic floor (56 B/point at the read probe's %.1f GB/s): %.1f %% reached\n", probe_gbps,
                percent);
  }
  out["sweeps"] = sweeps;
  out["seconds"] = run.seconds;
  out["gosa"] = pattern == gpu_pattern::none && !o.cpu ? nlohmann::ordered_json() : nlohmann::ordered_json(run.gosa);
  out["mflops"] = mf;
  out["gflops"] = mf * 1e-3;
  if (probe_gbps > 0) out["read_probe_gbps"] = probe_gbps, out["percent_of_floor"] = percent;
  if (!o.json_path.empty()) {
    std::ofstream file(o.json_path);
    file << out.dump(2) << "\n";
    if (!file) {
      std::cerr << "tally himeno: could not write " << o.json_path << "\n";
      throw CLI::RuntimeError(1);
    }
  }
}

}  // namespace

void add_himeno(CLI::App& app) {
  auto o = std::make_shared<himeno_options>();
  CLI::App* cmd = app.add_subcommand("himeno", "the Himeno benchmark (seed 003): Jacobi sweeps with gosa every sweep");
  cmd->add_option("--size", o->size, "grid: XS (33x33x65), S, M, L or XL (513x513x1025)")->capture_default_str();
  auto* sweeps = cmd->add_option("--sweeps", o->sweeps, "run exactly N sweeps (with --tolerance: at most N)")
                     ->check(CLI::Range(1, 1 << 30));
  auto* seconds = cmd->add_option("--seconds", o->seconds, "run sweeps for about T seconds (default 5, --cpu 20)")
                      ->check(CLI::Range(1e-3, 1e6));
  sweeps->excludes(seconds);
  cmd->add_option("--gosa", o->gosa,
                  "deterministic (default), warp-aggregated (1), atomic (2), host (3), host-openmp (4), none, "
                  "baseline (the paper's straightforward port); with --cpu: serial (5, default) or openmp (6)");
  cmd->add_flag("--cpu", o->cpu, "run on the CPU: the original loop (serial) or OpenMP");
  cmd->add_option("--json", o->json_path, "also write the result as JSON to FILE")->type_name("FILE");
  cmd->add_option("--tolerance", o->tolerance,
                  "sweep until gosa < TOL, tested on the device every sweep (one CUDA graph, the host waits once)")
      ->check(finite_number(false))
      ->excludes(seconds);
  cmd->add_option("--blocks", o->blocks, "blocks of the fused sweep (default: as many as fit on the device)")
      ->check(CLI::Range(0, 1 << 30));
  // Hidden: the candidate kernels apps/himeno/tune.sh compares (tile, rows-1, rows-2, rows-3).
  cmd->add_option("--variant", o->variant, "sweep kernel variant")->group("");
  cmd->callback([o] {
    try {
      run_himeno(*o);
    } catch (const CLI::Error&) {
      throw;
    } catch (const std::exception& e) {
      std::cerr << "tally himeno: " << e.what() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace tally::cli
