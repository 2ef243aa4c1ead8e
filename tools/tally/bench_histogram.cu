// `tally bench histogram`: seed 003's study on this GPU. 10^7 doubles in
// [0, 1) into 1, 10, ..., 10^7 bins, counts in int32 and double: plain
// atomicAdd, the paper's shuffle aggregation as published, tally's automatic
// choice and each forced strategy, CUB's HistogramEven, the CPU on one
// thread and with OpenMP. Then the paper's general case (a weighted
// scatter-add of doubles, tally's deterministic modes beside it) and skewed
// (Zipf-like) samples. Every row goes through bench::measure (check → time →
// check) against exact references (histogram_inputs.hpp).
//
// CUB at large bin counts runs in a child process (this executable with
// --cub-child): CUB 3.0.1 was seen to fault with an illegal address at 10^7
// bins, which would end this process's CUDA context; in a child the outcome
// is measured and reported, whatever it is.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_cli.hpp"
#include "commands.hpp"
#include "compare.hpp"
#include "device_memory.cuh"
#include "gpu_harness.cuh"
#include "histogram_inputs.hpp"
#include "output.hpp"
#include "peers/hist_peers.hpp"
#include "tally/tally.hpp"

namespace tally::cli {
namespace {

using bench::json;
using bench::row;
using hist_how = bench::peers::hist_atomics;

struct hist_settings {
  bench_options common;
  std::int64_t n = 10'000'000;
  std::int64_t max_bins = 10'000'000;
  /// From this bin count on, CUB runs in a child process (see the file comment).
  std::int64_t cub_isolate_from = 10'000'000;
  bool cpu_rows = true;
  std::uint64_t seed = 0;  ///< 0: drawn at random
  // The child's task (hidden options): run CUB alone on these inputs.
  std::int64_t child_bins = 0;
  std::string child_kind;
};

constexpr histogram_strategy kForced[] = {histogram_strategy::shared_memory, histogram_strategy::cluster_memory,
                                          histogram_strategy::aggregated_atomics, histogram_strategy::plain_atomics,
                                          histogram_strategy::hot_keys};

/// Reads `bins` counts back and compares them with the reference.
template <class C>
bench::check compare_device(const C* device, const std::vector<C>& expected, cudaStream_t stream) {
  return bench::compare_arrays(bench::read_back(device, static_cast<std::int64_t>(expected.size()), stream), expected);
}

/// A peer writing `bins` elements of C at `out`: reset poisons them, verify
/// compares them with `expected` (shared, so peers do not copy it).
template <class C, class Run>
bench::peer output_peer(const std::string& name, C* out, std::shared_ptr<const std::vector<C>> expected,
                        cudaStream_t stream, Run run) {
  bench::peer p;
  p.name = name;
  p.reset = [=] { bench::poison(out, expected->size() * sizeof(C), stream); };
  p.run = std::move(run);
  p.verify = [=] { return compare_device(out, *expected, stream); };
  return p;
}

class histogram_bench {
 public:
  histogram_bench(const hist_settings& s, bool gpu) : s_(s), gpu_(gpu) {
    if (s_.seed == 0) {
      std::random_device entropy;
      seed_ = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
    } else {
      seed_ = s_.seed;
    }
    for (std::int64_t b = 1; b <= s_.max_bins; b *= 10) bin_counts_.push_back(b);
  }

  void run() {
    describe_run();
    if (gpu_)
      run_gpu();
    else
      run_cpu_only();
    bench::add_ratio_to(report_, "plain_atomics");
    bench::add_ratio_to(report_, "cub");
    note_deterministic_cost();
    // The summary goes after the table (gpu-check shows the last lines), so
    // the exit code is raised only after both.
    const int code = bench::finish(report_, s_.common.json_path, std::cout);
    print_summary();
    if (code != 0) {
      std::cerr << "tally bench histogram: " << report_.mismatches << " mismatches, " << report_.failures
                << " failures\n";
      throw CLI::RuntimeError(code);
    }
  }

  /// The child's job: CUB alone on (kind, bins); prints its one row as JSON.
  int run_cub_child() {
    report_.command = "tally bench histogram (CUB child)";
    stream_.emplace();
    auto h = bench::gpu_harness(report_, stream_->get(), s_.common.trials);
    h.progress = false;
    const sample_law law = s_.child_kind == "histogram_zipf" ? sample_law::zipf : sample_law::uniform;
    const samples smp = make_samples(law, s_.child_bins, s_.n, seed_);
    bench::device_buffer<double> x(s_.n);
    bench::device_buffer<int> counts(s_.child_bins);
    TALLY_CUDA(cudaMemcpy(x.data(), smp.x.data(), smp.x.size() * sizeof(double), cudaMemcpyHostToDevice));
    auto expected = std::make_shared<const std::vector<int>>(reference_counts(smp, s_.child_bins));
    bench::measure(h, cub_peer(x.data(), s_.child_bins, counts.data(), expected),
                   proto(s_.child_kind, "i32", s_.child_bins));
    std::cout << kChildMarker << bench::to_json(report_)["rows"][0].dump() << "\n";
    return report_.exit_code();
  }

 private:
  static constexpr const char* kChildMarker = "CUB-CHILD-ROW ";

  void describe_run() {
    report_ = start_report("tally bench histogram", gpu_, s_.common);
    report_.settings.update(bench::json{{"n", s_.n},
                                        {"max_bins", s_.max_bins},
                                        {"cub_isolate_from", s_.cub_isolate_from},
                                        {"cpu_rows", s_.cpu_rows},
                                        {"seed", seed_}});
    report_.check_mode =
        "exact: samples drawn by bin, at least 1 % of a bin width from every edge, counts compared with the bins "
        "drawn; weights multiples of 2^-20 whose sums are exact in any order, sums compared bit for bit";
    if (!gpu_) {
      report_.header = {"CPU backend: histograms of " + std::to_string(s_.n) +
                            " uniform doubles with tally::cpu on one thread (cpu_sequential) and on every OpenMP "
                            "thread (cpu_openmp), and its weighted scatter-add (plain and deterministic).",
                        "us = median µs per call; /best_nondet = deterministic time / the fastest non-deterministic "
                        "row of the same bins."};
      return;
    }
    report_.header = {
        "Histograms of " + std::to_string(s_.n) +
            " doubles in [0,1) (uniform, and Zipf-like 'histogram_zipf'), "
            "and a weighted scatter-add out[index[i]] += w[i] (64-bit indices). Launches: tally's histogram and "
            "scatter kernels launch plainly, as the peers do (programmatic dependent launch is the reductions' "
            "only). Every timed call includes clearing its output (tally's "
            "histograms clear it themselves; the peers and tally's scatter-add run a cudaMemsetAsync first).",
        "us = median µs per call; /plain_atomics and /cub = row time / that peer's time (< 1: faster). CUB from " +
            std::to_string(s_.cub_isolate_from) +
            " bins runs in a child process, so a fault there is measured without ending this run.",
    };
  }

  row proto(const std::string& kind, const std::string& type, std::int64_t bins) const {
    row r;
    r.benchmark = "histogram";
    r.params = {{"kind", kind}, {"count", type}, {"bins", bins}};
    return r;
  }

  // ---- GPU ------------------------------------------------------------------

  void run_gpu() {
    stream_.emplace();
    h_ = bench::gpu_harness(report_, stream_->get(), s_.common.trials);
    host_h_ = bench::host_harness(report_, bench::trial_settings{3, s_.common.trials.trial_ms, 1});
    x_.emplace(s_.n);
    weights_.emplace(s_.n);
    index_.emplace(s_.n);  // 64-bit: 16 bytes read per element, 160 MB
    out_f64_.emplace(s_.max_bins);
    out_i32_.emplace(s_.max_bins);
    const std::vector<double> w = make_weights(s_.n, seed_);
    TALLY_CUDA(cudaMemcpy(weights_->data(), w.data(), w.size() * sizeof(double), cudaMemcpyHostToDevice));
    bench::warm_up_clocks();
    try {
      for (const std::int64_t bins : bin_counts_) {
        std::cerr << "histogram bins=" << bins << "\n";
        const samples uniform = make_samples(sample_law::uniform, bins, s_.n, seed_);
        upload(uniform);
        const auto counts = std::make_shared<const std::vector<int>>(reference_counts(uniform, bins));
        histogram_rows<int>("histogram", "i32", bins, out_i32_->data(), counts);
        const auto counts_f64 = std::make_shared<const std::vector<double>>(counts->begin(), counts->end());
        histogram_rows<double>("histogram", "f64", bins, out_f64_->data(), counts_f64);
        if (s_.cpu_rows) cpu_rows(uniform, bins, counts);
        scatter_rows(uniform, w, bins);

        const samples zipf = make_samples(sample_law::zipf, bins, s_.n, seed_);
        upload(zipf);
        histogram_rows<int>("histogram_zipf", "i32", bins, out_i32_->data(),
                            std::make_shared<const std::vector<int>>(reference_counts(zipf, bins)));
      }
    } catch (const bench::device_lost& e) {
      report_.notes.push_back(e.what());
      ++report_.failures;
    }
  }

  void upload(const samples& s) {
    TALLY_CUDA(cudaMemcpy(x_->data(), s.x.data(), s.x.size() * sizeof(double), cudaMemcpyHostToDevice));
  }

  template <class C>
  void histogram_rows(const std::string& kind, const std::string& type, std::int64_t bins, C* out,
                      std::shared_ptr<const std::vector<C>> expected) {
    const cudaStream_t stream = stream_->get();
    const double* x = x_->data();
    const std::int64_t n = s_.n;
    const row base = proto(kind, type, bins);
    for (const hist_how how : {hist_how::plain, hist_how::paper_shuffle})
      bench::measure(h_,
                     output_peer(how == hist_how::plain ? "plain_atomics" : "paper_shuffle", out, expected, stream,
                                 [=] { bench::peers::hist_even_atomics(how, x, n, bins, 0.0, 1.0, out, stream); }),
                     base);
    const auto call = [=](const histogram_options& o) { histogram_even(gpu.on(stream), x, n, bins, 0.0, 1.0, out, o); };
    tally_row("tally", base, out, expected, call, histogram_options{});
    for (const auto strategy : kForced) {
      histogram_options o;
      o.strategy = strategy;
      tally_row(std::string("tally:") + to_string(strategy), base, out, expected, call, o);
    }
    if constexpr (std::is_same_v<C, int>) {
      if (bins >= s_.cub_isolate_from)
        cub_in_child(base, kind, bins);
      else
        bench::measure(h_, cub_peer(x, bins, out, expected), base);
    }
  }

  bench::peer cub_peer(const double* x, std::int64_t bins, int* out, std::shared_ptr<const std::vector<int>> expected) {
    const cudaStream_t stream = stream_->get();
    const std::int64_t n = s_.n;
    return output_peer("cub", out, expected, stream, [=] {
      const std::string error = bench::peers::cub_hist_even(x, n, bins, 0.0, 1.0, out, stream);
      if (!error.empty()) throw tally::error("cub::DeviceHistogram::HistogramEven: " + error);
    });
  }

  /// One tally row under `opts` (the row records the strategy it ran). A
  /// forced strategy that cannot hold the bins is refused before anything
  /// is queued (invalid_argument naming options.strategy): a "not run" row.
  template <class C, class Call>
  void tally_row(const std::string& name, const row& base, C* out, std::shared_ptr<const std::vector<C>> expected,
                 const Call& call, histogram_options opts) {
    auto chosen = std::make_shared<histogram_strategy>(histogram_strategy::automatic);
    opts.chosen = chosen.get();
    try {
      call(opts);
    } catch (const tally::invalid_argument& e) {
      const std::string why = e.what();
      const auto at = why.find("options.strategy");
      if (at != std::string::npos) {
        bench::add_not_run(report_, base, name, why.substr(at));
        return;
      }
      // any other refusal is a failure, reported by measure() below
    } catch (const std::exception&) {
      // reported by measure() below
    }
    // opts.chosen points at *chosen, which outlives p (both end with this call).
    bench::peer p = output_peer(name, out, expected, stream_->get(), [call, opts] { call(opts); });
    row& r = bench::measure(h_, p, base);
    if (r.time.measured()) {
      r.extra["strategy"] = to_string(*chosen);
      r.note = r.note.empty() ? to_string(*chosen) : std::string(to_string(*chosen)) + "; " + r.note;
    }
  }

  void scatter_rows(const samples& s, const std::vector<double>& w, std::int64_t bins) {
    std::cerr << "scatter_add bins=" << bins << "\n";
    const cudaStream_t stream = stream_->get();
    TALLY_CUDA(cudaMemcpy(index_->data(), s.bin.data(), s.bin.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice));
    const auto expected = std::make_shared<const std::vector<double>>(reference_scatter(s, w, bins));
    const std::int64_t* index = index_->data();
    const double* weights = weights_->data();
    double* out = out_f64_->data();
    const std::int64_t n = s_.n;
    const row base = proto("scatter_add", "f64", bins);
    for (const hist_how how : {hist_how::plain, hist_how::paper_shuffle})
      bench::measure(h_,
                     output_peer(how == hist_how::plain ? "plain_atomics" : "paper_shuffle", out, expected, stream,
                                 [=] { bench::peers::scatter_add_atomics(how, index, weights, n, out, bins, stream); }),
                     base);
    // tally's scatter_reduce accumulates: clear first, as the peers do.
    const auto call = [=](const histogram_options& o) {
      TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(bins) * sizeof(double), stream));
      histogram_options unchecked = o;
      unchecked.checks = check_mode::unchecked;  // no flag read-back: the mode meant for speed
      scatter_reduce(gpu.on(stream), index, weights, n, out, bins, plus{}, unchecked);
    };
    tally_row("tally", base, out, expected, call, histogram_options{});
    histogram_options det;
    det.deterministic = true;
    tally_row("tally:deterministic", base, out, expected, call, det);
    det.fixed_point_bits = 30;  // |w| < 1.5: 2^30·1.5·10^7 < 2^62
    tally_row("tally:deterministic_2^30", base, out, expected, call, det);
    for (const auto strategy : kForced) {
      histogram_options o;
      o.strategy = strategy;
      tally_row(std::string("tally:") + to_string(strategy), base, out, expected, call, o);
    }
  }

  /// CUB in a child process; its row comes back as JSON on its stdout.
  void cub_in_child(const row& base, const std::string& kind, std::int64_t bins) {
    char exe[4096];
    const ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length <= 0) {
      bench::add_failure(h_, base, "cub", "cannot find this executable to start the CUB child");
      return;
    }
    exe[length] = '\0';
    const std::string command = "'" + std::string(exe) + "' bench histogram --cub-child " + std::to_string(bins) +
                                " --cub-child-kind " + kind + " --n " + std::to_string(s_.n) + " --seed " +
                                std::to_string(seed_) + " --trials " + std::to_string(s_.common.trials.trials) +
                                " --trial-ms " + std::to_string(s_.common.trials.trial_ms) + " --gpu 2>&1";
    std::cerr << "[histogram kind=" << kind << " bins=" << bins << "] cub (child process) ..." << std::flush;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) {
      bench::add_failure(h_, base, "cub", "popen failed for the CUB child");
      return;
    }
    std::string output, row_line;
    char buffer[4096];
    while (fgets(buffer, sizeof buffer, pipe)) {
      const std::string line = buffer;
      if (line.rfind(kChildMarker, 0) == 0)
        row_line = line.substr(std::string(kChildMarker).size());
      else
        output += line;
    }
    const int status = pclose(pipe);
    std::string outcome;
    if (status == -1)
      outcome = "pclose failed";
    else if (WIFSIGNALED(status))
      outcome = "killed by signal " + std::to_string(WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0)
      outcome = "exit code " + std::to_string(WEXITSTATUS(status));
    if (!row_line.empty()) {
      const json j = json::parse(row_line, nullptr, false);
      if (!j.is_discarded()) {
        row r = base;
        r.impl = "cub";
        if (j["median_us"].is_number())
          r.time = bench::timing{j["median_us"].get<double>(), j["min_us"].get<double>(), j["max_us"].get<double>(),
                                 j["trials"].get<int>(), j["calls"].get<int>()};
        r.before = {bench::check_status_from_string(j["check_before"]["status"].get<std::string>()),
                    j["check_before"]["detail"].get<std::string>()};
        r.after = {bench::check_status_from_string(j["check_after"]["status"].get<std::string>()),
                   j["check_after"]["detail"].get<std::string>()};
        r.note = "measured in a child process" +
                 (j["note"].get<std::string>().empty() ? "" : "; " + j["note"].get<std::string>());
        for (const auto* c : {&r.before, &r.after})
          if (c->status == bench::check_status::failed) {
            ++report_.mismatches;
            report_.notes.push_back("MISMATCH cub " + bench::describe_params(base.params) + " (child): " + c->detail);
          }
        if (j["note"].get<std::string>().find("error:") != std::string::npos) {
          // CUB returned an error in the child: the peer's own failure.
          r.before.status = bench::check_status::peer_error;
          ++report_.peer_errors;
          report_.notes.push_back("cub " + bench::describe_params(base.params) +
                                  " failed in its child: " + j["note"].get<std::string>());
        }
        std::cerr << (r.time.measured() ? " " + std::to_string(r.time.median_us) + " us\n" : " " + r.note + "\n");
        report_.rows.push_back(std::move(r));
        return;
      }
    }
    // No row: the child died (a fault ends a CUDA context) — CUB's outcome, measured here.
    const std::string tail = output.size() > 400 ? output.substr(output.size() - 400) : output;
    bench::add_peer_error(report_, base, "cub", "CUB's child process " + outcome + "; its output ends: " + tail,
                          "measured in a child process: " + outcome);
    std::cerr << " child " << outcome << "\n";
  }

  // ---- CPU ------------------------------------------------------------------

  void run_cpu_only() {
    host_h_ = bench::host_harness(report_, bench::trial_settings{3, s_.common.trials.trial_ms, 1});
    const std::vector<double> w = make_weights(s_.n, seed_);
    for (const std::int64_t bins : bin_counts_) {
      std::cerr << "cpu histogram bins=" << bins << "\n";
      const samples uniform = make_samples(sample_law::uniform, bins, s_.n, seed_);
      cpu_rows(uniform, bins, std::make_shared<const std::vector<int>>(reference_counts(uniform, bins)));
      const auto expected = std::make_shared<const std::vector<double>>(reference_scatter(uniform, w, bins));
      auto out = std::make_shared<std::vector<double>>(static_cast<std::size_t>(bins));
      const row base = proto("scatter_add", "f64", bins);
      for (const bool deterministic : {false, true}) {
        histogram_options o;
        o.deterministic = deterministic;
        bench::peer p;
        p.name = deterministic ? "cpu_openmp:deterministic" : "cpu_openmp";
        p.reset = [out] { std::fill(out->begin(), out->end(), std::numeric_limits<double>::quiet_NaN()); };
        p.run = [out, &uniform, &w, bins, o] {
          std::fill(out->begin(), out->end(), 0.0);
          scatter_reduce(cpu, uniform.bin.data(), w.data(), static_cast<std::int64_t>(w.size()), out->data(), bins,
                         plus{}, o);
        };
        p.verify = [out, expected] { return bench::compare_arrays(*out, *expected); };
        bench::measure(host_h_, p, base);
      }
    }
  }

  void cpu_rows(const samples& s, std::int64_t bins, std::shared_ptr<const std::vector<int>> expected) {
    auto counts = std::make_shared<std::vector<int>>(static_cast<std::size_t>(bins));
    for (const int threads : {1, 0}) {
      bench::peer p;
      p.name = threads == 1 ? "cpu_sequential" : "cpu_openmp";
      p.reset = [counts] { std::fill(counts->begin(), counts->end(), -1); };
      p.run = [counts, &s, bins, threads] {
        histogram_even(cpu.with_threads(threads), s.x.data(), static_cast<std::int64_t>(s.x.size()), bins, 0.0, 1.0,
                       counts->data());
      };
      p.verify = [counts, expected] { return bench::compare_arrays(*counts, *expected); };
      bench::measure(host_h_, p, proto("histogram", "i32", bins));
    }
  }

  // ---- reading the rows -------------------------------------------------------

  /// Notes each deterministic scatter row's time over the fastest
  /// non-deterministic row of the same bins (the bar: <= 1.5).
  void note_deterministic_cost() {
    for (auto& r : report_.rows) {
      if (r.params.value("kind", "") != "scatter_add" || r.impl.find("deterministic") == std::string::npos ||
          !r.time.measured())
        continue;
      const row* best = nullptr;
      for (const auto& o : report_.rows)
        if (o.params == r.params && o.time.measured() && o.impl.find("deterministic") == std::string::npos &&
            (!best || o.time.median_us < best->time.median_us))
          best = &o;
      if (best) r.set_metric("/best_nondet", r.time.median_us / best->time.median_us);
    }
  }

  /// The lines the performance bar is read from, last on stdout.
  void print_summary() const {
    const auto us = [&](const std::string& impl, const json& params) {
      const row* r = report_.find(impl, params);
      return r && r->time.measured() ? r->time.median_us : std::numeric_limits<double>::quiet_NaN();
    };
    std::printf("\nsummary (us; auto/plain <= 1.03 and auto/cub <= 1 are the bar; det/best <= 1.5)\n");
    for (const char* kind : {"histogram", "histogram_zipf"})
      for (const auto bins : bin_counts_) {
        const json params = {{"kind", kind}, {"count", "i32"}, {"bins", bins}};
        const row* a = report_.find("tally", params);
        if (!a) continue;
        const double t = us("tally", params), p = us("plain_atomics", params), c = us("cub", params);
        std::printf("%-14s i32 bins=%-9lld auto %9.1f %-19s plain %9.1f  cub %9.1f  auto/plain %6.3f  auto/cub %6.3f\n",
                    kind, static_cast<long long>(bins), t, a->extra.value("strategy", "-").c_str(), p, c, t / p, t / c);
      }
    for (const auto bins : bin_counts_) {
      const json params = {{"kind", "scatter_add"}, {"count", "f64"}, {"bins", bins}};
      const row* a = report_.find("tally", params);
      const row* d = report_.find("tally:deterministic", params);
      const row* g = report_.find("tally:deterministic_2^30", params);
      if (!a) continue;
      std::printf(
          "scatter_add    f64 bins=%-9lld auto %9.1f %-19s plain/auto %6.2f  det/best %6.3f  det_2^30/best %6.3f\n",
          static_cast<long long>(bins), us("tally", params), a->extra.value("strategy", "-").c_str(),
          us("plain_atomics", params) / us("tally", params), d ? d->metric("/best_nondet") : NAN,
          g ? g->metric("/best_nondet") : NAN);
    }
  }

  const hist_settings& s_;
  bool gpu_;
  std::uint64_t seed_ = 0;
  std::vector<std::int64_t> bin_counts_;
  std::optional<bench::owned_stream> stream_;  // before the buffers: destroyed after them
  bench::report report_;
  bench::harness h_, host_h_;
  std::optional<bench::device_buffer<double>> x_, weights_, out_f64_;
  std::optional<bench::device_buffer<std::int64_t>> index_;
  std::optional<bench::device_buffer<int>> out_i32_;
};

}  // namespace

void add_bench_histogram(CLI::App& bench) {
  auto s = std::make_shared<hist_settings>();
  s->common.trials = bench::trial_settings{5, 4.0, 2};  // ~270 rows: short trials keep the sweep near a minute
  CLI::App* cmd = bench.add_subcommand(
      "histogram", "histograms and scatter-adds against CUB, plain atomics and the paper's aggregation");
  cmd->footer(
      "Histograms of n doubles into 1, 10, ... max-bins bins (int32 and double counts), a weighted scatter-add, "
      "and Zipf-skewed samples: plain atomics, the paper's warp aggregation, tally (automatic and every strategy, "
      "deterministic modes), CUB, and the CPU; every row checked against exact references before and after "
      "timing.");
  add_bench_options(*cmd, s->common);
  cmd->add_option("--n", s->n, "samples")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31))
      ->capture_default_str();
  cmd->add_option("--max-bins", s->max_bins, "largest bin count (1, 10, ... up to it)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000'000}))
      ->capture_default_str();
  cmd->add_option("--cub-isolate-from", s->cub_isolate_from, "run CUB in a child process from this many bins")
      ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()))
      ->capture_default_str();
  cmd->add_flag_callback(
      "--no-cpu", [s] { s->cpu_rows = false; }, "leave out the CPU rows of a GPU run");
  cmd->add_option("--seed", s->seed, "inputs' seed (0: random)");
  cmd->add_option("--cub-child", s->child_bins, "internal: run CUB alone at this many bins and print its row")
      ->group("");
  cmd->add_option("--cub-child-kind", s->child_kind, "internal: the child's sample law")->group("");
  cmd->callback([s] {
    run_reporting_errors("tally bench histogram", [&] {
      if (s->child_bins > 0) {
        const int code = histogram_bench(*s, true).run_cub_child();
        if (code != 0) throw CLI::RuntimeError(code);
        return;
      }
      const bool gpu = use_gpu(s->common, "tally bench histogram");
      histogram_bench(*s, gpu).run();
    });
  });
}

}  // namespace tally::cli
