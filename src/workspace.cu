#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "tally/cuda/check.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally {

workspace::~workspace() {
  // Freed in stream order would need the stream; by destruction time the
  // owner has finished with it, so a plain free (which waits) is right.
  if (memory_) cudaFree(memory_);
}

void* workspace::get(std::size_t bytes, cudaStream_t stream) {
  const std::size_t needed = kZeroedBytes + bytes;
  int device = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  if (memory_ && needed <= capacity_ && device == device_) return memory_;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TALLY_CUDA(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    throw error("tally: the workspace must grow to " + std::to_string(needed) + " bytes (it holds " +
                std::to_string(device == device_ ? capacity_ : 0) +
                ") while its stream is being captured into a CUDA graph, which cannot replay the allocation; "
                "run the call once before capturing, or call workspace::reserve(" + std::to_string(bytes) +
                ", stream) first");
  if (memory_) TALLY_CUDA(cudaFreeAsync(memory_, stream));
  // Grow by half again so a sweep of sizes does not reallocate every call.
  const std::size_t grown = std::max(needed, capacity_ + capacity_ / 2);
  TALLY_CUDA(cudaMallocAsync(&memory_, grown, stream));
  TALLY_CUDA(cudaMemsetAsync(memory_, 0, kZeroedBytes, stream));
  capacity_ = grown;
  device_ = device;
  return memory_;
}

namespace detail {

workspace& stream_workspace(cudaStream_t stream) {
  // One workspace per (device, stream), kept for the life of the process: a
  // stream's calls are ordered, so they can share it safely.
  static std::mutex lock;
  static std::map<std::pair<int, cudaStream_t>, workspace> pool;
  int device = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  std::lock_guard<std::mutex> guard(lock);
  return pool[{device, stream}];
}

}  // namespace detail
}  // namespace tally
