// `tally bench histogram`: seed 003's study on this GPU. 10^7 uniform doubles
// in [0, 1) into 1, 10, ..., 10^7 bins, counts in int32 and double: plain
// atomicAdd, the paper's shuffle aggregation as published, tally's automatic
// choice and each forced strategy, CUB's HistogramEven, the CPU on one thread
// and with OpenMP. Then the paper's general case (a weighted scatter-add of
// doubles, tally's deterministic mode beside it) and skewed (Zipf-like)
// samples. Table on stdout, progress on stderr, JSON rows with --json FILE;
// the last lines of stdout summarise each bin count against the performance
// bar (auto vs plain atomics and CUB; deterministic vs the best
// non-deterministic scatter-add). A row that cannot run (a strategy whose bins
// do not fit, CUB above --cub-max-bins) is kept as a "not run" row; a CUDA
// failure ends the sweep but the table and JSON are still written.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "commands.hpp"
#include "peers/hist_peers.hpp"
#include "tally/cpu/histogram.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/histogram.cuh"
#include "tally/histogram.hpp"
#include "timing.cuh"

namespace tally::cli {
namespace {

struct hist_row {
  std::string impl, kind, count_type, strategy, note;
  std::int64_t bins = 0;
  double median_us = 0;
};

struct hist_settings {
  std::int64_t n = 10'000'000;
  std::int64_t max_bins = 10'000'000;
  /// CUB 3.0.1's HistogramEven faults (illegal address, which poisons the
  /// context) at 10^7 bins on the H100: not called above this by default.
  std::int64_t cub_max_bins = 1'000'000;
  std::string json_path;
  bool cpu = true;
};

/// Trials and trial length of every GPU row: short, so the whole sweep stays
/// within about a minute (~230 rows).
constexpr int kTrials = 5;
constexpr double kTrialMs = 4.0;

template <class Call>
double median_us(Call&& call) {
  return bench::time_calls(nullptr, call, kTrials, kTrialMs).median_us;
}

const char* kUsage =
    "usage: tally bench histogram [--json FILE] [--n 10000000] [--max-bins 10000000] [--cub-max-bins 1000000]\n"
    "                             [--no-cpu]\n"
    "  Histograms of n uniform doubles in [0,1) into 1, 10, ... max-bins bins (int32 and double counts),\n"
    "  a weighted scatter-add of doubles, and Zipf-skewed samples: plain atomics, the paper's warp\n"
    "  aggregation, tally (automatic and every strategy), CUB, and the CPU. CUB is not called above\n"
    "  --cub-max-bins (its HistogramEven faults at 10^7 bins on an H100, which ends the process).\n";

bool parse(int argc, char** argv, hist_settings& s) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--json" && has_value) s.json_path = argv[++i];
    else if (arg == "--n" && has_value) s.n = std::stoll(argv[++i]);
    else if (arg == "--max-bins" && has_value) s.max_bins = std::stoll(argv[++i]);
    else if (arg == "--cub-max-bins" && has_value) s.cub_max_bins = std::stoll(argv[++i]);
    else if (arg == "--no-cpu") s.cpu = false;
    else {
      std::cerr << kUsage;
      return false;
    }
  }
  return s.n > 0 && s.max_bins > 0;
}

/// Median wall time of `runs` calls of f (CPU rows), in µs.
double time_host(const std::function<void()>& f, int runs = 3) {
  f();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Samples of a Zipf-like law over the bins (P(k) ≈ ∝ 1/(k+1)^1.1, drawn by
/// inverting the continuous law's CDF: O(1) per sample, so 10^7 bins cost
/// no more than 1), mapped to their bins' centres in [0, 1).
std::vector<double> zipf_samples(std::int64_t n, std::int64_t bins, std::mt19937_64& rng) {
  // CDF of density ∝ x^-1.1 on [1, bins + 1): F(x) = (1 - x^-0.1) / (1 - (bins+1)^-0.1).
  const double top = 1.0 - std::pow(static_cast<double>(bins) + 1.0, -0.1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) {
    const double at = std::pow(1.0 - u(rng) * top, -10.0);  // in [1, bins + 1)
    const auto k = std::clamp<std::int64_t>(static_cast<std::int64_t>(at) - 1, 0, bins - 1);
    v = (static_cast<double>(k) + 0.5) / static_cast<double>(bins);
  }
  return x;
}

bool is_deterministic(const hist_row& r) { return r.impl.rfind("tally:deterministic", 0) == 0; }

void print_table(const std::vector<hist_row>& rows) {
  // Ratios against the plain-atomics and CUB rows of the same kind, bins and count type.
  std::map<std::string, double> plain, cub;
  const auto key = [](const hist_row& r) { return r.kind + "/" + r.count_type + "/" + std::to_string(r.bins); };
  for (const auto& r : rows) {
    if (r.impl == "plain_atomics" && r.median_us > 0) plain[key(r)] = r.median_us;
    if (r.impl == "cub" && r.median_us > 0) cub[key(r)] = r.median_us;
  }
  std::printf("%-26s %-14s %10s %5s %12s %9s %9s  %s\n", "impl", "kind", "bins", "count", "median_us", "vs_plain",
              "vs_cub", "strategy / note");
  for (const auto& r : rows) {
    const auto p = plain.find(key(r));
    const auto c = cub.find(key(r));
    char vs_plain[32] = "-", vs_cub[32] = "-";
    if (p != plain.end() && r.median_us > 0) std::snprintf(vs_plain, sizeof vs_plain, "%.3f", r.median_us / p->second);
    if (c != cub.end() && r.median_us > 0) std::snprintf(vs_cub, sizeof vs_cub, "%.3f", r.median_us / c->second);
    std::printf("%-26s %-14s %10lld %5s %12.2f %9s %9s  %s%s%s\n", r.impl.c_str(), r.kind.c_str(),
                static_cast<long long>(r.bins), r.count_type.c_str(), r.median_us, vs_plain, vs_cub,
                r.strategy.c_str(), r.note.empty() ? "" : " ", r.note.c_str());
  }
}

/// The row of `impl` for (kind, type, bins), or null.
const hist_row* find_row(const std::vector<hist_row>& rows, const std::string& impl, const std::string& kind,
                         const std::string& type, std::int64_t bins) {
  for (const auto& r : rows)
    if (r.impl == impl && r.kind == kind && r.count_type == type && r.bins == bins) return &r;
  return nullptr;
}

/// The fastest non-deterministic row (peers included) for (kind, type, bins), or null.
const hist_row* best_non_deterministic(const std::vector<hist_row>& rows, const std::string& kind,
                                       const std::string& type, std::int64_t bins) {
  const hist_row* best = nullptr;
  for (const auto& r : rows)
    if (r.kind == kind && r.count_type == type && r.bins == bins && r.median_us > 0 && !is_deterministic(r) &&
        (!best || r.median_us < best->median_us))
      best = &r;
  return best;
}

/// The compact lines the performance bar is read from: one per bin count and
/// kind, printed last. "-" where a row did not run.
void print_summary(const std::vector<hist_row>& rows, const std::vector<std::int64_t>& bin_counts) {
  const auto us = [](const hist_row* r) {
    char text[32] = "-";
    if (r && r->median_us > 0) std::snprintf(text, sizeof text, "%.1f", r->median_us);
    return std::string(text);
  };
  const auto ratio = [](const hist_row* a, const hist_row* b) {
    char text[32] = "-";
    if (a && b && a->median_us > 0 && b->median_us > 0) std::snprintf(text, sizeof text, "%.3f", a->median_us / b->median_us);
    return std::string(text);
  };
  std::printf("\nsummary (us; ratios are time / time: auto/plain <= 1.03, auto/cub <= 1; plain/auto = speed-up;\n"
              "det/best = deterministic over the fastest non-deterministic row, <= 1.5)\n");
  for (const char* kind : {"histogram", "histogram_zipf"}) {
    for (auto bins : bin_counts) {
      const hist_row* a = find_row(rows, "tally", kind, "i32", bins);
      if (!a) continue;
      const hist_row* p = find_row(rows, "plain_atomics", kind, "i32", bins);
      const hist_row* c = find_row(rows, "cub", kind, "i32", bins);
      std::printf("%-14s i32 bins=%-9lld auto %9s %-19s plain %9s  cub %9s  auto/plain %6s  auto/cub %6s\n", kind,
                  static_cast<long long>(bins), us(a).c_str(), a->strategy.empty() ? "-" : a->strategy.c_str(),
                  us(p).c_str(), us(c).c_str(), ratio(a, p).c_str(), ratio(a, c).c_str());
    }
  }
  for (auto bins : bin_counts) {
    const hist_row* a = find_row(rows, "tally", "scatter_add", "f64", bins);
    if (!a) continue;
    const hist_row* p = find_row(rows, "plain_atomics", "scatter_add", "f64", bins);
    const hist_row* d = find_row(rows, "tally:deterministic", "scatter_add", "f64", bins);
    const hist_row* g = find_row(rows, "tally:deterministic_2^30", "scatter_add", "f64", bins);
    const hist_row* best = best_non_deterministic(rows, "scatter_add", "f64", bins);
    std::printf("scatter_add    f64 bins=%-9lld auto %9s %-19s plain %9s  plain/auto %7s  det %9s det/best %6s  "
                "det_2^30 %9s det/best %6s\n",
                static_cast<long long>(bins), us(a).c_str(), a->strategy.empty() ? "-" : a->strategy.c_str(),
                us(p).c_str(), ratio(p, a).c_str(), us(d).c_str(), ratio(d, best).c_str(), us(g).c_str(),
                ratio(g, best).c_str());
  }
}

void write_json(const std::string& path, const std::vector<hist_row>& rows, const std::string& device, std::int64_t n) {
  std::ofstream out(path);
  out << "{\n  \"command\": \"tally bench histogram\",\n  \"device\": \"" << device << "\",\n  \"n\": " << n
      << ",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out << "    {\"impl\": \"" << r.impl << "\", \"kind\": \"" << r.kind << "\", \"bins\": " << r.bins
        << ", \"count_type\": \"" << r.count_type << "\", \"median_us\": " << r.median_us << ", \"strategy\": \""
        << r.strategy << "\", \"note\": \"" << r.note << "\"}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

constexpr histogram_strategy kForced[] = {histogram_strategy::shared_memory, histogram_strategy::cluster_memory,
                                          histogram_strategy::aggregated_atomics,
                                          histogram_strategy::plain_atomics};

/// Times tally on the GPU under `opts`; the row's strategy is what it ran.
/// A strategy that cannot run this problem (invalid_argument: its bins do
/// not fit) gives a "not run" row instead of ending the sweep.
template <class Call>
hist_row time_tally(const std::string& impl, Call&& call, histogram_options opts) {
  hist_row row;
  row.impl = impl;
  histogram_strategy chosen = histogram_strategy::automatic;
  opts.chosen = &chosen;
  try {
    row.median_us = median_us([&] { call(opts); });
    row.strategy = to_string(chosen);
  } catch (const tally::invalid_argument& e) {
    // Nothing was queued (the plan is refused before any launch); clear any sticky-free error state.
    (void)cudaGetLastError();
    std::string why = e.what();
    const auto at = why.find("options.strategy");
    row.note = "not run: " + (at == std::string::npos ? why : why.substr(at));
  }
  return row;
}

template <class T>
struct device_array {
  T* p = nullptr;
  explicit device_array(std::size_t n) { TALLY_CUDA(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T))); }
  ~device_array() { cudaFree(p); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
};

/// A function that appends a row to `rows` as one (kind, count type, bins) cell.
auto row_adder(std::vector<hist_row>& rows, std::string kind, std::string type, std::int64_t bins) {
  return [&rows, kind = std::move(kind), type = std::move(type), bins](hist_row r) {
    r.kind = kind;
    r.count_type = type;
    r.bins = bins;
    rows.push_back(std::move(r));
  };
}

/// Times the two atomics peers: plain atomicAdd and the paper's shuffle
/// aggregation. run(how) queues one call of the peer `how`.
template <class Add, class Run>
void add_atomics_peers(const Add& add, const Run& run) {
  using peers = bench::peers::hist_atomics;
  for (auto how : {peers::plain, peers::paper_shuffle}) {
    hist_row r;
    r.impl = how == peers::plain ? "plain_atomics" : "paper_shuffle";
    r.median_us = median_us([&] { run(how); });
    add(r);
  }
}

template <class Count>
void bench_histogram_gpu(std::vector<hist_row>& rows, const char* kind, const char* type, const double* x,
                         std::int64_t n, std::int64_t bins, Count* counts, std::int64_t cub_max_bins) {
  const auto add = row_adder(rows, kind, type, bins);
  add_atomics_peers(add, [&](auto how) { bench::peers::hist_even_atomics(how, x, n, bins, 0.0, 1.0, counts, nullptr); });
  const auto tally_call = [&](const histogram_options& o) { histogram_even(gpu, x, n, bins, 0.0, 1.0, counts, o); };
  add(time_tally("tally", tally_call, {}));
  for (auto s : kForced) {
    histogram_options o;
    o.strategy = s;
    add(time_tally(std::string("tally:") + to_string(s), tally_call, o));
  }
  if constexpr (std::is_same_v<Count, int>) {
    hist_row r;
    r.impl = "cub";
    if (bins > cub_max_bins) {
      // An illegal address poisons the CUDA context: it cannot be caught, only avoided.
      r.note = bins >= 10'000'000
                   ? "not run: CUB HistogramEven faults (illegal address) at 10^7 bins on this GPU"
                   : "not run: above --cub-max-bins " + std::to_string(cub_max_bins);
    } else {
      std::string error = bench::peers::cub_hist_even(x, n, bins, 0.0, 1.0, counts, nullptr);
      if (error.empty()) {
        TALLY_CUDA(cudaStreamSynchronize(nullptr));
        r.median_us = median_us([&] { (void)bench::peers::cub_hist_even(x, n, bins, 0.0, 1.0, counts, nullptr); });
      } else {
        r.note = "failed: " + error;
      }
    }
    add(r);
  }
}

void bench_cpu(std::vector<hist_row>& rows, const std::vector<double>& x, std::int64_t bins) {
  std::vector<int> counts(static_cast<std::size_t>(bins));
  for (int threads : {1, 0}) {
    hist_row r;
    r.impl = threads == 1 ? "cpu_sequential" : "cpu_openmp";
    r.kind = "histogram";
    r.count_type = "i32";
    r.bins = bins;
    r.median_us = time_host([&] {
      histogram_even(cpu.with_threads(threads), x.data(), static_cast<std::int64_t>(x.size()), bins, 0.0, 1.0,
                     counts.data());
    });
    rows.push_back(r);
  }
}

}  // namespace

int run_bench_histogram(int argc, char** argv) {
  hist_settings s;
  if (!parse(argc, argv, s)) return 2;
  std::mt19937_64 rng(20131001);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> host_x(static_cast<std::size_t>(s.n));
  for (auto& v : host_x) v = uniform(rng);
  std::vector<std::int64_t> bin_counts;
  for (std::int64_t b = 1; b <= s.max_bins; b *= 10) bin_counts.push_back(b);

  int devices = 0;
  const bool have_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  std::vector<hist_row> rows;
  std::string device = "cpu";
  if (!have_gpu) {
    std::cerr << "tally bench histogram: no CUDA GPU here: CPU rows only\n";
    for (auto bins : bin_counts) {
      std::cerr << "  cpu histogram bins=" << bins << "\n";
      bench_cpu(rows, host_x, bins);
    }
  } else {
    cudaDeviceProp prop{};
    TALLY_CUDA(cudaGetDeviceProperties(&prop, 0));
    device = prop.name;
    device_array<double> x(host_x.size()), weights(host_x.size()), out_f64(static_cast<std::size_t>(s.max_bins));
    device_array<int> out_i32(static_cast<std::size_t>(s.max_bins));
    device_array<std::int64_t> index(host_x.size());  // 64-bit: 16 bytes read per element, 160 MB
    TALLY_CUDA(cudaMemcpy(x.p, host_x.data(), host_x.size() * sizeof(double), cudaMemcpyHostToDevice));
    std::vector<double> host_w(host_x.size());
    for (auto& w : host_w) w = uniform(rng) * 2 - 0.5;
    TALLY_CUDA(cudaMemcpy(weights.p, host_w.data(), host_w.size() * sizeof(double), cudaMemcpyHostToDevice));
    // A CUDA failure (a peer or kernel fault) ends the sweep, not the report:
    // the rows so far are still printed and written. After an illegal
    // address the context is unusable, so no further row is attempted.
    try {
      for (auto bins : bin_counts) {
        std::cerr << "histogram bins=" << bins << "\n";
        bench_histogram_gpu(rows, "histogram", "i32", x.p, s.n, bins, out_i32.p, s.cub_max_bins);
        bench_histogram_gpu(rows, "histogram", "f64", x.p, s.n, bins, out_f64.p, s.cub_max_bins);
        if (s.cpu) bench_cpu(rows, host_x, bins);

        // The paper's general case: out[index[i]] += value[i].
        std::cerr << "scatter_add bins=" << bins << "\n";
        std::vector<std::int64_t> host_index(host_x.size());
        for (std::size_t i = 0; i < host_x.size(); ++i)
          host_index[i] = static_cast<std::int64_t>(std::min<double>(host_x[i] * static_cast<double>(bins), bins - 1));
        TALLY_CUDA(cudaMemcpy(index.p, host_index.data(), host_index.size() * sizeof(std::int64_t),
                              cudaMemcpyHostToDevice));
        const auto add = row_adder(rows, "scatter_add", "f64", bins);
        add_atomics_peers(add, [&](auto how) {
          bench::peers::scatter_add_atomics(how, index.p, weights.p, s.n, out_f64.p, bins, nullptr);
        });
        // tally's scatter_reduce accumulates: clear first, as the peers do.
        const auto scatter = [&](const histogram_options& o) {
          TALLY_CUDA(cudaMemsetAsync(out_f64.p, 0, static_cast<std::size_t>(bins) * sizeof(double), nullptr));
          histogram_options unchecked = o;
          unchecked.checks = check_mode::unchecked;  // no flag read-back: the mode meant for speed
          scatter_reduce(gpu, index.p, weights.p, s.n, out_f64.p, bins, plus{}, unchecked);
        };
        add(time_tally("tally", scatter, {}));
        histogram_options det;
        det.deterministic = true;
        add(time_tally("tally:deterministic", scatter, det));
        det.fixed_point_bits = 30;  // |w| < 1.5: 2^30·1.5·10^7 < 2^62
        add(time_tally("tally:deterministic_2^30", scatter, det));
        for (auto st : kForced) {
          histogram_options o;
          o.strategy = st;
          add(time_tally(std::string("tally:") + to_string(st), scatter, o));
        }
        // The deterministic rows against the fastest non-deterministic one (bar: <= 1.5x).
        if (const hist_row* best = best_non_deterministic(rows, "scatter_add", "f64", bins)) {
          for (auto& r : rows) {
            if (r.kind != "scatter_add" || r.bins != bins || !is_deterministic(r) || r.median_us <= 0) continue;
            char text[96];
            std::snprintf(text, sizeof text, "%.3fx the best non-deterministic (%s)", r.median_us / best->median_us,
                          best->impl.c_str());
            r.note = text;
          }
        }

        // Skewed samples: a Zipf-like law over the bins.
        std::cerr << "histogram_zipf bins=" << bins << "\n";
        const auto zipf = zipf_samples(s.n, bins, rng);
        TALLY_CUDA(cudaMemcpy(x.p, zipf.data(), zipf.size() * sizeof(double), cudaMemcpyHostToDevice));
        bench_histogram_gpu(rows, "histogram_zipf", "i32", x.p, s.n, bins, out_i32.p, s.cub_max_bins);
        TALLY_CUDA(cudaMemcpy(x.p, host_x.data(), host_x.size() * sizeof(double), cudaMemcpyHostToDevice));
      }
    } catch (const std::exception& e) {
      std::cerr << "tally bench histogram: sweep stopped: " << e.what() << "\n";
      hist_row r;
      r.impl = "sweep";
      r.kind = "-";
      r.count_type = "-";
      r.note = std::string("stopped: ") + e.what();
      rows.push_back(r);
    }
  }
  std::printf("tally bench histogram: n = %lld on %s%s\n", static_cast<long long>(s.n), device.c_str(),
              have_gpu ? "" : " (no GPU: CPU rows only)");
  if (!s.json_path.empty()) write_json(s.json_path, rows, device, s.n);  // first: the table cannot fail it
  print_table(rows);
  print_summary(rows, bin_counts);
  return 0;
}

}  // namespace tally::cli
