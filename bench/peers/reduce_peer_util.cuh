// Helpers shared by the reduce peers' sources (not part of their interface).
#pragma once

#include <cstdint>
#include <memory>

#include <cuda_runtime.h>

#include "device_memory.cuh"
#include "peers/reduce_peers.hpp"
#include "tally/cuda/check.cuh"

namespace tally::bench::detail {

/// Device memory freed when the last copy of the pointer goes (the peers'
/// run() closures hold it, so storage lives exactly as long as the peer).
inline std::shared_ptr<void> device_allocation(std::size_t bytes) {
  void* p = nullptr;
  TALLY_CUDA(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

/// Fills the peer's reset and result for a result left in out[0] on the device.
template <class T>
void device_result(reduce_peer& r, T* out, cudaStream_t stream) {
  r.p.reset = [=] { poison(out, sizeof(T), stream); };
  r.result = [=] { return static_cast<double>(read_value(out, stream)); };
}

/// Checks the launch just made with cudaGetLastError (the harness clears
/// older errors after a failed row, so an error seen here is this launch's).
inline void check_launch(const char* kernel) { ::tally::detail::check_cuda(cudaGetLastError(), kernel); }

}  // namespace tally::bench::detail
