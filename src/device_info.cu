#include <map>
#include <mutex>

#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"

namespace tally {

const device_info& current_device_info() {
  static std::mutex lock;
  static std::map<int, device_info> cache;
  int device = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  std::lock_guard<std::mutex> guard(lock);
  auto found = cache.find(device);
  if (found != cache.end()) return found->second;
  cudaDeviceProp p{};
  TALLY_CUDA(cudaGetDeviceProperties(&p, device));
  device_info info;
  info.device = device;
  info.name = p.name;
  info.major = p.major;
  info.minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  info.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  info.shared_memory_per_block_optin = p.sharedMemPerBlockOptin;
  info.shared_memory_per_sm = p.sharedMemPerMultiprocessor;
  info.l2_bytes = p.l2CacheSize;
  info.cooperative_launch = p.cooperativeLaunch != 0;
  info.global_memory_bytes = p.totalGlobalMem;
  // CUDA 13 dropped these from cudaDeviceProp; ask the attributes.
  TALLY_CUDA(cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  TALLY_CUDA(cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  return cache.emplace(device, info).first->second;
}

}  // namespace tally
