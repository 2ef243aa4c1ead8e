// `tally bench reduce` on the GPU: tally's sums and dot products against CUB,
// Thrust, cuBLAS, seeds 000 and 002's kernels and the read probe, in one
// process, on the same device buffers, with fresh inputs for every type and
// size. Every row goes through bench::measure (check → time → check) against
// an exact integer reference (reduce_inputs.hpp).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_reduce_args.hpp"
#include "compare.hpp"
#include "device_memory.cuh"
#include "gpu_harness.cuh"
#include "output.hpp"
#include "peers/reduce_peers.hpp"
#include "reduce_inputs.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/workspace.hpp"
#include "tally/tally.hpp"

namespace tally::cli {

namespace {

using bench::json;
using bench::reduce_peer;
using bench::row;

template <class T>
__global__ void fill_inputs_kernel(T* x, std::int64_t n, input_law law) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = input_value<T>(law, i);
}

/// Fills x[0, n) on the device with input_value<T>(law, i).
template <class T>
void fill_device(T* x, std::int64_t n, const input_law& law, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::clamp<std::int64_t>((n + 255) / 256, 1, 16384));
  fill_inputs_kernel<T><<<blocks, 256, 0, stream>>>(x, n, law);
  TALLY_CUDA(cudaGetLastError());
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

class gpu_reduce_bench {
 public:
  explicit gpu_reduce_bench(const reduce_settings& s)
      : s_(s), stream_(owned_.get()), h_(bench::gpu_harness(report_, stream_, s.common.trials)) {}

  void run() {
    describe_run();
    allocate_arena();
    bench::warm_up_clocks();
    try {
      for (const auto& type : reduce_bench_types()) {
        if (!s_.wants(type)) continue;
        for (int k = s_.min_log2; k <= s_.max_log2; k += s_.step_log2) bench_one(type, std::int64_t{1} << k);
      }
    } catch (const bench::device_lost& e) {
      report_.notes.push_back(e.what());
      ++report_.failures;
    }
    bench::add_percent_of(report_, "probe");
    bench::add_ratio_to(report_, "cub");
    finish_command(report_, s_.common);
  }

 private:
  // ---- setup ----------------------------------------------------------------

  void describe_run() {
    std::random_device entropy;
    seed_base_ = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
    report_ = start_report("tally bench reduce", true, s_.common);
    report_.metadata["cublas"] = bench::cublas_version();
    const auto& device = report_.metadata["device"];
    l2_bytes_ = device["l2_bytes"].get<double>();
    report_.settings.update(bench::json{{"min_log2", s_.min_log2},
                                        {"max_log2", s_.max_log2},
                                        {"step_log2", s_.step_log2},
                                        {"tally_checks", s_.unchecked ? "unchecked" : "checked"},
                                        {"seed", seed_base_}});
    report_.check_mode = reduce_check_mode();
    std::cout << "tally bench reduce on " << device["name"].get<std::string>() << " (" << device["sm_count"].get<int>()
              << " SMs, L2 " << l2_bytes_ / kMiB << " MiB), CUDA "
              << report_.metadata["cuda_runtime"].get<std::string>() << ", CUB "
              << report_.metadata["cub"].get<std::string>() << "\n";
    report_.header = {
        "Launches: tally uses programmatic dependent launch (PDL, options::programmatic_launch), which lets a "
        "launch overlap the previous kernel's tail; CUB, Thrust, cuBLAS and the seeds' kernels launch plainly. "
        "'tally (no PDL)' is tally launched plainly: the launch-for-launch comparison.",
        "us = median µs per call over back-to-back calls; GB/s = input bytes / time; %probe = read-probe time / "
        "row time × 100; /cub = row time / CUB's time (< 1: faster than CUB).",
        "The probe's grid is sized to its input (at most one 16-byte load per thread). " + l2_line(),
        "thrust returns each result to the host (a stream wait per call); seed000 includes the memset of its "
        "output; seed002 runs ceil(log256 N) passes.",
    };
  }

  /// Which sizes of each type sit in L2: there a call reads L2, not DRAM.
  std::string l2_line() const {
    std::string text = "Inputs that fit in the " + std::to_string(static_cast<int>(l2_bytes_ / kMiB)) +
                       " MiB L2 are read from L2 after the first call (the probe there is a launch-plus-read floor, "
                       "not DRAM bandwidth; %probe above 100 is possible for PDL rows):";
    for (const auto& type : reduce_bench_types()) {
      if (!s_.wants(type)) continue;
      int largest = -1;
      for (int k = s_.min_log2; k <= s_.max_log2; k += s_.step_log2)
        if (reduce_input_bytes(type, std::int64_t{1} << k) <= l2_bytes_) largest = k;
      text += " " + type + (largest < 0 ? " none" : " N <= 2^" + std::to_string(largest)) + ";";
    }
    text.back() = '.';
    return text;
  }

  /// One arena holds the inputs of every (type, N): the largest that fits,
  /// leaving room for the peers' scratch. Sizes that need more are skipped.
  void allocate_arena() {
    double needed = 0;
    for (const auto& type : reduce_bench_types())
      if (s_.wants(type)) needed = std::max(needed, reduce_input_bytes(type, std::int64_t{1} << s_.max_log2));
    std::size_t free_bytes = 0, total_bytes = 0;
    TALLY_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t reserve = std::size_t{1} << 30;
    std::size_t bytes =
        std::min(static_cast<std::size_t>(needed), free_bytes > 2 * reserve ? free_bytes - reserve : free_bytes / 2);
    bytes = std::max<std::size_t>(bytes & ~std::size_t{255}, 256);
    arena_.emplace(static_cast<std::int64_t>(bytes));
    out_.emplace(4);
    sink_.emplace(4);
    // tally's scratch, allocated once up front: 64 MiB covers the per-tile
    // partials of 2^34 elements many times over, so no timed call grows it.
    workspace_.get(std::size_t{64} << 20, stream_);
    TALLY_CUDA(cudaStreamSynchronize(stream_));
  }

  // ---- one (type, N) --------------------------------------------------------

  void bench_one(const std::string& type, std::int64_t n) {
    const double bytes = reduce_input_bytes(type, n);
    if (bytes > static_cast<double>(arena_->bytes())) {
      char note[256];
      std::snprintf(note, sizeof note, "skipped %s N=%s: needs %.1f GiB of inputs, %.1f GiB could be allocated",
                    type.c_str(), bench::size_label(n).c_str(), bytes / kGiB, arena_->bytes() / kGiB);
      report_.notes.push_back(note);
      std::cerr << note << "\n";
      return;
    }
    row proto;
    proto.benchmark = "reduce";
    proto.params = {{"type", type}, {"n", n}};
    proto.bytes = bytes;
    if (type == "f32")
      bench_sum<float>(proto, n);
    else if (type == "f64")
      bench_sum<double>(proto, n);
    else if (type == "i32")
      bench_sum<int>(proto, n);
    else if (type == "f32dot")
      bench_dot<float>(proto, n);
    else
      bench_dot<double>(proto, n);
    measure_probe(proto, static_cast<std::size_t>(bytes));
  }

  template <class T>
  void bench_sum(const row& proto, std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_->data());
    T* out = reinterpret_cast<T*>(out_->data());
    const input_law law = sum_law<T>(next_seed(), n);
    fill_device(x, n, law, stream_);
    const auto expected = static_cast<T>(sum_reference(law, n, std::is_integral_v<T>));

    add("tally", proto, expected, [&] { return tally_sum(x, n, out, summation::plain, true); });
    add("tally (no PDL)", proto, expected, [&] { return tally_sum(x, n, out, summation::plain, false); });
    if constexpr (std::is_floating_point_v<T>)
      add("tally-comp", proto, expected, [&] { return tally_sum(x, n, out, summation::compensated, true); });
    add("cub", proto, expected, [&] { return bench::cub_sum(x, n, out, stream_); });
    add("thrust", proto, expected, [&] { return bench::thrust_sum(x, n, stream_); });
    measure_seed000(proto, expected, x, n, out);
    if constexpr (!std::is_same_v<T, double>)  // the seed's kernels are for int; f32 is the common case
      for (auto k : {bench::seed002_kernel::interleaved_modulo, bench::seed002_kernel::interleaved_strided,
                     bench::seed002_kernel::sequential})
        add(std::string("seed002 ") + bench::to_string(k), proto, expected,
            [&] { return bench::seed002_sum(k, x, n, out, stream_); });
  }

  template <class T>
  void bench_dot(const row& proto, std::int64_t n) {
    T* x = reinterpret_cast<T*>(arena_->data());
    T* y = x + n;  // right after x: the probe reads the same 2N elements
    T* out = reinterpret_cast<T*>(out_->data());
    const std::uint64_t seed = next_seed();
    const input_law lx = dot_law_x<T>(seed, n), ly = dot_law_y<T>(seed ^ 0x5DEECE66Dull, n);
    fill_device(x, n, lx, stream_);
    fill_device(y, n, ly, stream_);
    const auto expected = static_cast<T>(dot_reference(lx, ly, n));

    add("tally", proto, expected, [&] { return tally_dot(x, y, n, out, true); });
    add("tally (no PDL)", proto, expected, [&] { return tally_dot(x, y, n, out, false); });
    add("cub", proto, expected, [&] { return bench::cub_dot(x, y, n, out, stream_); });
    add("thrust", proto, expected, [&] { return bench::thrust_dot(x, y, n, stream_); });
    if (n <= 0x7FFFFFFF)
      add("cublas", proto, expected, [&] { return bench::cublas_dot(x, y, n, out, stream_); });
    else
      bench::add_not_run(report_, proto, "cublas", "cuBLAS takes int sizes: N too large");
  }

  tally::options options(summation sum, bool pdl) const {
    tally::options o;
    o.checks = s_.unchecked ? check_mode::unchecked : check_mode::checked;
    o.sum = sum;
    o.programmatic_launch = pdl;
    return o;
  }

  /// tally::reduce with the run's workspace, allocated once and reused.
  template <class T>
  reduce_peer tally_sum(const T* x, std::int64_t n, T* out, summation sum, bool pdl) {
    reduce_peer r;
    const auto backend = tally::gpu.on(stream_).with(workspace_);
    const tally::options opts = options(sum, pdl);
    r.p.run = [=] { tally::reduce(backend, x, n, out, tally::plus{}, opts); };
    tally_result(r, out);
    return r;
  }

  template <class T>
  reduce_peer tally_dot(const T* x, const T* y, std::int64_t n, T* out, bool pdl) {
    reduce_peer r;
    const auto backend = tally::gpu.on(stream_).with(workspace_);
    const tally::options opts = options(summation::plain, pdl);
    r.p.run = [=] { tally::dot(backend, x, y, n, out, opts); };
    tally_result(r, out);
    return r;
  }

  template <class T>
  void tally_result(reduce_peer& r, T* out) {
    const cudaStream_t stream = stream_;
    r.p.reset = [=] { bench::poison(out, sizeof(T), stream); };
    r.result = [=] { return static_cast<double>(bench::read_value(out, stream)); };
  }

  // ---- the one path ---------------------------------------------------------

  /// Makes the peer (a factory may throw: then a failed row), points its
  /// verify at the exact reference and measures it under `name`.
  template <class T, class Make>
  void add(const std::string& name, const row& proto, T expected, const Make& make) {
    reduce_peer r;
    try {
      r = make();
    } catch (const bench::device_lost&) {
      throw;
    } catch (const std::exception& e) {
      bench::add_failure(h_, proto, name, e.what());
      return;
    }
    r.p.name = name;
    r.p.verify = [result = r.result, expected] {
      return bench::compare_exact(result(), static_cast<double>(expected));
    };
    bench::measure(h_, r.p, proto);
  }

  /// Seed 000 at every grid of its sweep (each checked, short trials), then
  /// the fastest grid measured in full. The row names its grid and keeps the sweep.
  template <class T>
  void measure_seed000(const row& proto, T expected, const T* x, std::int64_t n, T* out) {
    constexpr std::int64_t kLargestGrid = bench::kSeed000Grids[std::size(bench::kSeed000Grids) - 1];
    if (n > 0x7FFFFFFF - kLargestGrid * bench::kSeed000Threads) {
      bench::add_not_run(report_, proto, "seed000", "the seed indexes with int: N too large");
      return;
    }
    json sweep = json::array();
    int best = 0;
    double best_us = 0;
    try {
      for (const int blocks : bench::kSeed000Grids) {
        reduce_peer r = bench::seed000_sum(x, n, out, blocks, stream_);
        r.p.reset();
        r.p.run();
        const double got = r.result();
        if (got != static_cast<double>(expected)) {
          bench::add_failure(h_, proto, "seed000",
                             "wrong result in the grid sweep at " + std::to_string(blocks) +
                                 " blocks: " + bench::compare_exact(got, static_cast<double>(expected)).detail);
          return;
        }
        const double us =
            bench::time_calls(stream_, r.p.run, bench::trial_settings{3, s_.common.trials.trial_ms / 4, 1}).median_us;
        sweep.push_back({{"blocks", blocks}, {"median_us", us}});
        if (best == 0 || us < best_us) best = blocks, best_us = us;
      }
    } catch (const bench::device_lost&) {
      throw;
    } catch (const std::exception& e) {
      bench::add_failure(h_, proto, "seed000", e.what());
      return;
    }
    row r = proto;
    r.note = "blocks=" + std::to_string(best) + " (fastest of the sweep)";
    r.extra["blocks"] = best;
    r.extra["sweep"] = sweep;
    add("seed000", r, expected, [&] { return bench::seed000_sum(x, n, out, best, stream_); });
  }

  /// The read probe over the same bytes of the same arena, at its best grid.
  void measure_probe(const row& proto, std::size_t bytes) {
    bench::peer p;
    try {
      const int blocks =
          bench::best_probe_grid(arena_->data(), bytes, sink_->data(), stream_, s_.common.trials.trial_ms / 4);
      p = bench::read_probe(arena_->data(), bytes, blocks, sink_->data(), stream_);
    } catch (const bench::device_lost&) {
      throw;
    } catch (const std::exception& e) {
      bench::add_failure(h_, proto, "probe", e.what());
      return;
    }
    bench::measure(h_, p, proto);
  }

  std::uint64_t next_seed() { return seed_base_ + 0x632BE59BD9B4E019ull * ++seed_count_; }

  const reduce_settings& s_;
  bench::owned_stream owned_;  // first: destroyed last
  cudaStream_t stream_;
  bench::report report_;
  bench::harness h_;
  tally::workspace workspace_;
  std::optional<bench::device_buffer<std::byte>> arena_;
  std::optional<bench::device_buffer<double>> out_;
  std::optional<bench::device_buffer<unsigned>> sink_;
  double l2_bytes_ = 0;
  std::uint64_t seed_base_ = 0, seed_count_ = 0;
};

}  // namespace

void run_reduce_gpu(const reduce_settings& settings) {
  run_reporting_errors("tally bench reduce", [&] { gpu_reduce_bench(settings).run(); });
}

}  // namespace tally::cli
