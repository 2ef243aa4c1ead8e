// `tally bench copy`: seed 001's vector-width study on this GPU. A copy
// kernel written from the seed's description (grid-stride loop, 1024
// threads, min(ceil(n/1024), 4096) blocks) moves n half or float elements
// with scalar accesses or through 32-, 64- and 128-bit words, beside
// cudaMemcpyAsync, from 2^12 to 2^28 elements. Every row is checked (the
// destination, poisoned first, must equal the source word for word) before
// and after timing.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "bench_cli.hpp"
#include "commands.hpp"
#include "device_memory.cuh"
#include "gpu_harness.cuh"
#include "output.hpp"

namespace tally::cli {
namespace {

using bench::json;
using bench::row;

struct copy_settings {
  bench_options common;
  int min_log2 = 12, max_log2 = 28, step_log2 = 4;
};

constexpr int kThreads = 1024;    // the seed's block size
constexpr int kMaxBlocks = 4096;  // and its grid cap

/// Copies n elements of T as W words (sizeof(W) >= sizeof(T), a multiple of
/// it): n·sizeof(T)/sizeof(W) whole words, then the last elements one by one.
template <class T, class W>
__global__ void copy_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t n) {
  constexpr std::int64_t ratio = sizeof(W) / sizeof(T);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t words = n / ratio;
  for (std::int64_t i = first; i < words; i += stride) reinterpret_cast<W*>(out)[i] = reinterpret_cast<const W*>(in)[i];
  for (std::int64_t i = words * ratio + first; i < n; i += stride) out[i] = in[i];
}

/// Counts the 16-bit units where a and b differ into *wrong.
__global__ void count_differences(const std::uint16_t* a, const std::uint16_t* b, std::int64_t units,
                                  unsigned long long* wrong) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += stride)
    mine += a[i] != b[i];
  if (mine) atomicAdd(wrong, mine);
}

/// Fills `units` 16-bit units with a hash of their index and the seed.
__global__ void fill_units(std::uint16_t* x, std::int64_t units, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < units; i += stride) {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    x[i] = static_cast<std::uint16_t>(z ^ (z >> 31));
  }
}

int grid_for(std::int64_t units) { return static_cast<int>(std::clamp<std::int64_t>((units + 255) / 256, 1, 8192)); }

class copy_bench {
 public:
  explicit copy_bench(const copy_settings& s) : s_(s) {}

  void run() {
    report_ = start_report("tally bench copy", true, s_.common);
    const double l2 = report_.metadata["device"]["l2_bytes"].get<double>();
    std::random_device entropy;
    const std::uint64_t seed = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
    report_.settings.update(
        bench::json{{"min_log2", s_.min_log2}, {"max_log2", s_.max_log2}, {"step_log2", s_.step_log2}, {"seed", seed}});
    report_.check_mode =
        "exact: the destination, poisoned before each checked call, must equal the source in every "
        "16-bit unit";
    report_.header = {
        "Seed 001's vector-width study: copy kernels with " + std::to_string(kThreads) + "-thread blocks, min(ceil(n/" +
            std::to_string(kThreads) + "), " + std::to_string(kMaxBlocks) +
            ") blocks, a grid-stride loop over elements (scalar) or over 32-, 64-, 128-bit words; cudaMemcpyAsync "
            "beside them. GB/s counts bytes read + written.",
        "Copies whose source and destination together fit in the " + std::to_string(static_cast<int>(l2 / 1048576)) +
            " MiB L2 stay in L2 after the first call: their GB/s is not DRAM bandwidth.",
    };
    const std::int64_t largest = std::int64_t{1} << s_.max_log2;
    bench::device_buffer<float> src(largest), dst(largest);
    bench::device_buffer<unsigned long long> wrong(1);
    bench::owned_stream owned;
    const cudaStream_t stream = owned.get();
    auto h = bench::gpu_harness(report_, stream, s_.common.trials);
    fill_units<<<grid_for(2 * largest), 256, 0, stream>>>(reinterpret_cast<std::uint16_t*>(src.data()), 2 * largest,
                                                          seed);
    TALLY_CUDA(cudaGetLastError());
    bench::warm_up_clocks();
    try {
      for (const char* type : {"f16", "f32"})
        for (int k = s_.min_log2; k <= s_.max_log2; k += s_.step_log2) {
          const std::int64_t n = std::int64_t{1} << k;
          const std::size_t bytes = static_cast<std::size_t>(n) * (type[1] == '1' ? 2 : 4);
          row proto;
          proto.benchmark = "copy";
          proto.params = {{"type", type}, {"n", n}};
          proto.bytes = 2.0 * static_cast<double>(bytes);
          const std::uint16_t* const src_units = reinterpret_cast<const std::uint16_t*>(src.data());
          const std::uint16_t* const dst_units = reinterpret_cast<const std::uint16_t*>(dst.data());
          const auto verify = [=, w = wrong.data()] {
            const std::int64_t units = static_cast<std::int64_t>(bytes / 2);
            TALLY_CUDA(cudaMemsetAsync(w, 0, sizeof(unsigned long long), stream));
            count_differences<<<grid_for(units), 256, 0, stream>>>(src_units, dst_units, units, w);
            TALLY_CUDA(cudaGetLastError());
            const unsigned long long differ = bench::read_value(w, stream);
            if (differ == 0) return bench::check::pass("exact, " + std::to_string(units) + " 16-bit units", 0, 0);
            return bench::check::fail(std::to_string(differ) + " of " + std::to_string(units) + " 16-bit units differ",
                                      static_cast<double>(differ), 0);
          };
          const auto reset = [=, d = dst.data()] { bench::poison(d, bytes, stream, 0xA5); };
          const auto add = [&](const std::string& name, std::function<void()> call) {
            bench::peer p;
            p.name = name;
            p.reset = reset;
            p.run = std::move(call);
            p.verify = verify;
            bench::measure(h, p, proto);
          };
          const int blocks = static_cast<int>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
          if (type[1] == '1') {
            const auto* in = reinterpret_cast<const __half*>(src.data());
            auto* out = reinterpret_cast<__half*>(dst.data());
            add("scalar (16-bit)", [=] { launch<__half, __half>(in, out, n, blocks, stream); });
            add("32-bit", [=] { launch<__half, int>(in, out, n, blocks, stream); });
            add("64-bit", [=] { launch<__half, int2>(in, out, n, blocks, stream); });
            add("128-bit", [=] { launch<__half, int4>(in, out, n, blocks, stream); });
          } else {
            const float* in = src.data();
            float* out = dst.data();
            add("scalar (32-bit)", [=] { launch<float, float>(in, out, n, blocks, stream); });
            add("32-bit", [=] { launch<float, int>(in, out, n, blocks, stream); });
            add("64-bit", [=] { launch<float, int2>(in, out, n, blocks, stream); });
            add("128-bit", [=] { launch<float, int4>(in, out, n, blocks, stream); });
          }
          float* const d = dst.data();
          const float* const sp = src.data();
          add("cudaMemcpyAsync", [=] { TALLY_CUDA(cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, stream)); });
        }
    } catch (const bench::device_lost& e) {
      report_.notes.push_back(e.what());
      ++report_.failures;
    }
    bench::add_ratio_to(report_, "cudaMemcpyAsync", "/memcpy");
    finish_command(report_, s_.common);
  }

 private:
  template <class T, class W>
  static void launch(const T* in, T* out, std::int64_t n, int blocks, cudaStream_t stream) {
    copy_kernel<T, W><<<blocks, kThreads, 0, stream>>>(in, out, n);
    TALLY_CUDA(cudaGetLastError());
  }

  const copy_settings& s_;
  bench::report report_;
};

}  // namespace

void add_bench_copy(CLI::App& bench) {
  auto s = std::make_shared<copy_settings>();
  CLI::App* cmd = bench.add_subcommand("copy", "seed 001's vector-width study: copies with 16- to 128-bit accesses");
  cmd->footer(
      "Seed 001's vector-width study: copies of half and float arrays with scalar, 32-, 64- and 128-bit "
      "accesses beside cudaMemcpyAsync, every row checked before and after timing (GPU only).");
  add_bench_options(*cmd, s->common);
  cmd->add_option("--min-log2", s->min_log2, "fewest elements as log2")
      ->check(CLI::Range(1, 30))
      ->capture_default_str();
  cmd->add_option("--max-log2", s->max_log2, "most elements as log2")->check(CLI::Range(1, 30))->capture_default_str();
  cmd->add_option("--step-log2", s->step_log2, "step in log2")->check(CLI::Range(1, 30))->capture_default_str();
  cmd->callback([s] {
    if (s->min_log2 > s->max_log2)
      throw CLI::ValidationError("--min-log2", "must not exceed --max-log2 (" + std::to_string(s->max_log2) + ")");
    if (!use_gpu(s->common, "tally bench copy")) {
      std::cout << "tally bench copy: the copy study is about GPU memory accesses; nothing to run on the CPU\n";
      return;
    }
    run_reporting_errors("tally bench copy", [&] { copy_bench(*s).run(); });
  });
}

}  // namespace tally::cli
