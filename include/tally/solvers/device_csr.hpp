// A CSR matrix owning its arrays in device memory, copied from a host one.
// Host code (needs only the CUDA runtime), so plain C++ files can use it.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"
#include "tally/cuda/check.cuh"
#include "tally/solvers/csr.hpp"
#include "tally/solvers/validate_csr.hpp"

namespace tally::solvers {

/// Invariant: the arrays hold a valid CSR matrix (validate_csr) in memory of
/// the device current at construction, or none (rows = nnz = 0).
template <class Value, class Index>
class device_csr {
 public:
  device_csr() = default;
  /// Copies `host` to the current device (synchronously: this is set-up,
  /// outside any solve), after checking its structure on the CPU
  /// (validate_csr, one pass over the offsets and columns: so that views of
  /// a device_csr need no check on the GPU). Throws invalid_argument for an
  /// invalid matrix, cuda_error when memory runs out.
  explicit device_csr(const host_csr<Value, Index>& host) : rows_(host.rows), cols_(host.cols), nnz_(host.nnz()) {
    validate_csr(tally::cpu, host.view());
    try {
      copy_in(offsets_, host.offsets.data(), host.offsets.size());
      copy_in(columns_, host.columns.data(), host.columns.size());
      copy_in(values_, host.values.data(), host.values.size());
    } catch (...) {
      release();
      throw;
    }
  }
  device_csr(const device_csr&) = delete;
  device_csr& operator=(const device_csr&) = delete;
  device_csr(device_csr&& other) noexcept { swap(other); }
  device_csr& operator=(device_csr&& other) noexcept {
    if (this != &other) {
      release();
      swap(other);
    }
    return *this;
  }
  ~device_csr() { release(); }

  /// A view of the device arrays, for the GPU backend.
  csr_view<Value, Index> view() const { return {rows_, cols_, nnz_, offsets_, columns_, values_}; }
  /// Rows of the matrix (0 when default-constructed or moved from). Post: >= 0.
  std::int64_t rows() const { return rows_; }
  /// Stored entries, offsets[rows] (0 when default-constructed or moved from). Post: >= 0.
  std::int64_t nnz() const { return nnz_; }

 private:
  template <class T>
  static void copy_in(T*& to, const T* from, std::size_t n) {
    TALLY_CUDA(cudaMalloc(reinterpret_cast<void**>(&to), (n > 0 ? n : 1) * sizeof(T)));
    if (n > 0) TALLY_CUDA(cudaMemcpy(to, from, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  void release() noexcept {
    cudaFree(offsets_);
    cudaFree(columns_);
    cudaFree(values_);
    offsets_ = columns_ = nullptr;
    values_ = nullptr;
  }
  void swap(device_csr& o) noexcept {
    std::swap(rows_, o.rows_);
    std::swap(cols_, o.cols_);
    std::swap(nnz_, o.nnz_);
    std::swap(offsets_, o.offsets_);
    std::swap(columns_, o.columns_);
    std::swap(values_, o.values_);
  }
  std::int64_t rows_ = 0, cols_ = 0, nnz_ = 0;
  Index* offsets_ = nullptr;
  Index* columns_ = nullptr;
  Value* values_ = nullptr;
};

}  // namespace tally::solvers
