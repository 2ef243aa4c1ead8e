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
  // The old block is given back first, and the workspace holds nothing until
  // the new one is in hand: a failed growth must not leave a stale pointer or
  // a capacity that the next call would try to grow from again.
  const std::size_t old_capacity = device == device_ ? capacity_ : 0;
  if (memory_) {
    void* old = memory_;
    memory_ = nullptr;
    capacity_ = 0;
    TALLY_CUDA(cudaFreeAsync(old, stream));
  }
  // Grow by half again so a sweep of sizes does not reallocate every call,
  // but settle for exactly what is needed when the half more does not fit.
  std::size_t grown = std::max(needed, old_capacity + old_capacity / 2);
  void* fresh = nullptr;
  if (grown > needed && cudaMallocAsync(&fresh, grown, stream) != cudaSuccess) {
    (void)cudaGetLastError();  // the failed attempt's error, cleared: the exact size is tried next
    fresh = nullptr;
    grown = needed;
  }
  if (fresh == nullptr) TALLY_CUDA(cudaMallocAsync(&fresh, grown, stream));
  TALLY_CUDA(cudaMemsetAsync(fresh, 0, kZeroedBytes, stream));
  memory_ = fresh;
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
