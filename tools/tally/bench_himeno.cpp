// `tally bench himeno`: seed 003's figure 8 on this machine. Every gosa
// pattern at sizes XS ... XL, each as a multiple of the original sequential
// loop (pattern 5), with GFLOPS and the share of the 56 B/point floor at the
// read probe's bandwidth. Every row is checked before and after timing
// against one sweep of the original loop from the initial fields: p bit for
// bit (the straightforward port: within 1e-6 relative, nvcc fuses its
// multiply-adds), gosa bit for bit where the summation order is the
// original's or the deterministic tree's; else against the deterministic
// gosa within L·u/2 (u = 2^-24), L the longest chain of float additions the
// pattern can form (gosa_near_deterministic says why). (Float chains of the
// benchmark's near-equal squares stall at L and XL: once the running sum
// passes 2^24 terms' worth, each term is lost whole.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <omp.h>

#include "bench_cli.hpp"
#include "commands.hpp"
#include "cpu.hpp"
#include "device_memory.cuh"
#include "gpu.hpp"
#include "gpu_harness.cuh"
#include "himeno_shared.hpp"
#include "measure.hpp"
#include "problem.hpp"
#include "row_tiling.hpp"
#include "tiling.hpp"

namespace tally::cli {

namespace {

using namespace tally::himeno;

constexpr const char* kSerial = "(5) cpu-serial";
/// Sizes at and above which the CPU rows time single sweeps, few trials.
constexpr std::int64_t kLargeInterior = 10'000'000;

struct bench_himeno_options {
  bench_options common;
  std::vector<std::string> sizes = {"XS", "S", "M", "L", "XL"};
  int cpu_trials_large = 3;
};

std::string label(gpu_pattern p) {
  switch (p) {
    case gpu_pattern::warp_aggregated: return "(1) warp-aggregated";
    case gpu_pattern::atomic: return "(2) atomic";
    case gpu_pattern::host_serial: return "(3) host";
    case gpu_pattern::host_openmp: return "(4) host-openmp";
    default: return std::string(name_of(p));
  }
}

/// One sweep of the original loop from the initial fields: what every row must reproduce.
struct reference {
  std::vector<float> p;
  float gosa_original = 0;       // the original loop's sum
  float gosa_deterministic = 0;  // the deterministic tree over the same squares
};

/// Warp-level atomic_add calls of one sweep, at most: two a warp on every tile
/// plane (tile sweep) or on every row segment's plane (row sweeps).
double warp_calls(const grid_size& g) {
  const tiling t = tiling_of(g);
  const double tiles = 2.0 * kTileJ * static_cast<double>(t.tiles()) * t.planes;
  const double rows = kRowPoints * (kRowThreads / 32.0) * static_cast<double>(row_tiling_of(g).row_segments()) * t.planes;
  return std::max(tiles, rows);
}

void restore_initial(host_fields& f) {
  const grid_size& g = f.size;
  for (int i = 0; i < g.mi; ++i) {
    const float v = initial_p(i, g);
    const std::int64_t first = f.at(i, 0, 0), last = f.at(i + 1, 0, 0);
    std::fill(f.p.begin() + first, f.p.begin() + last, v);
    std::fill(f.wrk2.begin() + first, f.wrk2.begin() + last, v);
  }
}

/// p compared with the reference: bit for bit, or within `relative`.
bench::check compare_p(const std::vector<float>& got, const std::vector<float>& want, double relative) {
  double worst = 0;
  std::int64_t worst_at = -1;
  for (std::size_t x = 0; x < want.size(); ++x) {
    if (relative == 0) {
      if (std::memcmp(&got[x], &want[x], sizeof(float)) != 0)
        return bench::check::fail("p differs at flat index " + std::to_string(x));
      continue;
    }
    const double d = std::abs(static_cast<double>(got[x]) - want[x]) / (1.0 + std::abs(want[x]));
    if (!(d <= worst)) worst = d, worst_at = static_cast<std::int64_t>(x);
  }
  if (relative > 0 && !(worst <= relative))
    return bench::check::fail("p differs by " + std::to_string(worst) + " at " + std::to_string(worst_at), worst,
                              relative);
  return bench::check::pass(relative == 0 ? "p bit-equal" : "p within bound", worst, relative);
}

bench::check gosa_bit_equal(float got, float want) {
  if (std::memcmp(&got, &want, sizeof got) == 0) return bench::check::pass("gosa bit-equal");
  return bench::check::fail("gosa " + std::to_string(got) + " != " + std::to_string(want));
}

/// gosa summed in some order whose longest chain of float additions is
/// `chain` (L), against the deterministic gosa `det` (a tree: within γ_64 of
/// the exact sum). The benchmark's squares are nearly equal (the first
/// sweep's are one value up to rounding), so a chain's rounding errors do not
/// cancel as a random walk's would (sqrt(L)·u): each addition moves the
/// running sum by at most half an ulp, with a sign that holds while the sum
/// stays in one binade, up to 3/8·L·u for equal terms. Measured on the
/// squares of sweeps 1-4 at XS, S and M (serial, shuffled and
/// block-interleaved orders, OpenMP splits of 2-256 threads): up to 0.17·L·u,
/// 30-75 times sqrt(L)·u. So the bound is L·u/2 + γ_64; past L·u = 1/2 the
/// sum stalls (a term below half an ulp of it is lost whole) and only a
/// finite gosa >= 0 is asked for.
bench::check gosa_near_deterministic(float got, float det, double chain) {
  constexpr double u = 0x1p-24;
  if (!(got >= 0) || !std::isfinite(got)) return bench::check::fail("gosa " + std::to_string(got) + " not finite >= 0");
  const double error = std::abs(static_cast<double>(got) - det) / det;
  if (chain * u > 0.5) return bench::check::pass("gosa finite (chain too long for a rounding bound)", error, NAN);
  const double bound = chain * u / 2 + 64 * u / (1 - 64 * u);
  if (error <= bound) return bench::check::pass("gosa near the deterministic one", error, bound);
  return bench::check::fail("gosa " + std::to_string(got) + " vs deterministic " + std::to_string(det), error, bound);
}

/// Longest float-addition chain of an OpenMP reduction over n terms.
double openmp_chain(std::int64_t n) {
  const int t = omp_get_max_threads();
  return static_cast<double>((n + t - 1) / t + t);
}

bench::check both(const bench::check& p, const bench::check& gosa) {
  if (!p.ok()) return p;
  if (!gosa.ok()) return gosa;
  return bench::check::pass(p.detail + ", " + gosa.detail, gosa.error, gosa.bound);
}

void add_metrics(bench::report& r, double probe_gbps) {
  for (auto& row : r.rows) {
    if (!row.time.measured()) continue;
    const grid_size g = size_by_name(row.params.at("size").get<std::string>());
    const double seconds = row.time.median_us * 1e-6;
    row.set_metric("GFLOPS", g.flops_per_sweep() / seconds * 1e-9);
    const bench::row* serial = r.find(kSerial, row.params);
    row.set_metric("x(5)", serial && serial->time.measured() ? serial->time.median_us / row.time.median_us : NAN);
    row.set_metric("%floor", probe_gbps > 0 ? 100.0 * g.floor_bytes_per_sweep() / (probe_gbps * 1e9) / seconds : NAN);
  }
}

/// The lines a reader wants first: the cost of the deterministic gosa, (1) against (2), the bars.
void add_summary(bench::report& r, const std::vector<std::string>& sizes) {
  auto time_of = [&](const std::string& impl, const std::string& size) {
    const bench::row* row = r.find(impl, bench::json{{"size", size}});
    return row && row->time.measured() ? row->time.median_us : NAN;
  };
  for (const auto& size : sizes) {
    const double det = time_of("deterministic", size), none = time_of("none", size);
    const double wa = time_of(label(gpu_pattern::warp_aggregated), size), at = time_of(label(gpu_pattern::atomic), size);
    if (std::isnan(det)) continue;
    const double gflops = size_by_name(size).flops_per_sweep() / (det * 1e-6) * 1e-9;
    char line[300];
    std::snprintf(line, sizeof line,
                  "%s: deterministic %.0f GFLOPS, gosa costs %+.1f %% over none; (1) warp-aggregated is %.2fx "
                  "(2) atomic; deterministic is %.2fx (1)",
                  size.c_str(), gflops, 100.0 * (det / none - 1), at / wa, wa / det);
    r.notes.emplace_back(line);
    const double bar = size == "L" || size == "XL" ? 1600 : size == "M" ? 1450 : 0;
    if (bar > 0)
      r.notes.push_back(size + ": bar " + std::to_string(static_cast<int>(bar)) + " GFLOPS with the deterministic gosa: " +
                        (gflops >= bar ? "met" : "NOT met"));
  }
}

void run_bench_himeno(const bench_himeno_options& o) {
  const std::string command = "tally bench himeno";
  std::vector<grid_size> grids;
  for (const auto& s : o.sizes) grids.push_back(size_by_name(s));  // every name checked before any work
  const bool gpu = use_gpu(o.common, command);

  bench::report r = start_report(command, gpu, o.common);
  r.settings.update(bench::json{{"sizes", o.sizes},
                                {"sweep_variant", "default_variant(size): rows-2 below L, rows-3 from L"},
                                {"cpu_rows_large", "one sweep a call, " + std::to_string(o.cpu_trials_large) +
                                                       " trials, no warm-up, from 10^7 interior points (L, XL)"}});
  r.check_mode =
      "one sweep from the initial fields against the original loop: p bit-equal (baseline: 1e-6 relative), gosa "
      "bit-equal for (5), (3) and deterministic, else within L u / 2 of the deterministic gosa, L its longest "
      "float-addition chain";
  r.header = {"one call = one sweep (gosa included); x(5) = time of (5) / time of the row; %floor = time of 56 "
              "B/point at the read probe's bandwidth / time of the row"};

  std::unique_ptr<bench::owned_stream> stream;
  double probe_gbps = 0;
  if (gpu) {
    stream = std::make_unique<bench::owned_stream>();
    std::size_t probe_bytes = 0;
    probe_gbps = himeno_read_probe_gbps(stream->get(), o.common.trials.trials, &probe_bytes);
    r.settings["read_probe_gbps"] = probe_gbps;
    r.settings["read_probe_bytes"] = probe_bytes;
    r.header.push_back("read probe: " + std::to_string(probe_gbps) + " GB/s (16-byte loads over " +
                       std::to_string(probe_bytes >> 20) + " MiB)");
    bench::warm_up_clocks();
  }

  for (std::size_t s = 0; s < grids.size(); ++s) {
    const grid_size g = grids[s];
    bench::row proto;
    proto.benchmark = "himeno";
    proto.params = {{"size", o.sizes[s]}};
    proto.bytes = g.floor_bytes_per_sweep();

    host_fields f = make_host_fields(g);
    reference ref;
    {
      std::vector<float> squares(static_cast<std::size_t>(g.interior()));
      ref.gosa_original = sweep_recording_squares(f, squares.data());
      ref.gosa_deterministic = deterministic_gosa(squares.data(), g, kMaxUnits, tree_of(default_variant(g)));
      ref.p = f.p;
      restore_initial(f);
    }

    // The CPU rows: single sweeps at the large sizes, so the bench stays inside minutes.
    bench::trial_settings cpu_settings = o.common.trials;
    if (g.interior() >= kLargeInterior) cpu_settings = {o.cpu_trials_large, 1.0, 0};
    bench::harness host = bench::host_harness(r, cpu_settings);
    float cpu_gosa = 0;
    for (bool parallel : {false, true}) {
      bench::peer p;
      p.name = parallel ? "(6) cpu-openmp" : kSerial;
      p.note = parallel ? "OpenMP collapse(2) + reduction" : "the original loop, one core";
      p.reset = [&f] { restore_initial(f); };
      p.run = [&f, &cpu_gosa, parallel] { cpu_gosa = parallel ? sweep_openmp(f, 1) : sweep_original(f, 1); };
      p.verify = [&f, &ref, &cpu_gosa, parallel, g] {
        return both(compare_p(f.p, ref.p, 0),
                    parallel ? gosa_near_deterministic(cpu_gosa, ref.gosa_deterministic, openmp_chain(g.interior()))
                             : gosa_bit_equal(cpu_gosa, ref.gosa_original));
      };
      bench::measure(host, p, proto);
    }
    if (!gpu) continue;

    std::unique_ptr<gpu_problem> problem;
    try {
      problem = std::make_unique<gpu_problem>(g, true, stream->get());
    } catch (const invalid_argument& e) {  // does not fit: say so in every GPU row
      for (gpu_pattern pattern : kGpuPatterns) bench::add_not_run(r, proto, label(pattern), e.what());
      continue;
    }
    bench::harness device = bench::gpu_harness(r, stream->get(), o.common.trials);
    for (gpu_pattern pattern : kGpuPatterns) {
      bench::peer p;
      p.name = label(pattern);
      if (pattern == gpu_pattern::baseline) p.note = "two kernels a sweep (compute, copy back) + a memset, atomicAdd";
      if (pattern == gpu_pattern::host_serial || pattern == gpu_pattern::host_openmp)
        p.note = "ss² copied to pinned host memory and summed there, every sweep";
      gpu_problem* gp = problem.get();
      p.reset = [gp] { gp->reset(); };
      p.run = [gp, pattern] { gp->run(pattern, 1); };
      p.verify = [gp, pattern, &ref, g] {
        const bench::check p_check = compare_p(gp->read_p(), ref.p, pattern == gpu_pattern::baseline ? 1e-6 : 0.0);
        if (pattern == gpu_pattern::none) return p_check;
        const float gosa = gp->gosa();
        const double n = static_cast<double>(g.interior());
        switch (pattern) {
          case gpu_pattern::deterministic: return both(p_check, gosa_bit_equal(gosa, ref.gosa_deterministic));
          case gpu_pattern::host_serial: return both(p_check, gosa_bit_equal(gosa, ref.gosa_original));
          case gpu_pattern::host_openmp:
            return both(p_check, gosa_near_deterministic(gosa, ref.gosa_deterministic, openmp_chain(g.interior())));
          case gpu_pattern::warp_aggregated:  // one aggregated atomic per warp call, each a 32-lane tree
            return both(p_check, gosa_near_deterministic(gosa, ref.gosa_deterministic, warp_calls(g) + 5));
          default:  // atomic, baseline: one atomicAdd a point
            return both(p_check, gosa_near_deterministic(gosa, ref.gosa_deterministic, n));
        }
      };
      bench::measure(device, p, proto);
    }
  }
  add_metrics(r, probe_gbps);
  add_summary(r, o.sizes);
  finish_command(r, o.common);
}

}  // namespace

void add_bench_himeno(CLI::App& bench) {
  auto o = std::make_shared<bench_himeno_options>();
  CLI::App* cmd = bench.add_subcommand(
      "himeno", "the Himeno benchmark (seed 003's figure 8): every gosa pattern at XS..XL as a multiple of pattern 5");
  add_bench_options(*cmd, o->common);
  cmd->add_option("--sizes", o->sizes, "sizes to run (XS S M L XL)")->capture_default_str()->delimiter(',');
  cmd->add_option("--cpu-trials", o->cpu_trials_large, "trials of the CPU rows at L and XL (one sweep each)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->callback([o] { run_reporting_errors("tally bench himeno", [&] { run_bench_himeno(*o); }); });
}

}  // namespace tally::cli
