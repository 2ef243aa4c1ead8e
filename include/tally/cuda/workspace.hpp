// Scratch memory for the GPU backend.
//
// Algorithms never allocate behind the caller's back on every call: they draw
// scratch from a tally::workspace, either one the caller passes
// (gpu.with(ws)) or the one tally keeps for each (device, stream). A
// workspace grows with cudaMallocAsync on the stream it is used on, so calls
// stay stream-ordered and capturable in CUDA graphs once it is large enough.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"

namespace tally {

class workspace {
 public:
  /// Bytes at the start of every workspace that are zero whenever no kernel
  /// is using them. Kernels use them as counters and must leave them zero.
  static constexpr std::size_t kZeroedBytes = 64 * 1024;

  workspace() = default;
  ~workspace();
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;

  /// Returns device memory of at least kZeroedBytes + bytes, usable in stream
  /// order on `stream`: the first kZeroedBytes are zero, the rest is scratch.
  /// Grows (stream-ordered) when needed. Pre: the workspace is not used on two
  /// streams at once.
  void* get(std::size_t bytes, cudaStream_t stream);

  /// Bytes held now.
  std::size_t capacity() const { return capacity_; }

 private:
  void* memory_ = nullptr;
  std::size_t capacity_ = 0;
  int device_ = -1;
};

namespace detail {
/// The workspace tally keeps for the current device and `stream`.
workspace& stream_workspace(cudaStream_t stream);
/// The caller's workspace if the backend names one, else stream_workspace().
inline workspace& scratch_for(const gpu_backend& gpu) {
  return gpu.scratch ? *gpu.scratch : stream_workspace(gpu.stream);
}
}  // namespace detail

}  // namespace tally
