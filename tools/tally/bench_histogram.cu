// `tally bench histogram`: seed 003's study on this GPU. 10^7 uniform doubles
// in [0, 1) into 1, 10, ..., 10^7 bins, counts in int32 and double: plain
// atomicAdd, the paper's shuffle aggregation as published, tally's automatic
// choice and each forced strategy, CUB's HistogramEven, the CPU on one thread
// and with OpenMP. Then the paper's general case (a weighted scatter-add of
// doubles, tally's deterministic mode beside it) and skewed (Zipf-like)
// samples. Table on stdout, progress on stderr, JSON rows with --json FILE.
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
  std::string json_path;
  bool cpu = true;
};

const char* kUsage =
    "usage: tally bench histogram [--json FILE] [--n 10000000] [--max-bins 10000000] [--no-cpu]\n"
    "  Histograms of n uniform doubles in [0,1) into 1, 10, ... max-bins bins (int32 and double counts),\n"
    "  a weighted scatter-add of doubles, and Zipf-skewed samples: plain atomics, the paper's warp\n"
    "  aggregation, tally (automatic and every strategy), CUB, and the CPU.\n";

bool parse(int argc, char** argv, hist_settings& s) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--json" && has_value) s.json_path = argv[++i];
    else if (arg == "--n" && has_value) s.n = std::stoll(argv[++i]);
    else if (arg == "--max-bins" && has_value) s.max_bins = std::stoll(argv[++i]);
    else if (arg == "--no-cpu") s.cpu = false;
    else {
      std::cerr << kUsage;
      return false;
    }
  }
  return s.n > 0 && s.max_bins > 0;
}

/// Median wall time of `runs` calls of f (CPU rows), in µs.
double time_host(const std::function<void()>& f, int runs = 5) {
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

/// Bins of a Zipf-like law (P(k) ∝ 1/(k+1)^1.1), mapped to their bins' centres in [0, 1).
std::vector<double> zipf_samples(std::int64_t n, std::int64_t bins, std::mt19937_64& rng) {
  std::vector<double> cdf(static_cast<std::size_t>(bins));
  double total = 0;
  for (std::int64_t k = 0; k < bins; ++k) cdf[k] = (total += std::pow(static_cast<double>(k + 1), -1.1));
  std::uniform_real_distribution<double> u(0, total);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) {
    const auto k = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    v = (static_cast<double>(std::min<std::int64_t>(k, bins - 1)) + 0.5) / static_cast<double>(bins);
  }
  return x;
}

void print_table(const std::vector<hist_row>& rows) {
  // Ratios against the plain-atomics and CUB rows of the same kind, bins and count type.
  std::map<std::string, double> plain, cub;
  const auto key = [](const hist_row& r) { return r.kind + "/" + r.count_type + "/" + std::to_string(r.bins); };
  for (const auto& r : rows) {
    if (r.impl == "plain_atomics") plain[key(r)] = r.median_us;
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
template <class Call>
hist_row time_tally(const std::string& impl, Call&& call, histogram_options opts) {
  hist_row row;
  row.impl = impl;
  histogram_strategy chosen = histogram_strategy::automatic;
  opts.chosen = &chosen;
  try {
    row.median_us = bench::time_calls(nullptr, [&] { call(opts); }).median_us;
    row.strategy = to_string(chosen);
  } catch (const tally::invalid_argument& e) {
    row.note = "not run: does not fit";
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

template <class Count>
void bench_histogram_gpu(std::vector<hist_row>& rows, const char* kind, const char* type, const double* x,
                         std::int64_t n, std::int64_t bins, Count* counts) {
  auto add = [&](hist_row r) {
    r.kind = kind;
    r.count_type = type;
    r.bins = bins;
    rows.push_back(r);
  };
  using peers = bench::peers::hist_atomics;
  for (auto how : {peers::plain, peers::paper_shuffle}) {
    hist_row r;
    r.impl = how == peers::plain ? "plain_atomics" : "paper_shuffle";
    r.median_us = bench::time_calls(nullptr, [&] {
                    bench::peers::hist_even_atomics(how, x, n, bins, 0.0, 1.0, counts, nullptr);
                  }).median_us;
    add(r);
  }
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
    std::string error = bench::peers::cub_hist_even(x, n, bins, 0.0, 1.0, counts, nullptr);
    if (error.empty()) {
      TALLY_CUDA(cudaStreamSynchronize(nullptr));
      r.median_us = bench::time_calls(nullptr, [&] {
                      (void)bench::peers::cub_hist_even(x, n, bins, 0.0, 1.0, counts, nullptr);
                    }).median_us;
    } else {
      r.note = "failed: " + error;
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
    device_array<int> out_i32(static_cast<std::size_t>(s.max_bins)), index(host_x.size());
    TALLY_CUDA(cudaMemcpy(x.p, host_x.data(), host_x.size() * sizeof(double), cudaMemcpyHostToDevice));
    std::vector<double> host_w(host_x.size());
    for (auto& w : host_w) w = uniform(rng) * 2 - 0.5;
    TALLY_CUDA(cudaMemcpy(weights.p, host_w.data(), host_w.size() * sizeof(double), cudaMemcpyHostToDevice));
    for (auto bins : bin_counts) {
      std::cerr << "histogram bins=" << bins << "\n";
      bench_histogram_gpu(rows, "histogram", "i32", x.p, s.n, bins, out_i32.p);
      bench_histogram_gpu(rows, "histogram", "f64", x.p, s.n, bins, out_f64.p);
      if (s.cpu) bench_cpu(rows, host_x, bins);

      // The paper's general case: out[index[i]] += value[i].
      std::cerr << "scatter_add bins=" << bins << "\n";
      std::vector<int> host_index(host_x.size());
      for (std::size_t i = 0; i < host_x.size(); ++i)
        host_index[i] = static_cast<int>(std::min<double>(host_x[i] * static_cast<double>(bins), bins - 1));
      TALLY_CUDA(cudaMemcpy(index.p, host_index.data(), host_index.size() * sizeof(int), cudaMemcpyHostToDevice));
      auto add = [&](hist_row r) {
        r.kind = "scatter_add";
        r.count_type = "f64";
        r.bins = bins;
        rows.push_back(r);
      };
      using peers = bench::peers::hist_atomics;
      for (auto how : {peers::plain, peers::paper_shuffle}) {
        hist_row r;
        r.impl = how == peers::plain ? "plain_atomics" : "paper_shuffle";
        r.median_us = bench::time_calls(nullptr, [&] {
                        bench::peers::scatter_add_atomics(how, index.p, weights.p, s.n, out_f64.p, bins, nullptr);
                      }).median_us;
        add(r);
      }
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

      // Skewed samples: a Zipf-like law over the bins.
      std::cerr << "histogram_zipf bins=" << bins << "\n";
      const auto zipf = zipf_samples(s.n, bins, rng);
      TALLY_CUDA(cudaMemcpy(x.p, zipf.data(), zipf.size() * sizeof(double), cudaMemcpyHostToDevice));
      bench_histogram_gpu(rows, "histogram_zipf", "i32", x.p, s.n, bins, out_i32.p);
      TALLY_CUDA(cudaMemcpy(x.p, host_x.data(), host_x.size() * sizeof(double), cudaMemcpyHostToDevice));
    }
  }
  std::printf("tally bench histogram: n = %lld on %s%s\n", static_cast<long long>(s.n), device.c_str(),
              have_gpu ? "" : " (no GPU: CPU rows only)");
  print_table(rows);
  if (!s.json_path.empty()) write_json(s.json_path, rows, device, s.n);
  return 0;
}

}  // namespace tally::cli
