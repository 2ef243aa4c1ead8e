// validate_csr() on the GPU backend (validate_csr.hpp has the CPU one and
// the checks both share).
#pragma once

#include <cstdint>
#include <string>

#include "tally/core/backend.hpp"
#include "tally/cuda/dispatch/pointer_checks.hpp"
#include "tally/cuda/reduce.cuh"
#include "tally/solvers/csr.hpp"
#include "tally/solvers/validate_csr.hpp"

namespace tally::solvers {

namespace detail {
/// Throws invalid_argument when an array of `a` that holds entries is not
/// memory the current device can read (host memory would crash its kernels).
template <class V, class I>
void check_csr_device_pointers(const char* function, const char* argument, const csr_view<V, I>& a) {
  const std::string name(argument);
  tally::detail::check_device_pointer(function, (name + ".offsets").c_str(), a.offsets, a.rows > 0 ? a.rows + 1 : 0);
  tally::detail::check_device_pointer(function, (name + ".columns").c_str(), a.columns, a.nnz);
  tally::detail::check_device_pointer(function, (name + ".values").c_str(), a.values, a.nnz);
}
}  // namespace detail

/// validate_csr() (validate_csr.hpp) of a matrix in device memory, on
/// gpu.stream; the arrays must also be memory the device can read. Runs
/// four small reductions and waits for the stream once, for their counts:
/// not while the stream is being captured into a CUDA graph (tally::error).
/// Post: returns when valid; throws invalid_argument naming 'a' otherwise.
template <class V, class I>
void validate_csr(const gpu_backend& gpu, const csr_view<V, I>& a) {
  detail::check_csr_layout("validate_csr", "a", a);
  detail::check_csr_device_pointers("validate_csr", "a", a);
  detail::check_csr_entries(gpu, a, "validate_csr", "a");
}

}  // namespace tally::solvers
