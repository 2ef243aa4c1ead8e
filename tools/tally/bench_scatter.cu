// `tally bench scatter`: the row scatter of seed 003's quantum-chemistry
// application in its modern shape, out[index[i], :] += src[i, :] (PyTorch's
// index_add_), on the problem PyTorch was measured on: 7.77 M rows of 128
// values into 1.72 M rows, with a fraction of the rows sent to one hot row
// (50 %, 10 %, none). Other widths keep the bytes of src. Rows: tally's
// automatic strategy (warp-aggregated rows), forced plain atomics (one atomic
// per element, what a straightforward kernel does) and the deterministic
// mode (its automatic sums, and fixed point), in f32, bf16 and f64. PyTorch and CuPy are timed on the same problems
// by python/bench/bench_torch.py. A row whose one call takes over 100 ms is
// timed with few calls, over 2 s not run (both said in its note).
//
// Every value is -1, 0 or 1, so each output element's exact sum is an integer
// the host computes in int64. A float or double element whose addends are
// fewer than 2^24 (2^53) has every partial sum exact in any order: it must
// equal the exact sum; past that, and for bf16 past 256 addends, it must lie
// within the recursive-summation bound (m - 1)·u·m of it. The deterministic
// rows must equal the exact sum correctly rounded to the type, bit for bit.
// Every row is checked before and after timing (bench::measure).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_cli.hpp"
#include "commands.hpp"
#include "device_memory.cuh"
#include "gpu_harness.cuh"
#include "output.hpp"
#include "timing.cuh"
#include "tally/tally.hpp"

namespace tally::cli {
namespace {

using bench::row;

struct scatter_settings {
  bench_options common;
  std::int64_t rows = 7'770'000;  ///< src rows at width 128; other widths keep the bytes of src
  std::int64_t out_rows = 1'720'000;
  std::vector<int> widths{128};
  std::vector<double> hots{0.5, 0.1, 0.0};
  std::vector<std::string> types{"f32", "bf16", "f64"};
  bool plain_atomics = true;  ///< time the plain-atomics rows (a bf16 call on a hot row takes seconds)
};

/// One problem: the keys, the values (-1, 0, 1) and the exact sums.
struct problem {
  std::int64_t n = 0, width = 0, out_rows = 0;
  double hot = 0;
  std::vector<std::int64_t> index;
  std::vector<std::int8_t> values;    // n × width
  std::vector<std::int64_t> sums;     // out_rows × width, exact
  std::vector<std::int64_t> addends;  // per output row: how many src rows it receives
};

problem make_problem(std::int64_t n, std::int64_t width, std::int64_t out_rows, double hot, std::mt19937_64& rng) {
  problem p;
  p.n = n, p.width = width, p.out_rows = out_rows, p.hot = hot;
  p.index.resize(static_cast<std::size_t>(n));
  p.values.resize(static_cast<std::size_t>(n * width));
  p.sums.assign(static_cast<std::size_t>(out_rows * width), 0);
  p.addends.assign(static_cast<std::size_t>(out_rows), 0);
  std::uniform_int_distribution<std::int64_t> key(0, out_rows - 1);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int> value(-1, 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = coin(rng) < hot ? 0 : key(rng);
    p.index[static_cast<std::size_t>(i)] = k;
    ++p.addends[static_cast<std::size_t>(k)];
    std::int8_t* v = p.values.data() + i * width;
    std::int64_t* s = p.sums.data() + k * width;
    for (std::int64_t j = 0; j < width; ++j) {
      v[j] = static_cast<std::int8_t>(value(rng));
      s[j] += v[j];
    }
  }
  return p;
}

template <class V>
double to_double(V v) {
  if constexpr (std::is_same_v<V, __nv_bfloat16>) return static_cast<double>(__bfloat162float(v));
  else return static_cast<double>(v);
}

template <class V>
V from_double(double v) {  // correctly rounded: v is an integer below 2^53 here
  if constexpr (std::is_same_v<V, __nv_bfloat16>) return __double2bfloat16(v);
  else return static_cast<V>(v);
}

template <class V>
struct type_traits;
template <>
struct type_traits<float> {
  static constexpr const char* name = "f32";
  static constexpr double exact_below = 16777216.0;  // 2^24 addends of magnitude <= 1
  static constexpr double u = 0x1p-24;
};
template <>
struct type_traits<double> {
  static constexpr const char* name = "f64";
  static constexpr double exact_below = 9007199254740992.0;
  static constexpr double u = 0x1p-53;
};
template <>
struct type_traits<__nv_bfloat16> {
  static constexpr const char* name = "bf16";
  static constexpr double exact_below = 256.0;
  static constexpr double u = 0x1p-8;
};

/// Compares out (read back) with the exact sums: bitwise to the rounded sum
/// when `rounded_once`, else exactly below the type's exact limit and within
/// (m - 1)·u·m above it.
template <class V>
bench::check compare_rows(const std::vector<V>& got, const problem& p, bool rounded_once) {
  // In parallel over output rows: at D = 1024 an output is 1.76 G elements,
  // which one thread took ~10 s to check (twice a row). Each thread keeps its
  // count, its first wrong element and its worst error (the earliest of
  // equal ones), combined below in element order, so the report does not
  // depend on the thread count.
  std::int64_t wrong = 0, first = -1, worst_at = -1;
  double worst = 0, worst_bound = 0;
#pragma omp parallel
  {
    std::int64_t my_wrong = 0, my_first = -1, my_worst_at = -1;
    double my_worst = 0, my_bound = 0;
#pragma omp for schedule(static)
    for (std::int64_t k = 0; k < p.out_rows; ++k) {
      const double m = static_cast<double>(p.addends[static_cast<std::size_t>(k)]);
      const double bound = rounded_once || m < type_traits<V>::exact_below ? 0.0 : (m - 1) * type_traits<V>::u * m;
      for (std::int64_t j = 0; j < p.width; ++j) {
        const std::size_t e = static_cast<std::size_t>(k * p.width + j);
        const double exact = static_cast<double>(p.sums[e]);
        const double value = to_double(got[e]);
        const double want = rounded_once ? to_double(from_double<V>(exact)) : exact;
        const double error = std::fabs(value - want);
        if (!(error <= bound)) {
          if (my_first < 0) my_first = static_cast<std::int64_t>(e);
          ++my_wrong;
        }
        if (error > my_worst) my_worst = error, my_bound = bound, my_worst_at = static_cast<std::int64_t>(e);
      }
    }
#pragma omp critical
    {
      wrong += my_wrong;
      if (my_first >= 0 && (first < 0 || my_first < first)) first = my_first;
      if (my_worst > worst || (my_worst == worst && my_worst_at >= 0 && my_worst_at < worst_at))
        worst = my_worst, worst_bound = my_bound, worst_at = my_worst_at;
    }
  }
  const std::string elements = std::to_string(p.out_rows * p.width) + " elements";
  if (wrong == 0)
    return bench::check::pass((rounded_once ? "the rounded exact sums, bit for bit, " : "exact or within (m-1)um, ") +
                                  elements,
                              worst, worst_bound);
  return bench::check::fail(std::to_string(wrong) + " of " + elements + " wrong; first at element " +
                                std::to_string(first),
                            static_cast<double>(wrong), 0);
}

/// A row whose one call takes longer is timed with few calls (see run()).
inline constexpr double kSlowCallMs = 100.0;
/// A row whose one call takes longer is not run: its trials alone would
/// take most of the benchmark's budget.
inline constexpr double kSkipCallMs = 2000.0;

class scatter_bench {
 public:
  explicit scatter_bench(const scatter_settings& s) : s_(s) {}

  void run() {
    report_ = start_report("tally bench scatter", true, s_.common);
    std::random_device entropy;
    const std::uint64_t seed = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
    report_.settings.update(bench::json{{"rows_at_width_128", s_.rows}, {"out_rows", s_.out_rows}, {"seed", seed}});
    report_.check_mode =
        "values -1, 0, 1 with exact int64 sums on the host: equal below 2^24 (f32) / 2^53 (f64) / 256 (bf16) "
        "addends, else within (m-1)·u·m; deterministic rows bitwise equal to the exact sum rounded once";
    report_.header = {
        "index_add: out[index[i], :] += src[i, :], rows·width = " + std::to_string(s_.rows * 128) +
            " values into " + std::to_string(s_.out_rows) + " rows; hot = the fraction of rows sent to row 0 (the "
            "rest uniform, in random order). GB/s counts src and index read once and every output row read and "
            "written once (the issue's floor).",
        "tally = automatic (warp-aggregated rows); plain atomics = one atomic per element; deterministic = "
        "automatic sums (ordered where the sort pays, rows of 32 bytes or more and 16 MB of src or more: each "
        "index's rows summed in row order by the sorted runs, pieces of 256 combined by the fixed tree; fixed "
        "point otherwise); deterministic fixed point = int64 sums with a derived scale (one more read "
        "of src for its largest value); given scale = fixed point with fixed_point_bits = 61 - ceil(log2 rows), "
        "which every |value| <= 1 allows (no such read). PyTorch's index_add_ on the same problems: "
        "python/bench/bench_torch.py."};
    bench::owned_stream owned;
    const cudaStream_t stream = owned.get();
    auto h = bench::gpu_harness(report_, stream, s_.common.trials);
    // Rows whose one call takes over kSlowCallMs (plain atomics on a hot row
    // collapse under contention: bf16 takes seconds) are timed with one
    // warm-up call and three trials of one call each, so that the benchmark
    // ends in its time budget; trial_ms 0.01 makes every trial one call.
    auto slow = bench::gpu_harness(report_, stream, bench::trial_settings{3, 0.01, 1});
    std::mt19937_64 rng(seed);
    bench::warm_up_clocks();
    try {
      for (const int width : s_.widths)
        for (const double hot : s_.hots) {
          const std::int64_t n = std::max<std::int64_t>(1, s_.rows * 128 / width);
          const problem p = make_problem(n, width, s_.out_rows, hot, rng);
          bench::device_buffer<std::int64_t> index(n);
          TALLY_CUDA(cudaMemcpy(index.data(), p.index.data(), static_cast<std::size_t>(n) * sizeof(std::int64_t),
                                cudaMemcpyHostToDevice));
          for (const std::string& type : s_.types) {
            if (type == "f32") rows_of<float>(h, slow, p, index.data(), stream);
            else if (type == "f64") rows_of<double>(h, slow, p, index.data(), stream);
            else rows_of<__nv_bfloat16>(h, slow, p, index.data(), stream);
          }
        }
    } catch (const bench::device_lost& e) {
      report_.notes.push_back(e.what());
      ++report_.failures;
    }
    finish_command(report_, s_.common);
  }

 private:
  /// One call's time in ms (after `reset`), by CUDA events: whether a row
  /// needs the slow harness, or cannot be run in the budget at all.
  static double one_call_ms(const bench::peer& peer, cudaStream_t stream) {
    bench::event_pair events;
    peer.reset();
    return events.ms(stream, peer.run);
  }

  template <class V>
  void rows_of(bench::harness& h, bench::harness& slow, const problem& p, const std::int64_t* index,
               cudaStream_t stream) {
    const std::int64_t count = p.n * p.width, out_count = p.out_rows * p.width;
    std::vector<V> host(static_cast<std::size_t>(count));
    for (std::int64_t e = 0; e < count; ++e)
      host[static_cast<std::size_t>(e)] = from_double<V>(p.values[static_cast<std::size_t>(e)]);
    bench::device_buffer<V> src(count), out(out_count);
    TALLY_CUDA(cudaMemcpy(src.data(), host.data(), static_cast<std::size_t>(count) * sizeof(V), cudaMemcpyHostToDevice));
    host = {};
    row proto;
    proto.benchmark = "scatter";
    proto.params = {{"type", type_traits<V>::name}, {"width", p.width}, {"hot", p.hot}, {"rows", p.n}};
    proto.bytes = static_cast<double>(count) * sizeof(V) + static_cast<double>(p.n) * sizeof(std::int64_t) +
                  2.0 * static_cast<double>(out_count) * sizeof(V);
    workspace ws;
    const auto gpu = tally::gpu.on(stream).with(ws);
    const auto add = [&](const std::string& name, histogram_strategy strategy, bool deterministic,
                         int fixed_point_bits = kDeriveFixedPointScale,
                         index_add_sums sums = index_add_sums::automatic) {
      index_add_options opts;
      opts.strategy = strategy;
      opts.deterministic = deterministic;
      opts.fixed_point_bits = fixed_point_bits;
      opts.deterministic_sums = sums;
      opts.checks = check_mode::unchecked;  // the keys are valid; no flag to read back each call
      V* const o = out.data();
      const V* const s = src.data();
      const std::int64_t n = p.n, width = p.width, out_rows = p.out_rows;
      bench::peer peer;
      peer.name = name;
      peer.reset = [=] { TALLY_CUDA(cudaMemsetAsync(o, 0, static_cast<std::size_t>(out_count) * sizeof(V), stream)); };
      peer.run = [=] { tally::index_add(gpu, index, s, n, width, o, out_rows, plus{}, opts); };
      peer.verify = [=, &p] { return compare_rows(bench::read_back(o, out_count, stream), p, deterministic); };
      const double ms = one_call_ms(peer, stream);
      if (ms > kSkipCallMs) {
        bench::add_not_run(report_, proto, name,
                           "one call took " + std::to_string(static_cast<long long>(ms)) + " ms (over " +
                               std::to_string(static_cast<long long>(kSkipCallMs)) +
                               " ms: atomic contention on the hot row)");
        return;
      }
      row proto_slow = proto;
      if (ms > kSlowCallMs)
        proto_slow.note = "one call " + std::to_string(static_cast<long long>(ms)) +
                          " ms: timed as 1 warm-up and 3 trials of one call";
      bench::measure(ms > kSlowCallMs ? slow : h, peer, proto_slow);
    };
    add("tally", histogram_strategy::automatic, false);
    add("tally aggregated atomics", histogram_strategy::aggregated_atomics, false);
    add("tally sorted rows", histogram_strategy::sorted_rows, false);
    if (s_.plain_atomics) add("tally plain atomics", histogram_strategy::plain_atomics, false);
    add("tally deterministic", histogram_strategy::automatic, true);
    add("tally deterministic fixed point", histogram_strategy::automatic, true, kDeriveFixedPointScale,
        index_add_sums::fixed_point);
    // A caller who knows the values' range gives the scale: every |value| is
    // at most 1 here, so 2^(61 - ceil(log2 n)) keeps each |v|·2^s below the
    // contract's 2^(62 - ceil(log2 n)), and the pass that derives it is skipped.
    add("tally deterministic, given scale", histogram_strategy::automatic, true,
        tally::detail::fixed_point_headroom_bits(p.n) - 1);
  }

  const scatter_settings& s_;
  bench::report report_;
};

}  // namespace

void add_bench_scatter(CLI::App& bench) {
  auto s = std::make_shared<scatter_settings>();
  CLI::App* cmd = bench.add_subcommand("scatter", "row scatter (index_add) with hot keys: strategies, deterministic");
  cmd->footer(
      "The row scatter out[index[i], :] += src[i, :] on the problem PyTorch's index_add_ was measured on (7.77 M "
      "rows of 128 into 1.72 M, a fraction to one hot row), in f32, bf16 and f64: tally's automatic strategy, "
      "each strategy forced (aggregated atomics, sorted rows, plain atomics) and the deterministic mode, every row checked against exact sums before and after timing "
      "(GPU only).");
  add_bench_options(*cmd, s->common);
  cmd->add_option("--rows", s->rows, "src rows at width 128 (other widths keep the bytes)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 33))
      ->capture_default_str();
  cmd->add_option("--out-rows", s->out_rows, "output rows")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31))
      ->capture_default_str();
  cmd->add_option("--widths", s->widths, "values a row (e.g. 1,16,128,1024)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--hot", s->hots, "fractions of the rows sent to row 0")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--types", s->types, "value types")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16", "f64"}))
      ->capture_default_str();
  cmd->add_flag_callback(
      "--no-plain-atomics", [s] { s->plain_atomics = false; },
      "leave out the plain-atomics rows (one atomic per element: up to a second a call on a hot row)");
  cmd->callback([s] {
    if (!use_gpu(s->common, "tally bench scatter")) {
      std::cout << "tally bench scatter: the row-scatter study times GPU atomics; nothing to run on the CPU\n";
      return;
    }
    run_reporting_errors("tally bench scatter", [&] { scatter_bench(*s).run(); });
  });
}

}  // namespace tally::cli
