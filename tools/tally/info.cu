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
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
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

  const auto probe = tally::bench::best_read_probe(buffer, bytes, sink, stream, 7, 20.0);
  std::printf("  read probe        %8.0f GB/s   (%.2f GiB read with 16-byte loads, %d blocks, %.3f ms)\n",
              probe.gbps, bytes / kGiB, probe.blocks, probe.median_us / 1e3);

  // Copy the first half onto the second: each byte is read once and written once.
  const std::size_t half = bytes / 2;
  char* base = static_cast<char*>(buffer);
  const auto copy = tally::bench::time_calls(stream, [&] {
    TALLY_CUDA(cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice, stream));
  });
  std::printf("  D2D copy          %8.0f GB/s   (read + write of %.2f GiB, %.3f ms)\n",
              2.0 * half / (copy.median_us * 1e3), half / kGiB, copy.median_us / 1e3);

  cudaStreamDestroy(stream);
  cudaFree(sink);
  cudaFree(buffer);
}

void print_gpu(int device_count) {
  const device_info& dev = current_device_info();
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("GPU %d of %d: %s (compute capability %d.%d)\n", dev.device, device_count, dev.name.c_str(), dev.major,
              dev.minor);
  std::printf("  SMs               %8d   (%d threads per SM)\n", dev.sm_count, dev.max_threads_per_sm);
  std::printf("  L2 cache          %8.1f MiB\n", dev.l2_bytes / (1024.0 * 1024.0));
  std::printf("  shared memory     %8zu KiB per SM, %zu KiB per block (opt-in)\n", dev.shared_memory_per_sm / 1024,
              dev.shared_memory_per_block_optin / 1024);
  std::printf("  memory            %8.1f GiB, %d-bit bus, %d MHz\n", dev.global_memory_bytes / kGiB,
              dev.memory_bus_bits, dev.memory_clock_khz / 1000);
  std::printf("  theoretical       %8.0f GB/s   (2 x clock x bus width)\n", dev.theoretical_bandwidth() / 1e9);
  std::printf("  CUDA runtime %d.%d, driver %d.%d; CUB %s, Thrust %s, cuBLAS %s\n", runtime / 1000,
              runtime % 1000 / 10, driver / 1000, driver % 1000 / 10, tally::bench::cub_version().c_str(),
              tally::bench::thrust_version().c_str(), tally::bench::cublas_version().c_str());
  print_measured_bandwidth();
}

}  // namespace

int run_info(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: tally info\n\nThe GPU (or, without one, the CPU) and its measured memory bandwidth.\n";
      return 0;
    }
    std::cerr << "tally info: unknown option '" << arg << "'\n";
    return 2;
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  const std::string host = describe(read_host_info());
  if (status != cudaSuccess || count == 0) {
    std::printf("no GPU found (%s): tally runs on the CPU backend here\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "no CUDA device");
    std::printf("CPU: %s\n", host.c_str());
    return 0;
  }
  try {
    print_gpu(count);
  } catch (const std::exception& e) {
    std::cerr << "tally info: " << e.what() << "\n";
    return 1;
  }
  std::printf("host CPU: %s\n", host.c_str());
  return 0;
}

}  // namespace tally::cli
