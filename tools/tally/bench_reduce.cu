// `tally bench reduce`: tally's sums and dot products against CUB, Thrust,
// cuBLAS, seed 000's kernel and the read probe, in one process, on the same
// device buffers, with fresh random data for every type and size.
//
// Every implementation's result is checked against an exact host reference
// before it is timed; a wrong result is reported loudly and never timed.
// Without a GPU (or with --cpu) the CPU backend is benchmarked instead.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench_reduce_args.hpp"
#include "bench_report.hpp"
#include "commands.hpp"
#include "peers/reduce_peers.hpp"
#include "reduce_inputs.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/workspace.hpp"
#include "tally/tally.hpp"
#include "timing.cuh"

namespace tally::cli {

namespace {

/// Spins every SM for `cycles` clock cycles.
__global__ void keep_busy(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

/// An idle GPU runs at low clocks and takes a while to raise them; without
/// this the first sizes timed were slower (seen: 15 µs instead of 4 µs).
void warm_up_clocks() {
  keep_busy<<<tally::current_device_info().sm_count * 4, 128>>>(400'000'000);  // ~0.2 s at 2 GHz
  TALLY_CUDA_LAUNCHED("keep_busy");
  TALLY_CUDA(cudaDeviceSynchronize());
}


using tally::bench::reduce_call;

template <class T>
__global__ void fill_inputs_kernel(T* x, std::int64_t n, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = input_value<T>(seed, i);
}

/// Fills x[0, n) on the device with input_value<T>(seed, i).
template <class T>
void fill_device(T* x, std::int64_t n, std::uint64_t seed, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<std::int64_t>((n + 255) / 256, 16384));
  fill_inputs_kernel<T><<<blocks, 256, 0, stream>>>(x, n, seed);
  TALLY_CUDA_LAUNCHED("fill_inputs_kernel");
}

/// Device memory owned for the whole run.
class device_memory {
 public:
  device_memory() = default;
  explicit device_memory(std::size_t bytes) : bytes_(bytes) { TALLY_CUDA(cudaMalloc(&data_, bytes)); }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() { cudaFree(data_); }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A stream owned for the whole run; declared before everything used on it,
/// so it is destroyed last.
class owned_stream {
 public:
  owned_stream() { TALLY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
  ~owned_stream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Thrown to end the run when the device is left in an error state.
struct device_lost {};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class gpu_bench {
 public:
  explicit gpu_bench(const reduce_bench_settings& s) : s_(s), stream_(owned_.get()) {}

  int run() {
    describe_run();
    allocate_arena();
    warm_up_clocks();
    try {
      for (const auto& type : reduce_bench_types()) {
        if (!s_.wants(type)) continue;
        for (int k = s_.min_log2; k <= s_.max_log2; k += s_.step_log2) bench_one(type, std::int64_t{1} << k);
      }
    } catch (const device_lost&) {
      report_.notes.push_back("the device entered an error state: the run stopped early");
    }
    return finish_report(report_, s_.json_path);
  }

 private:
  // ---- setup ----------------------------------------------------------------

  void describe_run() {
    const device_info& dev = current_device_info();
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    std::random_device entropy;
    seed_base_ = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();

    report_.command = "tally bench reduce";
    report_.backend = "gpu";
    report_.baseline = "cub";
    report_.meta = {
        {"date", json_string(utc_timestamp())},
        {"device", "{\"name\": " + json_string(dev.name) + ", \"compute_capability\": " +
                       json_string(std::to_string(dev.major) + "." + std::to_string(dev.minor)) +
                       ", \"sm_count\": " + std::to_string(dev.sm_count) +
                       ", \"l2_bytes\": " + std::to_string(dev.l2_bytes) +
                       ", \"memory_bytes\": " + std::to_string(dev.global_memory_bytes) +
                       ", \"theoretical_gbps\": " + json_number(dev.theoretical_bandwidth() / 1e9) + "}"},
        {"cuda_runtime", json_string(version(runtime))},
        {"cuda_driver", json_string(version(driver))},
        {"cub_version", json_string(tally::bench::cub_version())},
        {"thrust_version", json_string(tally::bench::thrust_version())},
        {"cublas_version", json_string(tally::bench::cublas_version())},
        {"trials", std::to_string(s_.trials)},
        {"trial_ms", json_number(s_.trial_ms)},
        {"tally_checks", json_string(s_.unchecked ? "unchecked" : "checked")},
        {"seed", std::to_string(seed_base_)},
    };
    std::cout << "tally bench reduce on " << dev.name << " (sm_" << dev.major << dev.minor << ", " << dev.sm_count
              << " SMs, L2 " << dev.l2_bytes / (1024 * 1024) << " MiB, " << dev.global_memory_bytes / kGiB
              << " GiB), CUDA " << version(runtime) << ", CUB " << tally::bench::cub_version() << "\n";
    report_.notes.push_back("inputs of at most " + std::to_string(dev.l2_bytes / (1024 * 1024)) +
                            " MiB (the L2) are read from L2 after the first call: GB/s there is not DRAM bandwidth");
    report_.notes.push_back("thrust returns each result to the host (a stream wait per call); seed000's time "
                            "includes the cudaMemsetAsync that zeroes its output");
  }

  static std::size_t input_bytes(const std::string& type, std::int64_t n) {
    const std::size_t element = type == "f64" || type == "f64dot" ? 8 : 4;
    return static_cast<std::size_t>(n) * element * (type.find("dot") != std::string::npos ? 2 : 1);
  }

  /// One arena holds the inputs of every (type, N): the largest that fits,
  /// leaving room for the peers' scratch. Sizes that need more are skipped.
  void allocate_arena() {
    std::size_t needed = 0;
    for (const auto& type : reduce_bench_types())
      if (s_.wants(type)) needed = std::max(needed, input_bytes(type, std::int64_t{1} << s_.max_log2));
    std::size_t free_bytes = 0, total_bytes = 0;
    TALLY_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t reserve = std::size_t{1} << 30;
    std::size_t bytes = std::min(needed, free_bytes > 2 * reserve ? free_bytes - reserve : free_bytes / 2);
    bytes &= ~std::size_t{255};
    arena_.emplace(bytes);
    out_.emplace(256);
    sink_.emplace(256);
    // tally's scratch, allocated once up front: 64 MiB covers the per-tile
    // partials of 2^30 elements many times over, so no call ever grows it.
    workspace_.get(std::size_t{64} << 20, stream_);
    TALLY_CUDA(cudaStreamSynchronize(stream_));
  }

  // ---- one (type, N) --------------------------------------------------------

  void bench_one(const std::string& type, std::int64_t n) {
    const std::size_t bytes = input_bytes(type, n);
    if (bytes > arena_->bytes()) {
      char note[256];
      std::snprintf(note, sizeof note, "skipped %s N=%s: needs %.1f GiB of inputs, %.1f GiB could be allocated",
                    type.c_str(), size_label(n).c_str(), bytes / kGiB, arena_->bytes() / kGiB);
      report_.notes.push_back(note);
      std::cerr << note << "\n";
      return;
    }
    if (type == "f32") bench_sum<float>(type, n);
    else if (type == "f64") bench_sum<double>(type, n);
    else if (type == "i32") bench_sum<int>(type, n);
    else if (type == "f32dot") bench_dot<float>(type, n);
    else bench_dot<double>(type, n);
    measure_probe(type, n, bytes);
  }

  template <class T>
  void bench_sum(const std::string& type, std::int64_t n) {
    T* x = static_cast<T*>(arena_->data());
    T* out = static_cast<T*>(out_->data());
    const std::uint64_t seed = next_seed();
    fill_device(x, n, seed, stream_);
    const reference ref = sum_reference<T>(seed, n);
    const double bytes = static_cast<double>(n) * sizeof(T);
    const double tol = tolerance<T>();

    measure("tally", type, n, bytes, ref, tol, [&] { return tally_sum(x, n, out, summation::plain); });
    if constexpr (std::is_floating_point_v<T>)
      measure("tally-comp", type, n, bytes, ref, tol, [&] { return tally_sum(x, n, out, summation::compensated); });
    measure("cub", type, n, bytes, ref, tol, [&] { return tally::bench::cub_sum(x, n, out, stream_); });
    measure("thrust", type, n, bytes, ref, tol, [&] { return tally::bench::thrust_sum(x, n, stream_); });
    measure_seed000(type, n, bytes, ref, tol, x, out);
  }

  template <class T>
  void bench_dot(const std::string& type, std::int64_t n) {
    T* x = static_cast<T*>(arena_->data());
    T* y = x + n;  // right after x: the probe reads the same 2N elements
    T* out = static_cast<T*>(out_->data());
    const std::uint64_t sx = next_seed(), sy = next_seed();
    fill_device(x, n, sx, stream_);
    fill_device(y, n, sy, stream_);
    const reference ref = dot_reference<T>(sx, sy, n);
    const double bytes = 2.0 * static_cast<double>(n) * sizeof(T);
    const double tol = tolerance<T>();

    measure("tally", type, n, bytes, ref, tol, [&] {
      reduce_call call;
      const auto backend = tally::gpu.on(stream_).with(workspace_);
      const tally::options opts = options(summation::plain);
      call.run = [=] { tally::dot(backend, x, y, n, out, opts); };
      call.result = [=, this] { return device_value(out); };
      return call;
    });
    measure("cub", type, n, bytes, ref, tol, [&] { return tally::bench::cub_dot(x, y, n, out, stream_); });
    measure("thrust", type, n, bytes, ref, tol, [&] { return tally::bench::thrust_dot(x, y, n, stream_); });
    measure("cublas", type, n, bytes, ref, tol, [&] { return tally::bench::cublas_dot(x, y, n, out, stream_); });
  }

  tally::options options(summation sum) const {
    return {.checks = s_.unchecked ? check_mode::unchecked : check_mode::checked, .sum = sum};
  }

  /// tally::reduce with the run's workspace, allocated once and reused.
  template <class T>
  reduce_call tally_sum(const T* x, std::int64_t n, T* out, summation sum) {
    reduce_call call;
    const auto backend = tally::gpu.on(stream_).with(workspace_);
    const tally::options opts = options(sum);
    call.run = [=] { tally::reduce(backend, x, n, out, tally::plus{}, opts); };
    call.result = [=, this] { return device_value(out); };
    if (sum == summation::compensated) call.note = "compensated";
    return call;
  }

  template <class T>
  double device_value(const T* out) {
    TALLY_CUDA(cudaStreamSynchronize(stream_));
    T value{};
    TALLY_CUDA(cudaMemcpy(&value, out, sizeof(T), cudaMemcpyDeviceToHost));
    return static_cast<double>(value);
  }

  // ---- verification and timing ----------------------------------------------

  /// Runs `call` once on a poisoned output and compares with the reference.
  /// Returns the relative error, or nothing (reported loudly) when it is wrong.
  std::optional<double> verify(const std::string& impl, const std::string& type, std::int64_t n,
                               const reduce_call& call, const reference& ref, double tol) {
    TALLY_CUDA(cudaMemsetAsync(out_->data(), 0xFF, out_->bytes(), stream_));  // NaN / -1: never a valid sum here
    call.run();
    const double got = call.result();
    const double err = relative_error(got, ref);
    if (err <= tol) return err;
    ++report_.mismatches;
    char msg[320];
    std::snprintf(msg, sizeof msg, "MISMATCH %s %s N=%s: got %.17g, expected %.17g (relative error %.3g > %.1g)",
                  impl.c_str(), type.c_str(), size_label(n).c_str(), got, ref.value, err, tol);
    std::cerr << "\n*** " << msg << " ***\n";
    std::cout << "*** " << msg << " ***\n";
    report_.notes.push_back(msg);
    return std::nullopt;
  }

  /// Makes, verifies and times one implementation; adds its row. Failures
  /// (exceptions) are reported and the run goes on unless the device is lost.
  void measure(const std::string& impl, const std::string& type, std::int64_t n, double bytes, const reference& ref,
               double tol, const std::function<reduce_call()>& make) {
    progress(impl, type, n);
    guarded(impl, type, n, [&] {
      const reduce_call call = make();
      const auto err = verify(impl, type, n, call, ref, tol);
      if (!err) return;
      const tally::bench::timing t = tally::bench::time_calls(stream_, call.run, s_.trials, s_.trial_ms);
      add_row(impl, type, n, bytes, t, *err, call.note, 0, {});
    });
  }

  /// Seed 000 at every grid of its sweep (verified, short trials), then the
  /// fastest grid timed in full. The row names the grid and keeps the sweep.
  template <class T>
  void measure_seed000(const std::string& type, std::int64_t n, double bytes, const reference& ref, double tol,
                       const T* x, T* out) {
    progress("seed000", type, n);
    guarded("seed000", type, n, [&] {
      std::vector<std::pair<int, double>> sweep;
      int best = 0;
      double best_us = 0, best_err = 0;
      for (const int blocks : tally::bench::kSeed000Grids) {
        const reduce_call call = tally::bench::seed000_sum(x, n, out, blocks, stream_);
        const auto err = verify("seed000 blocks=" + std::to_string(blocks), type, n, call, ref, tol);
        if (!err) continue;
        const double us = tally::bench::time_calls(stream_, call.run, 3, s_.trial_ms / 4).median_us;
        sweep.emplace_back(blocks, us);
        if (best == 0 || us < best_us) best = blocks, best_us = us, best_err = *err;
      }
      if (best == 0) return;
      const reduce_call call = tally::bench::seed000_sum(x, n, out, best, stream_);
      const tally::bench::timing t = tally::bench::time_calls(stream_, call.run, s_.trials, s_.trial_ms);
      add_row("seed000", type, n, bytes, t, best_err, call.note, best, sweep);
    });
  }

  /// The read probe over the same bytes of the same arena, once per size.
  void measure_probe(const std::string& type, std::int64_t n, std::size_t bytes) {
    progress("probe", type, n);
    guarded("probe", type, n, [&] {
      auto cached = std::find_if(probes_.begin(), probes_.end(), [&](const auto& p) { return p.first == bytes; });
      if (cached == probes_.end()) {
        probes_.emplace_back(bytes, tally::bench::best_read_probe(arena_->data(), bytes,
                                                                  static_cast<unsigned*>(sink_->data()), stream_,
                                                                  s_.trials, s_.trial_ms));
        cached = probes_.end() - 1;
      }
      const auto& p = cached->second;
      const tally::bench::timing t{p.median_us, p.min_us, p.max_us, p.trials, p.calls};
      add_row("probe", type, n, static_cast<double>(bytes), t, -1, "16-byte loads, reads only", p.blocks, {});
    });
  }

  template <class Body>
  void guarded(const std::string& impl, const std::string& type, std::int64_t n, const Body& body) {
    try {
      body();
    } catch (const std::exception& e) {
      ++report_.failures;
      const std::string msg = "FAILED " + impl + " " + type + " N=" + size_label(n) + ": " + e.what();
      std::cerr << "\n*** " << msg << " ***\n";
      std::cout << "*** " << msg << " ***\n";
      report_.notes.push_back(msg);
      // A sticky error ends the run; a plain one is cleared so that the next
      // implementation's launch check does not report it again.
      if (cudaDeviceSynchronize() != cudaSuccess) throw device_lost{};
      cudaGetLastError();
    }
  }

  void add_row(const std::string& impl, const std::string& type, std::int64_t n, double bytes,
               const tally::bench::timing& t, double err, const std::string& note, int blocks,
               std::vector<std::pair<int, double>> sweep) {
    bench_row row{impl, type, n, bytes, t.median_us, t.min_us, t.max_us, t.trials, t.calls_per_trial,
                  blocks, err, note, std::move(sweep)};
    char line[160];
    std::snprintf(line, sizeof line, " %.2f us, %.0f GB/s%s\n", row.median_us, row.gbps(),
                  blocks ? (" (blocks=" + std::to_string(blocks) + ")").c_str() : "");
    std::cerr << line;
    report_.rows.push_back(std::move(row));
  }

  void progress(const std::string& impl, const std::string& type, std::int64_t n) {
    std::cerr << "[gpu " << type << " N=" << size_label(n) << "] " << impl << " ..." << std::flush;
  }

  std::uint64_t next_seed() { return seed_base_ + 0x632BE59BD9B4E019ull * ++seed_count_; }

  const reduce_bench_settings& s_;
  owned_stream owned_;
  cudaStream_t stream_;
  tally::workspace workspace_;
  std::optional<device_memory> arena_, out_, sink_;
  std::vector<std::pair<std::size_t, tally::bench::probe_result>> probes_;
  bench_report report_;
  std::uint64_t seed_base_ = 0, seed_count_ = 0;
};

/// Why no GPU can be used, or "" when one can.
std::string gpu_absence() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return cudaGetErrorString(status);
  if (count == 0) return "no CUDA device";
  return "";
}

}  // namespace

int run_bench_reduce(int argc, char** argv) {
  reduce_bench_settings settings;
  const std::string error = parse_reduce_bench_args(argc, argv, settings);
  if (!error.empty()) {
    std::cerr << "tally bench reduce: " << error << "\n" << reduce_bench_usage();
    return 2;
  }
  if (settings.help) {
    std::cout << reduce_bench_usage();
    return 0;
  }
  if (settings.cpu) return run_bench_reduce_cpu(settings);
  const std::string absent = gpu_absence();
  if (!absent.empty()) {
    std::cout << "no GPU found (" << absent << "): benchmarking the CPU backend\n";
    std::cerr << "no GPU found (" << absent << "): benchmarking the CPU backend\n";
    return run_bench_reduce_cpu(settings);
  }
  try {
    return gpu_bench(settings).run();
  } catch (const std::exception& e) {
    std::cerr << "tally bench reduce: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tally::cli
