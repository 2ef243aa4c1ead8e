// Output buffers with guard zones, for the tests that check what a rejected
// or failing call leaves behind: `guard` elements before and after the body,
// all poisoned, so that any write outside the body, and any write at all by
// a call that must write nothing, shows.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tally/cuda/check.cuh"

namespace tally::testing {

template <class T>
class guarded {
 public:
  static constexpr std::size_t kGuard = 64;

  guarded(bool on_gpu, std::size_t n) : on_gpu_(on_gpu), n_(n) {
    const std::size_t bytes = (n + 2 * kGuard) * sizeof(T);
    if (on_gpu_)
      TALLY_CUDA(cudaMalloc(&raw_, bytes));
    else
      raw_ = ::operator new(bytes);
    if (on_gpu_)
      TALLY_CUDA(cudaMemset(raw_, 0xA5, bytes));
    else
      std::memset(raw_, 0xA5, bytes);
  }
  guarded(const guarded&) = delete;
  guarded& operator=(const guarded&) = delete;
  ~guarded() {
    if (on_gpu_)
      cudaFree(raw_);
    else
      ::operator delete(raw_);
  }

  T* data() { return static_cast<T*>(raw_) + kGuard; }
  std::size_t size() const { return n_; }

  void write(const std::vector<T>& body) {
    if (on_gpu_)
      TALLY_CUDA(cudaMemcpy(data(), body.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    else
      std::memcpy(static_cast<void*>(data()), body.data(), n_ * sizeof(T));
  }
  /// Every byte, guards included.
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> all((n_ + 2 * kGuard) * sizeof(T));
    if (on_gpu_) {
      TALLY_CUDA(cudaDeviceSynchronize());
      TALLY_CUDA(cudaMemcpy(all.data(), raw_, all.size(), cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(all.data(), raw_, all.size());
    }
    return all;
  }
  std::vector<T> read() const {
    const auto all = bytes();
    std::vector<T> body(n_);
    std::memcpy(static_cast<void*>(body.data()), all.data() + kGuard * sizeof(T), n_ * sizeof(T));
    return body;
  }
  /// The guards still hold the poison (0xA5 bytes).
  ::testing::AssertionResult guards_intact() const {
    const auto all = bytes();
    const std::size_t guard_bytes = kGuard * sizeof(T);
    for (std::size_t b = 0; b < guard_bytes; ++b) {
      if (all[b] != 0xA5) return ::testing::AssertionFailure() << "guard before the output written at byte " << b;
      if (all[all.size() - 1 - b] != 0xA5)
        return ::testing::AssertionFailure() << "guard after the output written at byte " << b << " from the end";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  bool on_gpu_;
  std::size_t n_;
  void* raw_ = nullptr;
};

/// Expects that no byte of `out` (body and guards) differs from `before`.
template <class T>
::testing::AssertionResult unchanged(const guarded<T>& out, const std::vector<unsigned char>& before) {
  const auto now = out.bytes();
  for (std::size_t b = 0; b < now.size(); ++b)
    if (now[b] != before[b]) return ::testing::AssertionFailure() << "output byte " << b << " changed";
  return ::testing::AssertionSuccess();
}

/// Captures record() on `stream` into a CUDA graph; returns the executable graph.
template <class Record>
cudaGraphExec_t capture_graph(cudaStream_t stream, const Record& record) {
  cudaGraph_t graph;
  TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  record();
  TALLY_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  TALLY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  TALLY_CUDA(cudaGraphDestroy(graph));
  return exec;
}

}  // namespace tally::testing
