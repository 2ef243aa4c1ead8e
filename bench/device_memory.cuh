// Device buffers and a stream owned for a benchmark's run (RAII, every CUDA
// call checked), and reading results back for checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::bench {

/// `count` elements of T in device memory, freed on destruction.
/// Pre: count >= 0 (0 allocates one element, so data() is never null).
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::int64_t count) : count_(count) {
    TALLY_CUDA(cudaMalloc(&data_, static_cast<std::size_t>(count > 0 ? count : 1) * sizeof(T)));
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
    other.count_ = 0;
  }
  device_buffer& operator=(device_buffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~device_buffer() { cudaFree(data_); }
  T* data() const { return data_; }
  std::int64_t size() const { return count_; }
  std::size_t bytes() const { return static_cast<std::size_t>(count_) * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::int64_t count_ = 0;
};

/// A non-blocking stream, synchronised and destroyed with its owner.
/// Declare it before the buffers used on it, so it goes last.
class owned_stream {
 public:
  owned_stream() { TALLY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
  ~owned_stream() {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Waits for `stream`, then copies count elements from device memory.
template <class T>
std::vector<T> read_back(const T* device, std::int64_t count, cudaStream_t stream) {
  std::vector<T> host(static_cast<std::size_t>(count));
  TALLY_CUDA(cudaStreamSynchronize(stream));
  if (count > 0)
    TALLY_CUDA(cudaMemcpy(host.data(), device, static_cast<std::size_t>(count) * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// Waits for `stream`, then returns *device.
template <class T>
T read_value(const T* device, cudaStream_t stream) {
  T value{};
  TALLY_CUDA(cudaStreamSynchronize(stream));
  TALLY_CUDA(cudaMemcpy(&value, device, sizeof(T), cudaMemcpyDeviceToHost));
  return value;
}

/// Queues a fill of `bytes` bytes of `device` with `byte` (a poison pattern:
/// 0xFF makes floats NaN and integers -1).
inline void poison(void* device, std::size_t bytes, cudaStream_t stream, int byte = 0xFF) {
  TALLY_CUDA(cudaMemsetAsync(device, byte, bytes, stream));
}

}  // namespace tally::bench
