// Checking CUDA calls: every failure becomes tally::cuda_error carrying
// CUDA's own message and the call that failed.
#pragma once

#include <string>

#include <cuda_runtime.h>

#include "tally/core/error.hpp"

namespace tally::detail {

/// Throws cuda_error("tally: <what>: <CUDA's message>") when status is not
/// cudaSuccess. The failure is also taken out of the runtime's last-error
/// record (where CUDA keeps it for cudaGetLastError), so that a later check
/// of the caller's own launches does not find tally's error there.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // (an error that corrupted the context stays: it is not recoverable)
    throw cuda_error(static_cast<int>(status),
                     std::string("tally: ") + what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

/// True while `stream` is being captured into a CUDA graph: a call that would
/// wait for it (read a result back, synchronise) must refuse then.
inline bool stream_is_captured(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  return capture != cudaStreamCaptureStatusNone;
}

}  // namespace tally::detail

/// Checks a CUDA runtime call, naming it in the error.
#define TALLY_CUDA(call) ::tally::detail::check_cuda((call), #call)
/// For callers' own <<<>>> launches: checks that the last launch was accepted
/// (does not wait for it). It reads cudaGetLastError(), so it also reports an
/// error left by an earlier call; tally's own launches use detail::launch
/// (launch.cuh), which checks the launch's own status.
#define TALLY_CUDA_LAUNCHED(kernel_name) ::tally::detail::check_cuda(cudaGetLastError(), "launch of " kernel_name)
