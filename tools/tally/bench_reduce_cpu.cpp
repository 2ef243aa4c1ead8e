// `tally bench reduce` on the CPU backend: tally::cpu against the standard
// library, an OpenMP loop (the natural multi-threaded peer, and the baseline),
// Eigen when its headers are found, and a multi-threaded read probe as the
// memory-bandwidth ceiling. Used where no GPU is present, or with --cpu.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <numeric>
#include <vector>

#include <omp.h>

#include "bench_reduce_args.hpp"
#include "bench_report.hpp"
#include "host_info.hpp"
#include "reduce_inputs.hpp"
#include "tally/tally.hpp"

#if __has_include(<Eigen/Core>)
#include <Eigen/Core>
#define TALLY_BENCH_HAVE_EIGEN 1
#elif __has_include(<eigen3/Eigen/Core>)
#include <eigen3/Eigen/Core>
#define TALLY_BENCH_HAVE_EIGEN 1
#endif

namespace tally::cli {

namespace {

struct host_timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int trials = 0, calls = 0;
};

/// Times call() like the GPU harness: warm-up, a batch size that makes a
/// trial last about trial_ms, then the median of `trials` trials.
host_timing time_host(const std::function<double()>& call, int trials, double trial_ms) {
  using clock = std::chrono::steady_clock;
  volatile double sink = 0;  // keeps the results, and so the calls, alive
  for (int i = 0; i < 2; ++i) sink = sink + call();
  auto run_batch = [&](int calls) {
    const auto start = clock::now();
    for (int i = 0; i < calls; ++i) sink = sink + call();
    return std::chrono::duration<double, std::micro>(clock::now() - start).count();
  };
  int calls = 1;
  for (;;) {
    const double us = run_batch(calls);
    if (us >= trial_ms * 250 || calls >= (1 << 20)) {
      calls = std::clamp(static_cast<int>(calls * trial_ms * 1e3 / std::max(us, 1e-3)), 1, 1 << 20);
      break;
    }
    calls *= 4;
  }
  std::vector<double> per_call;
  for (int t = 0; t < trials; ++t) per_call.push_back(run_batch(calls) / calls);
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front(), per_call.back(), trials, calls};
}

/// Below this many elements the OpenMP loops run on one thread, as a careful
/// OpenMP user would write them: waking threads costs more than the work.
constexpr std::int64_t kParallelFrom = 32768;

/// The host read probe: every OpenMP thread XORs its share of 8-byte words.
double read_probe_host(const void* data, std::size_t bytes) {
  const auto* words = static_cast<const std::uint64_t*>(data);
  const auto count = static_cast<std::int64_t>(bytes / 8);
  std::uint64_t acc = 0;
#pragma omp parallel for simd reduction(^ : acc) schedule(static) if (count >= kParallelFrom)
  for (std::int64_t i = 0; i < count; ++i) acc ^= words[i];
  return static_cast<double>(acc & 1);
}

template <class T>
double openmp_sum(const T* x, std::int64_t n) {
  T s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n >= kParallelFrom)
  for (std::int64_t i = 0; i < n; ++i) s += x[i];
  return static_cast<double>(s);
}

template <class T>
double openmp_dot(const T* x, const T* y, std::int64_t n) {
  T s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n >= kParallelFrom)
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return static_cast<double>(s);
}

struct candidate {
  const char* impl;
  std::function<double()> call;
  const char* note;
};

class cpu_bench {
 public:
  explicit cpu_bench(const reduce_bench_settings& s) : s_(s) {}

  int run() {
    const host_info host = read_host_info();
    std::cout << "no GPU used: benchmarking the CPU backend (tally::cpu) on " << describe(host) << "\n";
    report_.command = "tally bench reduce";
    report_.backend = "cpu";
    report_.baseline = "openmp";
    report_.meta = {{"date", json_string(utc_timestamp())},
                    {"host", "{\"cpu\": " + json_string(host.cpu_model) +
                                 ", \"hardware_threads\": " + std::to_string(host.hardware_threads) +
                                 ", \"openmp_threads\": " + std::to_string(host.openmp_threads) +
                                 ", \"memory_gib\": " + json_number(host.memory_gib) +
                                 ", \"load_average\": " + json_number(host.load_average) + "}"},
                    {"compiler", json_string(__VERSION__)},
#ifdef TALLY_BENCH_HAVE_EIGEN
                    {"eigen_version", json_string(std::to_string(EIGEN_WORLD_VERSION) + "." +
                                                  std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                                  std::to_string(EIGEN_MINOR_VERSION))},
#endif
                    {"trials", std::to_string(s_.trials)},
                    {"trial_ms", json_number(s_.trial_ms)}};
#ifndef TALLY_BENCH_HAVE_EIGEN
    report_.notes.push_back("Eigen headers not found: no Eigen rows");
#endif
    report_.notes.push_back("std::accumulate, std::reduce and Eigen run on one thread; tally::cpu and openmp on " +
                            std::to_string(host.openmp_threads));
    if (host_is_busy(host)) {
      const std::string busy = "load average " + std::to_string(host.load_average).substr(0, 4) + " on " +
                               std::to_string(host.hardware_threads) +
                               " hardware threads: other work holds the cores, so multi-threaded times "
                               "(tally, openmp, probe) include waits for time slices and are not reliable";
      report_.notes.push_back(busy);
      std::cout << "WARNING: " << busy << "\n";
    }
    const int max_log2 = s_.max_given ? s_.max_log2 : std::min(s_.max_log2, 26);
    std::int64_t max_n = std::int64_t{1} << max_log2;
    std::size_t arena_bytes = 0;
    for (const auto& type : reduce_bench_types())
      if (s_.wants(type)) arena_bytes = std::max(arena_bytes, input_bytes(type, max_n));
    arena_.assign(arena_bytes / 8 + 2, 0.0);

    for (const auto& type : reduce_bench_types()) {
      if (!s_.wants(type)) continue;
      for (int k = s_.min_log2; k <= max_log2; k += s_.step_log2) {
        const std::int64_t n = std::int64_t{1} << k;
        if (type == "f32") bench_sum<float>(type, n);
        else if (type == "f64") bench_sum<double>(type, n);
        else if (type == "i32") bench_sum<int>(type, n);
        else if (type == "f32dot") bench_dot<float>(type, n);
        else bench_dot<double>(type, n);
      }
    }
    return finish_report(report_, s_.json_path);
  }

 private:
  static std::size_t input_bytes(const std::string& type, std::int64_t n) {
    const std::size_t element = type == "f64" || type == "f64dot" ? 8 : 4;
    return static_cast<std::size_t>(n) * element * (type.find("dot") != std::string::npos ? 2 : 1);
  }

  template <class T>
  void bench_sum(const std::string& type, std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_.data());
    const std::uint64_t seed = next_seed();
    fill_host(x, n, seed);
    const reference ref = sum_reference<T>(seed, n);
    const tally::options plain = options(), compensated = options(tally::summation::compensated);
    std::vector<candidate> impls = {
        {"tally",
         [=] {
           T out{};
           tally::reduce(tally::cpu, x, n, &out, tally::plus{}, plain);
           return static_cast<double>(out);
         },
         ""},
        {"std::accumulate", [=] { return static_cast<double>(std::accumulate(x, x + n, T(0))); }, "one thread"},
        {"std::reduce", [=] { return static_cast<double>(std::reduce(x, x + n, T(0))); }, "one thread"},
        {"openmp", [=] { return openmp_sum(x, n); }, "omp parallel for simd reduction (threads from 2^15 elements)"},
    };
    if constexpr (std::is_floating_point_v<T>) {
      impls.insert(impls.begin() + 1, {"tally-comp", [=] {
                                         T out{};
                                         tally::reduce(tally::cpu, x, n, &out, tally::plus{}, compensated);
                                         return static_cast<double>(out);
                                       },
                                       "compensated"});
    }
#ifdef TALLY_BENCH_HAVE_EIGEN
    impls.push_back({"eigen",
                     [=] { return static_cast<double>(Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(x, n).sum()); },
                     "one thread"});
#endif
    measure(type, n, n * sizeof(T), impls, ref, tolerance<T>());
  }

  template <class T>
  void bench_dot(const std::string& type, std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_.data());
    T* y = x + n;
    const std::uint64_t sx = next_seed(), sy = next_seed();
    fill_host(x, n, sx);
    fill_host(y, n, sy);
    const reference ref = dot_reference<T>(sx, sy, n);
    const tally::options plain = options();
    std::vector<candidate> impls = {
        {"tally",
         [=] {
           T out{};
           tally::dot(tally::cpu, x, y, n, &out, plain);
           return static_cast<double>(out);
         },
         ""},
        {"std::inner_product", [=] { return static_cast<double>(std::inner_product(x, x + n, y, T(0))); },
         "one thread"},
        {"std::transform_reduce", [=] { return static_cast<double>(std::transform_reduce(x, x + n, y, T(0))); },
         "one thread"},
        {"openmp", [=] { return openmp_dot(x, y, n); }, "omp parallel for simd reduction (threads from 2^15 elements)"},
    };
#ifdef TALLY_BENCH_HAVE_EIGEN
    impls.push_back({"eigen",
                     [=] {
                       using V = Eigen::Matrix<T, Eigen::Dynamic, 1>;
                       return static_cast<double>(Eigen::Map<const V>(x, n).dot(Eigen::Map<const V>(y, n)));
                     },
                     "one thread"});
#endif
    measure(type, n, 2 * n * sizeof(T), impls, ref, tolerance<T>());
  }

  /// Verifies each candidate against the reference, times the good ones, and
  /// times the read probe over the same bytes.
  void measure(const std::string& type, std::int64_t n, std::size_t bytes, const std::vector<candidate>& impls,
               const reference& ref, double tol) {
    for (const auto& c : impls) {
      std::cerr << "[cpu " << type << " " << size_label(n) << "] " << c.impl << " ..." << std::flush;
      try {
        const double got = c.call();
        const double err = relative_error(got, ref);
        if (!(err <= tol)) {
          ++report_.mismatches;
          char msg[256];
          std::snprintf(msg, sizeof msg, "MISMATCH %s %s N=%s: got %.17g, expected %.17g (relative error %.3g)",
                        c.impl, type.c_str(), size_label(n).c_str(), got, ref.value, err);
          std::cerr << "\n" << msg << "\n";
          std::cout << msg << "\n";
          report_.notes.push_back(msg);
          continue;
        }
        const host_timing t = time_host(c.call, s_.trials, s_.trial_ms);
        report_.rows.push_back({c.impl, type, n, static_cast<double>(bytes), t.median_us, t.min_us, t.max_us,
                                t.trials, t.calls, 0, err, c.note, {}});
        std::cerr << " " << t.median_us << " us\n";
      } catch (const std::exception& e) {
        ++report_.failures;
        report_.notes.push_back(std::string("FAILED ") + c.impl + " " + type + " N=" + size_label(n) + ": " + e.what());
        std::cerr << "\nFAILED " << c.impl << ": " << e.what() << "\n";
      }
    }
    const void* data = arena_.data();
    const host_timing t = time_host([=] { return read_probe_host(data, bytes); }, s_.trials, s_.trial_ms);
    report_.rows.push_back({"probe", type, n, static_cast<double>(bytes), t.median_us, t.min_us, t.max_us, t.trials,
                            t.calls, 0, -1, "OpenMP read of 8-byte words", {}});
  }

  /// tally's options for this run: checks as --unchecked says, summation as given.
  tally::options options(tally::summation sum = tally::summation::plain) const {
    return {.checks = s_.unchecked ? tally::check_mode::unchecked : tally::check_mode::checked, .sum = sum};
  }

  std::uint64_t next_seed() { return seed_base_ + 0x632BE59BD9B4E019ull * ++seed_count_; }

  const reduce_bench_settings& s_;
  bench_report report_;
  std::vector<double> arena_;
  std::uint64_t seed_base_ = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t seed_count_ = 0;
};

}  // namespace

int run_bench_reduce_cpu(const reduce_bench_settings& settings) { return cpu_bench(settings).run(); }

}  // namespace tally::cli
