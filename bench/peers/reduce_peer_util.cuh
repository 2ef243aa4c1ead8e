// Helpers shared by the reduce peers' sources (not part of their interface).
#pragma once

#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::bench::detail {

/// Device memory freed when the last copy of the pointer goes (the peers'
/// run() closures hold it, so storage lives exactly as long as the call).
inline std::shared_ptr<void> device_allocation(std::size_t bytes) {
  void* p = nullptr;
  TALLY_CUDA(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

/// Waits for `stream` and copies *out (device) to the host, as double.
template <class T>
double read_device_value(const T* out, cudaStream_t stream) {
  TALLY_CUDA(cudaStreamSynchronize(stream));
  T value{};
  TALLY_CUDA(cudaMemcpy(&value, out, sizeof(T), cudaMemcpyDeviceToHost));
  return static_cast<double>(value);
}

}  // namespace tally::bench::detail
