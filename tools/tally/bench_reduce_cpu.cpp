// `tally bench reduce` on the CPU backend: tally::cpu (plain and compensated)
// against Eigen's single-threaded sum()/dot(), a plain OpenMP
// `parallel for simd reduction` and the host read probe (host_read_probe.hpp:
// every OpenMP thread reading its share as several streams), on the same
// buffers, each size's rows timed with their trials interleaved and checked
// against the exact integer reference before and after timing. What the CPU
// backend's bar (issue 7, item 9) is read from.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_reduce_args.hpp"
#include "compare.hpp"
#include "host_read_probe.hpp"
#include "measure.hpp"
#include "output.hpp"
#include "reduce_inputs.hpp"
#include "tally/tally.hpp"

#ifdef TALLY_BENCH_HAVE_EIGEN
#include <Eigen/Core>
#endif

namespace tally::cli {

namespace {

using bench::json;
using bench::row;

/// The earlier probe, kept as a row to show what one stream a thread reads:
/// `parallel for simd` over all words.
std::uint64_t read_probe_simd_for(const void* data, std::size_t bytes) {
  const auto* words = static_cast<const std::uint64_t*>(data);
  const auto count = static_cast<std::int64_t>(bytes / 8);
  std::uint64_t acc = 0;
#pragma omp parallel for simd reduction(^ : acc) schedule(static) if (count >= kParallelFrom)
  for (std::int64_t i = 0; i < count; ++i) acc ^= words[i];
  return acc;
}

/// The reference for both probes: one thread, one word at a time.
std::uint64_t xor_serial(const void* data, std::size_t bytes) {
  const auto* words = static_cast<const std::uint64_t*>(data);
  std::uint64_t acc = 0;
  for (std::size_t i = 0; i < bytes / 8; ++i) acc ^= words[i];
  return acc;
}

template <class T>
T openmp_sum(const T* x, std::int64_t n) {
  T s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n >= kParallelFrom)
  for (std::int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <class T>
T openmp_dot(const T* x, const T* y, std::int64_t n) {
  T s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n >= kParallelFrom)
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}


class cpu_reduce_bench {
 public:
  explicit cpu_reduce_bench(const reduce_settings& s) : s_(s), h_(bench::host_harness(report_, s.common.trials)) {}

  void run() {
    describe_run();
    const int max_log2 = s_.largest_log2(false);
    double arena_bytes = 0;
    for (const auto& type : reduce_bench_types())
      if (s_.wants(type)) arena_bytes = std::max(arena_bytes, reduce_input_bytes(type, std::int64_t{1} << max_log2));
    arena_.assign(static_cast<std::size_t>(arena_bytes / 8) + 2, 0.0);
    for (const auto& type : reduce_bench_types()) {
      if (!s_.wants(type)) continue;
      for (int k = s_.min_log2; k <= max_log2; k += s_.step_log2) {
        const std::int64_t n = std::int64_t{1} << k;
        row proto;
        proto.benchmark = "reduce";
        proto.params = {{"type", type}, {"n", n}};
        proto.bytes = reduce_input_bytes(type, n);
        if (type == "f32")
          bench_sum<float>(n);
        else if (type == "f64")
          bench_sum<double>(n);
        else if (type == "i32")
          bench_sum<int>(n);
        else if (type == "f32dot")
          bench_dot<float>(n);
        else
          bench_dot<double>(n);
        add_probes(proto);
        // One row's peers timed with their trials interleaved: this host's
        // speed drifts by up to 2× over seconds (other tenants), which
        // would otherwise show as differences between the rows.
        bench::measure_interleaved(h_, peers_, proto);
        peers_.clear();
      }
    }
    bench::add_percent_of(report_, "probe");
    bench::add_ratio_to(report_, "openmp");
    bench::add_ratio_to(report_, "eigen");
    bench::add_ratio_to(report_, "tally");
    finish_command(report_, s_.common);
  }

 private:
  void describe_run() {
    std::random_device entropy;
    seed_base_ = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
    report_ = start_report("tally bench reduce", false, s_.common);
#ifdef TALLY_BENCH_HAVE_EIGEN
    report_.metadata["eigen"] = std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                std::to_string(EIGEN_MINOR_VERSION);
#else
    report_.notes.push_back("Eigen was not found at build time: no Eigen rows");
#endif
    report_.settings.update(bench::json{{"min_log2", s_.min_log2},
                                        {"max_log2", s_.largest_log2(false)},
                                        {"step_log2", s_.step_log2},
                                        {"tally_checks", s_.unchecked ? "unchecked" : "checked"},
                                        {"seed", seed_base_}});
    report_.check_mode = reduce_check_mode();
    const auto& host = report_.metadata["host"];
    const int threads = host["openmp_threads"].get<int>();
    std::cout << "tally bench reduce on the CPU backend: " << host["cpu"].get<std::string>() << ", " << threads
              << " OpenMP threads\n";
    report_.header = {
        "CPU backend. tally = tally::cpu (plain), tally-comp = compensated; eigen = Eigen's sum()/dot() on one "
        "thread; openmp = `omp parallel for simd reduction(+:s)` on " +
            std::to_string(threads) +
            " threads from 2^15 elements (one thread below); probe = every OpenMP thread XOR-reading its "
            "contiguous share of 8-byte words as " +
            std::to_string(kProbeStreams) +
            " far-apart streams of 64-byte lines; probe-simd-for = the same XOR as one `parallel for simd` loop.",
        "us = median µs per call; %probe = probe time / row time × 100; /openmp, /eigen, /tally = row time / that "
        "row's time.",
    };
    if (host["load_average"].get<double>() > 0.5 * host["hardware_threads"].get<double>()) {
      const std::string busy = "load average " + std::to_string(host["load_average"].get<double>()).substr(0, 4) +
                               ": other work holds the cores, so multi-threaded times are not reliable";
      report_.notes.push_back(busy);
      std::cout << "WARNING: " << busy << "\n";
    }
  }

  template <class T>
  void bench_sum(std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_.data());
    const input_law law = sum_law<T>(next_seed(), n);
    fill_host(x, n, law);
    const auto expected = static_cast<T>(sum_reference(law, n, std::is_integral_v<T>));
    const tally::options plain = options(summation::plain), compensated = options(summation::compensated);
    add<T>("tally", expected, [=](T* out) { tally::reduce(tally::cpu, x, n, out, tally::plus{}, plain); });
    if constexpr (std::is_floating_point_v<T>)
      add<T>("tally-comp", expected,
             [=](T* out) { tally::reduce(tally::cpu, x, n, out, tally::plus{}, compensated); });
#ifdef TALLY_BENCH_HAVE_EIGEN
    add<T>("eigen", expected,
           [=](T* out) { *out = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(x, n).sum(); });
#endif
    add<T>("openmp", expected, [=](T* out) { *out = openmp_sum(x, n); });
  }

  template <class T>
  void bench_dot(std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_.data());
    T* y = x + n;
    const std::uint64_t seed = next_seed();
    const input_law lx = dot_law_x<T>(seed, n), ly = dot_law_y<T>(seed ^ 0x5DEECE66Dull, n);
    fill_host(x, n, lx);
    fill_host(y, n, ly);
    const auto expected = static_cast<T>(dot_reference(lx, ly, n));
    const tally::options plain = options(summation::plain);
    add<T>("tally", expected, [=](T* out) { tally::dot(tally::cpu, x, y, n, out, plain); });
#ifdef TALLY_BENCH_HAVE_EIGEN
    add<T>("eigen", expected, [=](T* out) {
      using V = Eigen::Matrix<T, Eigen::Dynamic, 1>;
      *out = Eigen::Map<const V>(x, n).dot(Eigen::Map<const V>(y, n));
    });
#endif
    add<T>("openmp", expected, [=](T* out) { *out = openmp_dot(x, y, n); });
  }

  /// One implementation for the row's group: call(out) writes the result to
  /// a host variable that reset() sets to `poison` and verify() compares
  /// exactly. Pre: poison != expected.
  template <class T, class Call>
  void add(const std::string& name, T expected, const Call& call, const std::string& note = {},
           T poison = bench::poisoned<T>()) {
    auto result = std::make_shared<T>(poison);
    bench::peer p;
    p.name = name;
    p.note = note;
    p.reset = [result, poison] { *result = poison; };
    p.run = [result, call] { call(result.get()); };
    p.verify = [result, expected] { return bench::compare_exact(*result, expected); };
    peers_.push_back(std::move(p));
  }

  /// Both probes read the row's bytes (the arena holds the last input
  /// written) and are checked against xor_serial of the same bytes; their
  /// poison is its complement (an unsigned type's poisoned() is 0, which a
  /// XOR can equal).
  void add_probes(const row& proto) {
    const void* data = arena_.data();
    const auto bytes = static_cast<std::size_t>(proto.bytes);
    const std::uint64_t expected = xor_serial(data, bytes);
    add<std::uint64_t>(
        "probe", expected, [=](std::uint64_t* out) { *out = read_probe_host(data, bytes); },
        std::to_string(kProbeStreams) + " streams of 64-byte lines per OpenMP thread", ~expected);
    add<std::uint64_t>(
        "probe-simd-for", expected, [=](std::uint64_t* out) { *out = read_probe_simd_for(data, bytes); },
        "omp parallel for simd XOR", ~expected);
  }

  tally::options options(summation sum) const {
    tally::options o;
    o.checks = s_.unchecked ? check_mode::unchecked : check_mode::checked;
    o.sum = sum;
    return o;
  }

  std::uint64_t next_seed() { return seed_base_ + 0x632BE59BD9B4E019ull * ++seed_count_; }

  const reduce_settings& s_;
  bench::report report_;
  bench::harness h_;
  std::vector<bench::peer> peers_;  // the row being built
  std::vector<double> arena_;
  std::uint64_t seed_base_ = 0, seed_count_ = 0;
};

}  // namespace

void run_reduce_cpu(const reduce_settings& settings) {
  run_reporting_errors("tally bench reduce", [&] { cpu_reduce_bench(settings).run(); });
}

}  // namespace tally::cli
