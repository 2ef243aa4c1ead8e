// How fast a CSR SpMV with tally's row arithmetic (each row summed in stored
// order, every product rounded on its own: csr_row_sum's bits) reads its
// matrix on this GPU (a probe, not a test): y = A·x on the 27-point Poisson
// matrix, f32 values and 32-bit indices, in these forms, each checked against
// the first bit for bit (cuSPARSE, whose sums have other bits, within 1e-5):
//   warp-staged/C  the CG's stager (warp_rows<csr_view>), a warp's 32 rows at a
//                  time; C = 0 sums a row as csr_row_sum does, C > 0 reads its
//                  entries C at a time (row_sum_chunked: C gathers in flight)
//   bulk T/S/C     a block's T rows a tile, the tile's entries fetched by bulk
//                  asynchronous copies (cp.async.bulk, Hopper's TMA engine) S
//                  tiles ahead of the threads that sum them, one mbarrier a slot
//   cusparse ALG1  cusparseSpMV on the same arrays, the peers' kernel
//   read ceiling   a flat float4 read of the values and columns arrays
//
// H100 (bench/results/h100-2026-11-27-csr-spmv-probe-final.txt), µs: g = 128
// warp-staged/0 173.9 (2.71 TB/s counting the matrix, x and y once), /9 176.1,
// best bulk 179.5, cuSPARSE 182.2, read ceiling 147.6 (3.02 TB/s); g = 200
// 695.5, 655.1, 670.4, 693.1, 560.5 (3.05 TB/s). The staged rows read at 85-90 %
// of the flat read ceiling, as fast as cuSPARSE; the bulk copies do not help
// (fewer warps an SM to sum the rows: the gathers of x, not the matrix's
// stream, are what a block waits on). See docs/NOTES.md (thirty-fourth session).
//
//   build-gpu/bench/csr_spmv_probe [G...]   (default 128 200)
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda/ptx>
#include <vector>

#include "tally/cuda/check.cuh"
#include "tally/solvers/cuda/cg_staging.cuh"
#include "tally/solvers/poisson.hpp"
#include "timing.cuh"

namespace {

using tally::solvers::csr_view;
using V = float;
using I = std::int32_t;

// csr_row_sum's bits with the entries read C at a time: a chunk's loads (and
// its gathers of x) all issued before its products are added in order, so a
// thread has C gathers in flight instead of the few an unrolled loop keeps.
template <int C, class ValueAt, class ColumnAt, class Vector>
__device__ __forceinline__ V row_sum_chunked(std::int64_t first, std::int64_t last, const ValueAt& value_at,
                                             const ColumnAt& column_at, const Vector& v) {
  if (first == last) return V(0);
  V acc = 0;
  for (std::int64_t base = first; base < last; base += C) {
    V vals[C], xs[C];
#pragma unroll
    for (int j = 0; j < C; ++j)
      if (base + j < last) {
        vals[j] = value_at(base + j);
        xs[j] = v(static_cast<std::int64_t>(column_at(base + j)));
      }
#pragma unroll
    for (int j = 0; j < C; ++j)
      if (base + j < last) {
        const V prod = tally::detail::multiply_rounded(vals[j], xs[j]);
        acc = base + j == first ? prod : acc + prod;
      }
  }
  return acc;
}

template <int C>
__global__ void warp_staged(csr_view<V, I> A, const V* x, V* y) {
  extern __shared__ __align__(16) unsigned char shared[];
  const tally::solvers::kernels::warp_rows<csr_view<V, I>> rows(A, shared);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w * 32 < A.rows; w += warps) {
    const auto staged = rows.stage(w * 32, A.rows);
    const std::int64_t i = w * 32 + (threadIdx.x & 31);
    if (i >= A.rows) continue;
    const auto at = [&](std::int64_t j) { return __ldg(x + j); };
    if constexpr (C == 0) {
      y[i] = staged.row_product(i, at);
    } else if (staged.staged) {
      y[i] = row_sum_chunked<C>(
          __ldg(A.offsets + i), __ldg(A.offsets + i + 1),
          [&](std::int64_t e) { return staged.values[e - staged.base]; },
          [&](std::int64_t e) { return staged.columns[e - staged.base]; }, at);
    } else {
      y[i] = A.row_product(i, at);
    }
  }
}

// Entries of a tile of T rows a slot holds: 27 a row, and the 16-byte
// rounding at both ends. A tile with more runs from global memory.
template <int T>
constexpr std::int64_t kSlotEntries = T * 27 + 8;

template <int T, int S>
constexpr std::size_t bulk_bytes() {
  return S * kSlotEntries<T> * (sizeof(V) + sizeof(I)) + S * sizeof(std::uint64_t);
}

template <int T, int S, int C>
__global__ void __launch_bounds__(T) bulk(csr_view<V, I> A, const V* x, V* y) {
  extern __shared__ __align__(16) unsigned char shared[];
  V* values = reinterpret_cast<V*>(shared);
  I* columns = reinterpret_cast<I*>(shared + S * kSlotEntries<T> * sizeof(V));
  auto* full = reinterpret_cast<std::uint64_t*>(shared + S * kSlotEntries<T> * (sizeof(V) + sizeof(I)));
  const std::int64_t tiles = (A.rows + T - 1) / T;
  constexpr std::int64_t kAlign = 16 / sizeof(V);  // V and I are both 4 bytes here
  // The aligned range of tile k's entries, or false when it cannot be copied
  // (too many entries, or its rounded end past the arrays).
  const auto range = [&](std::int64_t tile, std::int64_t& a0, std::int64_t& a1) {
    const std::int64_t r0 = tile * T, r1 = std::min<std::int64_t>(r0 + T, A.rows);
    a0 = __ldg(A.offsets + r0) / kAlign * kAlign;
    a1 = (__ldg(A.offsets + r1) + kAlign - 1) / kAlign * kAlign;
    return a1 - a0 <= kSlotEntries<T> && a1 <= A.nnz;
  };
  const auto issue = [&](std::int64_t k) {  // thread 0: tile k of this block into slot k % S
    const std::int64_t tile = blockIdx.x + k * gridDim.x;
    if (tile >= tiles) return;
    const int s = static_cast<int>(k % S);
    std::int64_t a0, a1;
    if (!range(tile, a0, a1)) {
      cuda::ptx::mbarrier_arrive(full + s);
      return;
    }
    const auto bytes = static_cast<std::uint32_t>((a1 - a0) * sizeof(V));
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                         full + s, 2 * bytes);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, values + s * kSlotEntries<T>,
                             A.values + a0, bytes, full + s);
    cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, columns + s * kSlotEntries<T>,
                             A.columns + a0, bytes, full + s);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) cuda::ptx::mbarrier_init(full + s, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int k = 0; k < S; ++k) issue(k);
  for (std::int64_t k = 0;; ++k) {
    const std::int64_t tile = blockIdx.x + k * gridDim.x;
    if (tile >= tiles) break;
    const int s = static_cast<int>(k % S);
    const std::int64_t i = tile * T + threadIdx.x;
    std::int64_t a0, a1;
    const bool copied = range(tile, a0, a1);
    while (!cuda::ptx::mbarrier_try_wait_parity(full + s, static_cast<std::uint32_t>((k / S) & 1))) {
    }
    if (i < A.rows) {
      const auto at = [&](std::int64_t j) { return __ldg(x + j); };
      if (copied) {
        const V* vs = values + s * kSlotEntries<T> - a0;
        const I* cs = columns + s * kSlotEntries<T> - a0;
        y[i] = row_sum_chunked<C>(
            __ldg(A.offsets + i), __ldg(A.offsets + i + 1), [&](std::int64_t e) { return vs[e]; },
            [&](std::int64_t e) { return cs[e]; }, at);
      } else {
        y[i] = A.row_product(i, at);
      }
    }
    __syncthreads();  // slot s is free
    if (threadIdx.x == 0) issue(k + S);
  }
}

__global__ void read_ceiling(const float4* a, std::int64_t n4a, const float4* b, std::int64_t n4b, float* sink) {
  float s = 0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n4a; i += stride) {
    const float4 v = a[i];
    s += v.x + v.y + v.z + v.w;
  }
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n4b; i += stride) {
    const float4 v = b[i];
    s += v.x + v.y + v.z + v.w;
  }
  if (s == 1.2345f) *sink = s;  // keeps the loads
}

// Per-call µs: the bench library's timing (warm-up, batches of calls between
// CUDA events, the median of the trials), on the default stream.
template <class Launch>
double median_us(const Launch& launch) {
  return tally::bench::time_calls(cudaStream_t{},
                                  [&] {
                                    launch();
                                    TALLY_CUDA(cudaGetLastError());
                                  })
      .median_us;
}

#define CUSPARSE(call)                                                           \
  do {                                                                           \
    const cusparseStatus_t st_ = (call);                                         \
    if (st_ != CUSPARSE_STATUS_SUCCESS) {                                        \
      std::fprintf(stderr, "%s:%d cusparse %d\n", __FILE__, __LINE__, int(st_)); \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

template <class T>
T* upload(const std::vector<T>& h) {
  T* d = nullptr;
  TALLY_CUDA(cudaMalloc(&d, h.size() * sizeof(T)));
  TALLY_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct probe {
  csr_view<V, I> A;
  const V* x;
  V* y;
  std::int64_t n;
  double bytes;  // matrix, offsets, x once, y
  std::vector<V> reference;
  int sms;

  std::vector<V> result() const {
    std::vector<V> h(n);
    TALLY_CUDA(cudaMemcpy(h.data(), y, n * sizeof(V), cudaMemcpyDeviceToHost));
    return h;
  }
  void poison() const { TALLY_CUDA(cudaMemset(y, 0xff, n * sizeof(V))); }
  // "same bits" or the first differing row; for cuSPARSE the largest relative difference.
  const char* verdict(bool exact, char* buf) const {
    const auto h = result();
    double worst = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (exact && std::memcmp(&h[i], &reference[i], sizeof(V)) != 0) {
        std::snprintf(buf, 64, "DIFF at row %lld", static_cast<long long>(i));
        return buf;
      }
      const double d = std::fabs(double(h[i]) - reference[i]) / std::max(1.0, std::fabs(double(reference[i])));
      if (!(d <= worst)) worst = d;
    }
    if (exact) return "same bits";
    std::snprintf(buf, 64, "max rel diff %.2e%s", worst, worst < 1e-5 ? "" : " BAD");
    return buf;
  }
  void report(const char* name, double us, const char* check) const {
    std::printf("  %-22s %8.1f us %6.0f GB/s  %s\n", name, us, bytes / us / 1e3, check);
  }

  // The first call's bits become the reference: checked against a host sum
  // of the same order; later calls are checked against them.
  template <int C>
  void run_staged(const tally::solvers::host_csr<V, I>& h, const std::vector<V>& hx) {
    namespace k = tally::solvers::kernels;
    const std::size_t smem = k::staging_bytes<csr_view<V, I>>(256);
    TALLY_CUDA(cudaFuncSetAttribute(warp_staged<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, warp_staged<C>, 256, smem));
    const int blocks = per_sm * sms;
    poison();
    const double us = median_us([&] { warp_staged<C><<<blocks, 256, smem>>>(A, x, y); });
    char name[64], buf[64];
    std::snprintf(name, sizeof name, "warp-staged/%d (%d an SM)", C, per_sm);
    if (!reference.empty()) {
      report(name, us, verdict(true, buf));
      return;
    }
    reference = result();
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      float acc = 0;
      for (I e = h.offsets[i]; e < h.offsets[i + 1]; ++e) {
        const volatile float prod = h.values[e] * hx[h.columns[e]];  // rounded on its own
        acc = e == h.offsets[i] ? prod : acc + prod;
      }
      if (std::memcmp(&acc, &reference[i], sizeof acc) != 0) ++wrong;
    }
    report(name, us, wrong == 0 ? "the host's bits" : "NOT THE HOST'S BITS");
  }

  template <int T, int S, int C>
  void run_bulk() const {
    constexpr std::size_t smem = bulk_bytes<T, S>();
    TALLY_CUDA(cudaFuncSetAttribute(bulk<T, S, C>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bulk<T, S, C>, T, smem));
    if (per_sm == 0) {
      std::printf("  bulk %d/%d: does not fit\n", T, S);
      return;
    }
    const int blocks = per_sm * sms;
    poison();
    const double us = median_us([&] { bulk<T, S, C><<<blocks, T, smem>>>(A, x, y); });
    char name[64], buf[64];
    std::snprintf(name, sizeof name, "bulk %d/%d/%d (%d an SM)", T, S, C, per_sm);
    report(name, us, verdict(true, buf));
  }
};

void run(std::int64_t g) {
  const auto h = tally::solvers::poisson3d_27pt<V, I>(g);
  const std::int64_t n = h.rows, nnz = h.nnz();
  std::vector<V> hx(n);
  std::srand(7);
  for (auto& v : hx) v = static_cast<V>(std::rand()) / RAND_MAX - 0.5f;  // signs mixed: order matters
  I* offsets = upload(h.offsets);
  I* columns = upload(h.columns);
  V* values = upload(h.values);
  V* x = upload(hx);
  V* y = nullptr;
  TALLY_CUDA(cudaMalloc(&y, n * sizeof(V)));
  int device = 0, sms = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  TALLY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  probe p{{n, n, nnz, offsets, columns, values},
          x,
          y,
          n,
          double(nnz) * (sizeof(V) + sizeof(I)) + double(n + 1) * sizeof(I) + 2.0 * n * sizeof(V),
          {},
          sms};
  std::printf("g = %lld: %lld rows, %lld entries, %.0f MB an SpMV\n", static_cast<long long>(g),
              static_cast<long long>(n), static_cast<long long>(nnz), p.bytes / 1e6);

  // warp-staged: the reference bits (checked against a host sum of the same order)
  p.run_staged<0>(h, hx);
  p.run_staged<9>(h, hx);
  p.run_staged<27>(h, hx);
  p.run_bulk<256, 2, 9>();
  p.run_bulk<256, 3, 9>();
  p.run_bulk<128, 4, 9>();
  p.run_bulk<256, 3, 27>();
  p.run_bulk<128, 4, 27>();
  {  // cuSPARSE
    cusparseHandle_t handle;
    CUSPARSE(cusparseCreate(&handle));
    cusparseSpMatDescr_t mat;
    cusparseDnVecDescr_t vx, vy;
    CUSPARSE(cusparseCreateCsr(&mat, n, n, nnz, offsets, columns, values, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    CUSPARSE(cusparseCreateDnVec(&vx, n, x, CUDA_R_32F));
    CUSPARSE(cusparseCreateDnVec(&vy, n, y, CUDA_R_32F));
    const float one = 1, zero = 0;
    std::size_t size = 0;
    CUSPARSE(cusparseSpMV_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vx, &zero, vy, CUDA_R_32F,
                                     CUSPARSE_SPMV_CSR_ALG1, &size));
    void* buffer = nullptr;
    TALLY_CUDA(cudaMalloc(&buffer, std::max<std::size_t>(size, 1)));
    p.poison();
    const double us = median_us([&] {
      CUSPARSE(cusparseSpMV(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, mat, vx, &zero, vy, CUDA_R_32F,
                            CUSPARSE_SPMV_CSR_ALG1, buffer));
    });
    char buf[64];
    p.report("cusparse ALG1", us, p.verdict(false, buf));
    TALLY_CUDA(cudaFree(buffer));
    cusparseDestroyDnVec(vx);
    cusparseDestroyDnVec(vy);
    cusparseDestroySpMat(mat);
    cusparseDestroy(handle);
  }
  {  // the read ceiling of the same matrix bytes
    float* sink = nullptr;
    TALLY_CUDA(cudaMalloc(&sink, sizeof(float)));
    const double us = median_us([&] {
      read_ceiling<<<sms * 8, 256>>>(reinterpret_cast<const float4*>(values), nnz / 4,
                                     reinterpret_cast<const float4*>(columns), nnz / 4, sink);
    });
    std::printf("  %-22s %8.1f us %6.0f GB/s  (values + columns only: %.0f MB)\n", "read ceiling", us,
                double(nnz / 4) * 32 / us / 1e3, double(nnz / 4) * 32 / 1e6);
    TALLY_CUDA(cudaFree(sink));
  }
  for (void* ptr : {static_cast<void*>(offsets), static_cast<void*>(columns), static_cast<void*>(values),
                    static_cast<void*>(x), static_cast<void*>(y)})
    TALLY_CUDA(cudaFree(ptr));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> grids;
  for (int a = 1; a < argc; ++a) grids.push_back(std::atoll(argv[a]));
  if (grids.empty()) grids = {128, 200};
  for (const auto g : grids) run(g);
  return 0;
}
