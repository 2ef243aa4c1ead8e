// cuBLAS dot products with the result left in device memory
// (CUBLAS_POINTER_MODE_DEVICE), so a call queues work and does not wait.
#include <climits>
#include <memory>
#include <string>

#include <cublas_v2.h>

#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"

namespace tally::bench {

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw tally::error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}

/// A handle bound to `stream` that writes results to device memory.
std::shared_ptr<cublasContext> device_pointer_handle(cudaStream_t stream) {
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  std::shared_ptr<cublasContext> owned(handle, [](cublasHandle_t h) { cublasDestroy(h); });
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  check_cublas(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
  return owned;
}

cublasStatus_t dot(cublasHandle_t h, int n, const float* x, const float* y, float* out) {
  return cublasSdot(h, n, x, 1, y, 1, out);
}
cublasStatus_t dot(cublasHandle_t h, int n, const double* x, const double* y, double* out) {
  return cublasDdot(h, n, x, 1, y, 1, out);
}

}  // namespace

template <class T>
reduce_peer cublas_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream) {
  if (n > INT_MAX) throw tally::error("cublas_dot: n = " + std::to_string(n) + " exceeds cuBLAS's int sizes");
  auto handle = device_pointer_handle(stream);
  const int count = static_cast<int>(n);
  reduce_peer call;
  call.p.name = "cublas";
  call.p.run = [=] { check_cublas(dot(handle.get(), count, x, y, out), "cublas<S|D>dot"); };
  detail::device_result(call, out, stream);
  call.p.note = "CUBLAS_POINTER_MODE_DEVICE";
  return call;
}

std::string cublas_version() {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

template reduce_peer cublas_dot<float>(const float*, const float*, std::int64_t, float*, cudaStream_t);
template reduce_peer cublas_dot<double>(const double*, const double*, std::int64_t, double*, cudaStream_t);

}  // namespace tally::bench
