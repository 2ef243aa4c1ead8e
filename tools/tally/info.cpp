// `tally info`: the GPU (datasheet figures and measured bandwidth) or, without
// one, the CPU the CPU backend would use.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include <cuda_runtime.h>

#include "commands.hpp"
#include "host_info.hpp"
#include "peers/reduce_peers.hpp"
#include "run_info.hpp"
#include "tally/cuda/check.cuh"
#include "timing.cuh"

namespace tally::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Measures the read probe and a device-to-device copy on one buffer of up
/// to 4 GiB (far above any L2), and prints both.
void print_measured_bandwidth() {
  std::size_t free_bytes = 0, total_bytes = 0;
  TALLY_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t bytes = std::min<std::size_t>(std::size_t{4} << 30, free_bytes / 2) & ~std::size_t{4095};
  void* buffer = nullptr;
  unsigned* sink = nullptr;
  cudaStream_t stream = nullptr;
  TALLY_CUDA(cudaMalloc(&buffer, bytes));
  TALLY_CUDA(cudaMalloc(&sink, sizeof(unsigned)));
  TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  TALLY_CUDA(cudaMemsetAsync(buffer, 0x5A, bytes, stream));

  const auto probe = tally::bench::measure_read_probe(buffer, bytes, sink, stream, 7, 20.0);
  std::printf("  read probe        %8.0f GB/s   (%.2f GiB read with 16-byte loads, %d blocks, %.3f ms)\n", probe.gbps,
              bytes / kGiB, probe.blocks, probe.median_us / 1e3);

  // Copy the first half onto the second: each byte is read once and written once.
  const std::size_t half = bytes / 2;
  char* base = static_cast<char*>(buffer);
  const auto copy = tally::bench::time_calls(
      stream, [&] { TALLY_CUDA(cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice, stream)); },
      tally::bench::trial_settings{7, 20.0, 3});
  std::printf("  D2D copy          %8.0f GB/s   (read + write of %.2f GiB, %.3f ms)\n",
              2.0 * half / (copy.median_us * 1e3), half / kGiB, copy.median_us / 1e3);

  cudaStreamDestroy(stream);
  cudaFree(sink);
  cudaFree(buffer);
}

void print_gpu() {
  const auto meta = tally::bench::gpu_run_metadata();
  const auto& d = meta["device"];
  std::printf("GPU: %s (compute capability %s)\n", d["name"].get<std::string>().c_str(),
              d["compute_capability"].get<std::string>().c_str());
  std::printf("  SMs               %8d   (SM clock %d MHz)\n", d["sm_count"].get<int>(), d["sm_clock_mhz"].get<int>());
  std::printf("  L2 cache          %8.1f MiB\n", d["l2_bytes"].get<double>() / (1024.0 * 1024.0));
  std::printf("  memory            %8.1f GiB, %d-bit bus, %d MHz\n", d["memory_bytes"].get<double>() / kGiB,
              d["memory_bus_bits"].get<int>(), d["memory_clock_mhz"].get<int>());
  std::printf("  theoretical       %8.0f GB/s   (2 x clock x bus width)\n", d["theoretical_gbps"].get<double>());
  std::printf("  CUDA runtime %s, driver %s; CUB %s, Thrust %s, cuBLAS %s\n",
              meta["cuda_runtime"].get<std::string>().c_str(), meta["cuda_driver"].get<std::string>().c_str(),
              meta["cub"].get<std::string>().c_str(), meta["thrust"].get<std::string>().c_str(),
              tally::bench::cublas_version().c_str());
  print_measured_bandwidth();
}

}  // namespace

void add_info(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("info", "The GPU (or, without one, the CPU) and its measured memory bandwidth.");
  cmd->callback([] {
    const std::string host = bench::describe(bench::read_host_info());
    const std::string why = bench::gpu_unusable_reason();
    if (!why.empty()) {
      std::printf("no usable GPU (%s): tally runs on the CPU backend here\n", why.c_str());
      std::printf("CPU: %s\n", host.c_str());
      return;
    }
    try {
      print_gpu();
    } catch (const std::exception& e) {
      std::cerr << "tally info: " << e.what() << "\n";
      throw CLI::RuntimeError(1);
    }
    std::printf("host CPU: %s\n", host.c_str());
  });
}

}  // namespace tally::cli
