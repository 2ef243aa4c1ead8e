// Kernel launches whose own status is checked: every tally kernel goes
// through cudaLaunchKernelEx, whose return value belongs to that launch
// alone. (A <<<>>> launch can only be checked through cudaGetLastError(),
// which also returns errors left behind by earlier, unrelated calls.)
#pragma once

#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::detail {

/// A launch configuration without attributes.
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  return config;
}

/// Launches kernel(args...) with `config`; throws cuda_error naming `what`
/// (e.g. "launch of tally::kernels::reduce_kernel") when this launch fails.
template <class... Params, class... Args>
void launch(const char* what, const cudaLaunchConfig_t& config, void (*kernel)(Params...), Args&&... args) {
  check_cuda(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), what);
}

}  // namespace tally::detail
