// Checks that a pointer given to the GPU backend is memory the device can
// read: device, managed or pinned (mapped) host memory.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "tally/core/error.hpp"
#include "tally/cuda/check.cuh"

namespace tally::detail {

/// Throws invalid_argument when p (n > 0 elements) is plain host memory or
/// device memory of another GPU. Costs one driver query (about a microsecond).
template <class T>
void check_device_pointer(const char* function, const char* argument, const T* p, std::int64_t n) {
  if (n == 0 || p == nullptr) return;
  cudaPointerAttributes attributes{};
  TALLY_CUDA(cudaPointerGetAttributes(&attributes, p));
  switch (attributes.type) {
    case cudaMemoryTypeDevice: {
      int device = 0;
      TALLY_CUDA(cudaGetDevice(&device));
      if (attributes.device != device)
        throw_invalid_argument(function, argument,
                               "is memory of device " + std::to_string(attributes.device) +
                                   " but the current device is " + std::to_string(device));
      return;
    }
    case cudaMemoryTypeManaged:
      return;
    case cudaMemoryTypeHost:
      if (attributes.devicePointer != nullptr) return;  // pinned and mapped: readable by the device
      [[fallthrough]];
    default:
      throw_invalid_argument(function, argument,
                             "is host memory; the GPU backend needs device, managed or pinned memory");
  }
}

}  // namespace tally::detail
