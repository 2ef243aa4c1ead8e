// Checking CUDA calls: every failure becomes tally::cuda_error carrying
// CUDA's own message and the call that failed.
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "tally/core/error.hpp"

namespace tally::detail {

/// Throws cuda_error("tally: <what>: <CUDA's message>") when status is not cudaSuccess.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw cuda_error(static_cast<int>(status),
                     std::string("tally: ") + what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace tally::detail

/// Checks a CUDA runtime call, naming it in the error.
#define TALLY_CUDA(call) ::tally::detail::check_cuda((call), #call)
/// Checks that the last kernel launch was accepted (does not wait for it).
#define TALLY_CUDA_LAUNCHED(kernel_name) ::tally::detail::check_cuda(cudaGetLastError(), "launch of " kernel_name)
