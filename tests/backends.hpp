// The two backends as test parameters: every behaviour is written once as a
// typed test over `backends` and runs on tally::cpu and tally::gpu. GPU
// instances skip, saying why, where no GPU is present.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tally/cuda/check.cuh"
#include "tally/tally.hpp"

namespace tally::testing {

/// True when a CUDA device can run kernels here.
inline bool gpu_present() {
  static const bool present = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return present;
}

/// Memory of the backend's side holding n elements of T. Starts poisoned
/// (every byte 0xA5: NaN-free but never a plausible result) so unwritten
/// outputs show; read() copies it back to the host.
template <class T>
class buffer {
 public:
  buffer(bool on_gpu, std::size_t n, std::size_t offset_elements = 0)
      : on_gpu_(on_gpu), n_(n), offset_(offset_elements) {
    const std::size_t bytes = (n + offset_) * sizeof(T) + 64;
    if (on_gpu_) TALLY_CUDA(cudaMalloc(&raw_, bytes));
    else raw_ = ::operator new(bytes);
    poison();
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() {
    if (on_gpu_) cudaFree(raw_);
    else ::operator delete(raw_);
  }
  /// The first element (offset by `offset_elements` from an aligned allocation).
  T* data() { return reinterpret_cast<T*>(static_cast<char*>(raw_)) + offset_; }
  std::size_t size() const { return n_; }
  void write(const std::vector<T>& host) {
    if (on_gpu_) TALLY_CUDA(cudaMemcpy(data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    else std::memcpy(static_cast<void*>(data()), host.data(), host.size() * sizeof(T));
  }
  std::vector<T> read() {
    std::vector<T> host(n_);
    if (on_gpu_) {
      TALLY_CUDA(cudaDeviceSynchronize());
      TALLY_CUDA(cudaMemcpy(host.data(), data(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(static_cast<void*>(host.data()), data(), n_ * sizeof(T));
    }
    return host;
  }
  void poison() {
    const std::size_t bytes = (n_ + offset_) * sizeof(T);
    if (on_gpu_) TALLY_CUDA(cudaMemset(raw_, 0xA5, bytes));
    else std::memset(raw_, 0xA5, bytes);
  }

 private:
  bool on_gpu_;
  std::size_t n_, offset_;
  void* raw_ = nullptr;
};

struct cpu_side {
  static constexpr const char* name = "cpu";
  static constexpr bool on_gpu = false;
  static tally::cpu_backend backend() { return tally::cpu; }
  static bool available() { return true; }
};

struct gpu_side {
  static constexpr const char* name = "gpu";
  static constexpr bool on_gpu = true;
  static tally::gpu_backend backend() { return tally::gpu; }
  static bool available() { return gpu_present(); }
};

using backends = ::testing::Types<cpu_side, gpu_side>;

struct backend_names {
  template <class T>
  static std::string GetName(int) { return T::name; }
};

/// Fixture base: skips GPU instances where no GPU is present.
template <class Side>
class on_backend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Side::available()) GTEST_SKIP() << "no CUDA GPU on this machine: GPU test skipped";
  }
  template <class T>
  buffer<T> make(std::size_t n, std::size_t offset = 0) { return buffer<T>(Side::on_gpu, n, offset); }
};

/// Expects call() to throw tally::invalid_argument whose message holds every
/// one of `words` (the function and the argument, at least).
template <class Call>
void expect_invalid(const Call& call, std::initializer_list<std::string> words) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected tally::invalid_argument mentioning " << *words.begin();
  } catch (const tally::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing from: " << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected tally::invalid_argument, got: " << e.what();
  }
}

}  // namespace tally::testing
