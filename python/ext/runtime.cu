// What the bindings need of the CUDA runtime itself: whether a GPU is usable,
// the current device, stream ordering for __cuda_array_interface__ producers,
// and dtype names.
#include <cuda_runtime.h>

#include <atomic>

#include <tally/cuda/check.cuh>

#include "ops.hpp"

namespace tally_py {

const char* name_of(dtype t) {
  switch (t) {
    case dtype::f16: return "float16";
    case dtype::bf16: return "bfloat16";
    case dtype::f32: return "float32";
    case dtype::f64: return "float64";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
  }
  return "?";
}

namespace {

/// CUDA devices this process sees, once a call found one (the count is fixed
/// when CUDA initialises); 0 until then.
std::atomic<int> visible_devices{0};

}  // namespace

bool gpu_available(std::string* why) {
  // Asked by every call on CUDA arrays: a yes is kept (a device that breaks
  // later fails the call's own CUDA calls), a no is asked again, for its reason.
  if (visible_devices.load(std::memory_order_relaxed) > 0) return true;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    *why = std::string("no usable CUDA device (") + cudaGetErrorString(status) + ")";
    cudaGetLastError();  // clear the sticky-free error so later queries start clean
    return false;
  }
  if (count == 0) {
    *why = "no CUDA device present";
    return false;
  }
  visible_devices.store(count, std::memory_order_relaxed);
  return true;
}

device_guard::device_guard(int device) {
  // The only device of a one-device process is current on every thread:
  // nothing to ask or set (a small call's path, see gpu_available).
  if (device == 0 && visible_devices.load(std::memory_order_relaxed) == 1) return;
  int current = 0;
  TALLY_CUDA(cudaGetDevice(&current));
  if (current != device) {
    TALLY_CUDA(cudaSetDevice(device));
    previous_ = current;
  }
}

device_guard::~device_guard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

void stream_wait(CUstream_st* consumer, CUstream_st* producer) {
  cudaEvent_t event{};
  TALLY_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  TALLY_CUDA(cudaEventRecord(event, producer));
  TALLY_CUDA(cudaStreamWaitEvent(consumer, event, 0));
  TALLY_CUDA(cudaEventDestroy(event));  // released once the wait has been queued
}

int device_of(const void* pointer) {
  cudaPointerAttributes attributes{};
  TALLY_CUDA(cudaPointerGetAttributes(&attributes, pointer));
  return attributes.device;
}

}  // namespace tally_py
