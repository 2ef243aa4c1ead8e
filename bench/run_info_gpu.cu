// The GPU part of the run metadata, read from the runtime (not from the
// library's cached device_info, so that a report describes the device even
// where the library would refuse it).
#include <cub/version.cuh>
#include <thrust/version.h>

#include <cuda_runtime.h>

#include "run_info.hpp"
#include "tally/cuda/check.cuh"

namespace tally::bench {

namespace {

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

int attribute(cudaDeviceAttr what, int device) {
  int value = 0;
  TALLY_CUDA(cudaDeviceGetAttribute(&value, what, device));
  return value;
}

}  // namespace

std::string gpu_unusable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  if (count == 0) return "no CUDA device";
  // A device can be listed yet unusable (a broken driver, a lost context):
  // make a context and a tiny allocation to be sure.
  void* probe = nullptr;
  const cudaError_t alloc = cudaMalloc(&probe, 256);
  if (alloc != cudaSuccess) return std::string(cudaGetErrorName(alloc)) + ": " + cudaGetErrorString(alloc);
  TALLY_CUDA(cudaFree(probe));
  return "";
}

json gpu_run_metadata() {
  json meta = host_run_metadata();
  int runtime = 0, driver = 0, device = 0;
  TALLY_CUDA(cudaRuntimeGetVersion(&runtime));
  TALLY_CUDA(cudaDriverGetVersion(&driver));
  TALLY_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  TALLY_CUDA(cudaGetDeviceProperties(&prop, device));
  const int memory_clock_khz = attribute(cudaDevAttrMemoryClockRate, device);
  const int bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  meta["cuda_runtime"] = version_text(runtime);
  meta["cuda_driver"] = version_text(driver);
  meta["cub"] = std::to_string(CUB_MAJOR_VERSION) + "." + std::to_string(CUB_MINOR_VERSION) + "." +
                std::to_string(CUB_SUBMINOR_VERSION);
  meta["thrust"] = std::to_string(THRUST_MAJOR_VERSION) + "." + std::to_string(THRUST_MINOR_VERSION) + "." +
                   std::to_string(THRUST_SUBMINOR_VERSION);
  meta["device"] = {
      {"name", prop.name},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"sm_count", prop.multiProcessorCount},
      {"l2_bytes", prop.l2CacheSize},
      {"memory_bytes", prop.totalGlobalMem},
      {"memory_bus_bits", bus_bits},
      {"memory_clock_mhz", memory_clock_khz / 1000},
      {"sm_clock_mhz", attribute(cudaDevAttrClockRate, device) / 1000},
      {"theoretical_gbps", 2.0 * memory_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9},
  };
  return meta;
}

}  // namespace tally::bench
