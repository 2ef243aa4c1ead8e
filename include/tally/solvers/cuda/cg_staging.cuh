// How a warp of the CG kernels reads the operator for its 32 consecutive rows.
//
// A lane sums its own row (the stored order is the bits' contract, and the
// CPU does the same). Read straight from a CSR matrix, that makes the 32
// lanes of a load instruction touch 32 rows' entries ~27 apart: 27 cache
// lines a load, and the L1's tag lookups, not DRAM, set the SpMV's speed
// (measured: 414 µs an iteration at g = 128 against a 163 µs floor). So a
// warp first copies its rows' entries, one contiguous range, into shared
// memory with coalesced loads, and the lanes then read them from there. A
// stencil reads vectors only and is used as it is.
#pragma once

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tally/solvers/csr.hpp"

namespace tally::solvers::kernels {

/// The default: the operator itself; no shared memory.
template <class Op>
struct warp_rows {
  static constexpr std::size_t kBytesPerWarp = 0;
  const Op& A;
  __device__ warp_rows(const Op& a, unsigned char*) : A(a) {}
  /// The operator for rows first_row .. first_row + 31 (warp-uniform; all
  /// lanes call it).
  __device__ const Op& stage(std::int64_t, std::int64_t) const { return A; }
};

/// A CSR matrix as one warp sees it after staging: rows' entries from shared
/// memory when they fitted, from the matrix otherwise. An operator for the
/// warp's rows only (row_product, diagonal); the same bits as csr_view.
template <class V, class I>
struct staged_csr {
  const csr_view<V, I>& A;
  const V* values;  ///< shared memory: entries base .. base + capacity − 1
  const I* columns;
  std::int64_t base;
  bool staged;

  template <class Acc = V, class Vector>
  __device__ __forceinline__ Acc row_product(std::int64_t i, const Vector& v) const {
    if (!staged) return A.template row_product<Acc>(i, v);
    return csr_row_sum<Acc>(
        read_only(A.offsets + i), read_only(A.offsets + i + 1), [&](std::int64_t k) { return values[k - base]; },
        [&](std::int64_t k) { return columns[k - base]; }, v);
  }
  __device__ __forceinline__ V diagonal(std::int64_t i) const { return A.diagonal(i); }
};

/// Copies src[0, count) to dst[shift, shift + count), where shift = the
/// elements src lies past a 16-byte boundary, so that source and destination
/// agree in alignment: the aligned middle in 16-byte asynchronous copies (a
/// quarter or half of the instructions of element copies), the ends element
/// by element. Returns dst + shift (where src[0] went). Pre: every lane of
/// the warp calls it; dst 16-byte aligned with room for count + 16 /
/// sizeof(X) − 1 elements.
template <class X>
__device__ __forceinline__ X* stage_range_async(X* dst, const X* src, std::int64_t count) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(X));
  const int lane = threadIdx.x & 31;
  const int shift = static_cast<int>((reinterpret_cast<std::uintptr_t>(src) % 16) / sizeof(X));
  const std::int64_t head = shift == 0 ? 0 : std::min<std::int64_t>(kPer - shift, count);  // elements before the first boundary
  const std::int64_t groups = (count - head) / kPer;
  const std::int64_t tail_first = head + groups * kPer;
  X* to = dst + shift;
  if (lane < head) __pipeline_memcpy_async(to + lane, src + lane, sizeof(X));
  for (std::int64_t k = lane; k < groups; k += 32)
    __pipeline_memcpy_async(to + head + k * kPer, src + head + k * kPer, 16);
  if (tail_first + lane < count) __pipeline_memcpy_async(to + tail_first + lane, src + tail_first + lane, sizeof(X));
  return to;
}

template <class V, class I>
struct warp_rows<csr_view<V, I>> {
  /// Entries a warp stages: 32 rows of up to 32 entries each (the 27-point
  /// stencil's 27 fit), 8 KiB a warp for float values and 32-bit indices,
  /// and a 16-byte vector of each more for stage_range_async's shift.
  static constexpr std::int64_t kCapacity = 1024;
  static constexpr std::int64_t kValueSlots = kCapacity + 16 / sizeof(V);
  static constexpr std::int64_t kColumnSlots = kCapacity + 16 / sizeof(I);
  static constexpr std::size_t kBytesPerWarp = kValueSlots * sizeof(V) + kColumnSlots * sizeof(I);
  const csr_view<V, I>& A;
  V* values;
  I* columns;

  /// `shared`: this block's dynamic shared memory, kBytesPerWarp per warp.
  __device__ warp_rows(const csr_view<V, I>& a, unsigned char* shared)
      : A(a),
        values(reinterpret_cast<V*>(shared + (threadIdx.x / 32) * kBytesPerWarp)),
        columns(reinterpret_cast<I*>(shared + (threadIdx.x / 32) * kBytesPerWarp + kValueSlots * sizeof(V))) {}

  /// Copies the entries of rows first_row .. min(first_row + 32, n) − 1 when
  /// they fit. Pre: first_row < n, warp-uniform, every lane calls it.
  __device__ staged_csr<V, I> stage(std::int64_t first_row, std::int64_t n) const {
    const std::int64_t end_row = first_row + 32 < n ? first_row + 32 : n;
    const std::int64_t base = read_only(A.offsets + first_row), count = read_only(A.offsets + end_row) - base;
    __syncwarp();  // the previous rows' readers are done with the buffer
    const bool staged = count <= kCapacity;
    const V* staged_values = values;
    const I* staged_columns = columns;
    if (staged) {
      // Asynchronous copies (cp.async): a lane's copies are all in flight at
      // once instead of one register round trip each (the staged SpMV was
      // latency-bound: 48 % of DRAM bandwidth, measured at g = 128).
      staged_values = stage_range_async(values, A.values + base, count);
      staged_columns = stage_range_async(columns, A.columns + base, count);
      __pipeline_commit();
      __pipeline_wait_prior(0);
    }
    __syncwarp();
    return {A, staged_values, staged_columns, base, staged};
  }
};

/// Dynamic shared memory a block of `threads` threads needs for Op.
template <class Op>
constexpr std::size_t staging_bytes(int threads) {
  return warp_rows<Op>::kBytesPerWarp * static_cast<std::size_t>(threads / 32);
}

/// A stager for phases that do not read the operator.
struct no_rows {
  __device__ int stage(std::int64_t, std::int64_t) const { return 0; }
};

}  // namespace tally::solvers::kernels
