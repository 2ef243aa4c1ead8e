// Scratch memory for the GPU backend.
//
// Algorithms never allocate behind the caller's back on every call: they draw
// scratch from a tally::workspace, either one the caller passes
// (gpu.with(ws)) or the one tally keeps for each (device, stream). A
// workspace grows with cudaMallocAsync on the stream it is used on, so calls
// stay stream-ordered.
//
// CUDA graphs: a call captured into a graph must find its workspace large
// enough already. A workspace never grows while its stream is being
// captured (a graph would record an allocation that the next growth frees,
// and its replays would use freed memory): get() throws tally::error
// instead, saying how many bytes the call needs. Run the call once before
// capturing (that sizes the workspace, the caller's or the stream's), or
// call reserve() first. Every tally algorithm draws its workspace once per
// call, so a call that ran once at the same size never needs more.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"

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
  /// Grows (stream-ordered) when needed; throws tally::error when it would
  /// have to grow while `stream` is being captured into a CUDA graph (see
  /// the top of this file). Pre: the workspace is not used on two streams at once.
  void* get(std::size_t bytes, cudaStream_t stream);

  /// Makes the workspace hold at least kZeroedBytes + bytes now, so that calls
  /// needing up to `bytes` of scratch can be captured. Pre: `stream` is not
  /// being captured (else tally::error).
  void reserve(std::size_t bytes, cudaStream_t stream) { (void)get(bytes, stream); }

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
