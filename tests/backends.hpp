// The two backends as test parameters: every behaviour is written once as a
// typed test over `backends` and runs on tally::cpu and tally::gpu.
//
// GPU tests skip, saying why, where no GPU is usable (no device, or the CUDA
// error at initialisation). With TALLY_REQUIRE_GPU=1 in the environment
// (scripts/gpu-check sets it) every such skip is a FAILURE instead, so GPU
// coverage cannot vanish on a machine whose driver is broken.
//
// Naming convention (scripts/gpu-check selects the GPU tests by name, for
// compute-sanitizer, with the filter "*/gpu*-*.Huge*"); every test file
// follows it:
//   * A test that runs on the GPU has an instance name starting with "gpu":
//     typed tests over `backends` are "Suite/cpu.Name" and "Suite/gpu.Name"
//     (TYPED_TEST_SUITE(Suite, backends, backend_names)). A behaviour that
//     exists only on the GPU is a typed test over `gpu_only` ("Suite/gpu.Name"),
//     never a TEST/TEST_F and never a CPU instance that skips. GPU-only suites
//     typed over other parameters name their instances "gpu_<parameter>"
//     (see gpu_names). Their fixtures derive from on_backend<gpu_side>.
//   * No CPU test's full name contains "/gpu".
//   * A test too large for compute-sanitizer (more than 2^31 elements or a
//     few GB of memory) has a name starting with "Huge" ("Suite/gpu.HugeName").
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "tally/cuda/check.cuh"
#include "tally/tally.hpp"

namespace tally::testing {

/// Whether a CUDA device can run kernels here, and if not, why.
struct gpu_probe {
  bool usable = false;
  std::string why;  ///< empty when usable
};

/// Probes the GPU once: a device count, then the context's creation (a broken
/// driver or a device in a bad state fails there, not at the count).
inline const gpu_probe& gpu_state() {
  static const gpu_probe probe = [] {
    const auto error = [](const char* call, cudaError_t e) {
      return gpu_probe{false, std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
    };
    int count = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) return error("cudaGetDeviceCount", e);
    if (count == 0) return gpu_probe{false, "no CUDA device on this machine"};
    if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return error("CUDA initialisation (cudaFree(0))", e);
    return gpu_probe{true, ""};
  }();
  return probe;
}

/// True when a CUDA device can run kernels here.
inline bool gpu_present() { return gpu_state().usable; }

/// True when TALLY_REQUIRE_GPU is set (and not "0"): GPU skips then fail.
inline bool gpu_required() {
  const char* s = std::getenv("TALLY_REQUIRE_GPU");
  return s != nullptr && *s != '\0' && std::strcmp(s, "0") != 0;
}

/// True when TALLY_UNDER_SANITIZER is set (and not "0"); scripts/gpu-check sets it for
/// its compute-sanitizer runs. The tools slow kernels 10-100x, so tests whose larger
/// cases add volume but no code path then keep to their smaller ones.
inline bool under_sanitizer() {
  const char* s = std::getenv("TALLY_UNDER_SANITIZER");
  return s != nullptr && *s != '\0' && std::strcmp(s, "0") != 0;
}

}  // namespace tally::testing

/// Ends the current GPU test (in a test body or SetUp) with `reason`: a skip,
/// or a failure when TALLY_REQUIRE_GPU=1.
#define TALLY_GPU_TEST_CANNOT_RUN(reason)                                                                  \
  do {                                                                                                     \
    if (::tally::testing::gpu_required())                                                                  \
      GTEST_FAIL() << "GPU test not run under TALLY_REQUIRE_GPU=1: " << (reason);                        \
    else                                                                                                   \
      GTEST_SKIP() << "GPU test skipped: " << (reason);                                                    \
  } while (0)

/// In a GPU test's body or SetUp: skips (fails under TALLY_REQUIRE_GPU=1)
/// when no GPU is usable.
#define TALLY_REQUIRE_GPU_OR_SKIP()                                                                        \
  do {                                                                                                     \
    if (!::tally::testing::gpu_present()) TALLY_GPU_TEST_CANNOT_RUN(::tally::testing::gpu_state().why);    \
  } while (0)

namespace tally::testing {

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
};

struct gpu_side {
  static constexpr const char* name = "gpu";
  static constexpr bool on_gpu = true;
  static tally::gpu_backend backend() { return tally::gpu; }
};

using backends = ::testing::Types<cpu_side, gpu_side>;
/// Behaviours that exist only on the GPU (instance name "gpu").
using gpu_only = ::testing::Types<gpu_side>;

struct backend_names {
  template <class T>
  static std::string GetName(int) { return T::name; }
};

/// Instance names "gpu_0", "gpu_1", ... for GPU-only suites typed over
/// other parameters (so the sanitizer's "*/gpu*" selects them).
struct gpu_names {
  template <class T>
  static std::string GetName(int i) { return "gpu_" + std::to_string(i); }
};

/// Fixture base: GPU instances skip where no GPU is usable (and fail under
/// TALLY_REQUIRE_GPU=1).
template <class Side>
class on_backend : public ::testing::Test {
 protected:
  void SetUp() override {
    if constexpr (Side::on_gpu) TALLY_REQUIRE_GPU_OR_SKIP();
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
