// Seed 004's ladder of CUDA CG implementations (see cg_peers.hpp), rebuilt
// step by step as the seed describes them: cusparseScsrmv is gone from
// cuSPARSE, so SpMV is the generic cusparseSpMV on the same CSR arrays.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include "cg_peers.hpp"
#include "tally/cuda/check.cuh"

namespace tally::bench::cg {

const char* rung_name(rung r) {
  switch (r) {
    case rung::sample: return "seed-sample";
    case rung::jacobi: return "seed-impl1";
    case rung::device_scalars: return "seed-impl2";
    case rung::own_dot: return "seed-impl3";
    case rung::fused: return "seed-impl4";
    case rung::mapped_flag: return "seed-impl5";
  }
  return "?";
}

namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("cuBLAS: ") + what + " failed: " + std::to_string(s));
}
void check_cusparse(cusparseStatus_t s, const char* what) {
  if (s != CUSPARSE_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuSPARSE: ") + what + ": " + cusparseGetErrorString(s));
}
#define PEER_CUBLAS(call) check_cublas((call), #call)
#define PEER_CUSPARSE(call) check_cusparse((call), #call)

// cuBLAS by type.
cublasStatus_t axpy(cublasHandle_t h, int n, const float* a, const float* x, float* y) { return cublasSaxpy(h, n, a, x, 1, y, 1); }
cublasStatus_t axpy(cublasHandle_t h, int n, const double* a, const double* x, double* y) { return cublasDaxpy(h, n, a, x, 1, y, 1); }
cublasStatus_t dot(cublasHandle_t h, int n, const float* x, const float* y, float* r) { return cublasSdot(h, n, x, 1, y, 1, r); }
cublasStatus_t dot(cublasHandle_t h, int n, const double* x, const double* y, double* r) { return cublasDdot(h, n, x, 1, y, 1, r); }
cublasStatus_t scal(cublasHandle_t h, int n, const float* a, float* x) { return cublasSscal(h, n, a, x, 1); }
cublasStatus_t scal(cublasHandle_t h, int n, const double* a, double* x) { return cublasDscal(h, n, a, x, 1); }
cublasStatus_t copy(cublasHandle_t h, int n, const float* x, float* y) { return cublasScopy(h, n, x, 1, y, 1); }
cublasStatus_t copy(cublasHandle_t h, int n, const double* x, double* y) { return cublasDcopy(h, n, x, 1, y, 1); }
template <class T>
constexpr cudaDataType kType = sizeof(T) == 4 ? CUDA_R_32F : CUDA_R_64F;

/// The scalars the device-pointer rungs keep on the device.
template <class T>
struct scalars {
  T dot, rr, rz, rz_old, alpha, nalpha, beta, one, zero;
};

constexpr int kBlock = 256;

template <class T>
__global__ void jacobi_kernel(const T* dinv, const T* r, T* z, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = dinv[i] * r[i];
}
template <class T>
__global__ void alpha_kernel(scalars<T>* s) {
  s->alpha = s->rz / s->dot;
  s->nalpha = -s->alpha;
}
template <class T>
__global__ void beta_kernel(scalars<T>* s) {
  s->beta = s->rz / s->rz_old;
}
// The seed's own dot: a block tree in shared memory, then one atomicAdd per block.
template <class T>
__global__ void dot_kernel(const T* a, const T* b, T* out, int n) {
  __shared__ T cache[kBlock];
  T sum = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += a[i] * b[i];
  cache[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, cache[0]);
}
// Impl 4's fused kernels.
template <class T>
__global__ void update_params_kernel(scalars<T>* s, T* mapped) {
  s->alpha = s->rz / s->dot;
  s->rz_old = s->rz;
  if (mapped) *mapped = s->rr;
  s->dot = s->rz = s->rr = 0;
}
template <class T>
__global__ void step_kernel(const T* p, T* x, T* r, const T* ap, const T* dinv, T* z, const scalars<T>* s, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T alpha = s->alpha;
  x[i] += alpha * p[i];
  const T ri = r[i] - alpha * ap[i];
  r[i] = ri;
  z[i] = dinv[i] * ri;
}
template <class T>
__global__ void fused_dot_kernel(const T* r, const T* z, scalars<T>* s, int n) {
  __shared__ T rr[kBlock], rz[kBlock];
  T a = 0, b = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    a += r[i] * r[i];
    b += r[i] * z[i];
  }
  rr[threadIdx.x] = a;
  rz[threadIdx.x] = b;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) {
      rr[threadIdx.x] += rr[threadIdx.x + k];
      rz[threadIdx.x] += rz[threadIdx.x + k];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(&s->rr, rr[0]);
    atomicAdd(&s->rz, rz[0]);
  }
}
template <class T>
__global__ void direction_kernel(const T* z, T* p, const scalars<T>* s, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = z[i] + (s->rz / s->rz_old) * p[i];
}

}  // namespace

template <class T>
struct ladder<T>::state {
  device_matrix<T> a;
  cublasHandle_t blas = nullptr;
  cusparseHandle_t sparse = nullptr;
  cusparseSpMatDescr_t mat = nullptr;
  cusparseDnVecDescr_t vp = nullptr, vap = nullptr;
  void* spmv_buffer = nullptr;
  T *r = nullptr, *z = nullptr, *p = nullptr, *ap = nullptr;
  scalars<T>* s = nullptr;
  T* mapped = nullptr;  // host memory the device writes (impl 5)
  T* mapped_device = nullptr;

  void spmv(const T* alpha, const T* beta) {
    PEER_CUSPARSE(cusparseSpMV(sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, alpha, mat, vp, beta, vap, kType<T>,
                               CUSPARSE_SPMV_ALG_DEFAULT, spmv_buffer));
  }
  void pointer_mode(bool device) {
    PEER_CUBLAS(cublasSetPointerMode(blas, device ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST));
    PEER_CUSPARSE(cusparseSetPointerMode(sparse, device ? CUSPARSE_POINTER_MODE_DEVICE : CUSPARSE_POINTER_MODE_HOST));
  }
  int blocks() const { return (a.n + kBlock - 1) / kBlock; }
  T read_rr() {
    T v;
    TALLY_CUDA(cudaMemcpy(&v, &s->rr, sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

template <class T>
ladder<T>::ladder(const device_matrix<T>& a) : s_(new state) {
  state& s = *s_;
  s.a = a;
  try {
    PEER_CUBLAS(cublasCreate(&s.blas));
    PEER_CUSPARSE(cusparseCreate(&s.sparse));
    const std::size_t bytes = static_cast<std::size_t>(a.n) * sizeof(T);
    TALLY_CUDA(cudaMalloc(&s.r, bytes));
    TALLY_CUDA(cudaMalloc(&s.z, bytes));
    TALLY_CUDA(cudaMalloc(&s.p, bytes));
    TALLY_CUDA(cudaMalloc(&s.ap, bytes));
    TALLY_CUDA(cudaMalloc(&s.s, sizeof(scalars<T>)));
    TALLY_CUDA(cudaHostAlloc(&s.mapped, sizeof(T), cudaHostAllocMapped));
    TALLY_CUDA(cudaHostGetDevicePointer(&s.mapped_device, s.mapped, 0));
    PEER_CUSPARSE(cusparseCreateCsr(&s.mat, a.n, a.n, a.nnz, const_cast<int*>(a.offsets), const_cast<int*>(a.columns),
                                    const_cast<T*>(a.values), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                    CUSPARSE_INDEX_BASE_ZERO, kType<T>));
    PEER_CUSPARSE(cusparseCreateDnVec(&s.vp, a.n, s.p, kType<T>));
    PEER_CUSPARSE(cusparseCreateDnVec(&s.vap, a.n, s.ap, kType<T>));
    const T one = 1, zero = 0;
    std::size_t buffer = 0;
    PEER_CUSPARSE(cusparseSpMV_bufferSize(s.sparse, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, s.mat, s.vp, &zero, s.vap,
                                          kType<T>, CUSPARSE_SPMV_ALG_DEFAULT, &buffer));
    TALLY_CUDA(cudaMalloc(&s.spmv_buffer, buffer > 0 ? buffer : 1));
  } catch (...) {
    this->~ladder();
    throw;
  }
}

template <class T>
ladder<T>::~ladder() {
  if (!s_) return;
  state& s = *s_;
  if (s.vp) cusparseDestroyDnVec(s.vp);
  if (s.vap) cusparseDestroyDnVec(s.vap);
  if (s.mat) cusparseDestroySpMat(s.mat);
  if (s.sparse) cusparseDestroy(s.sparse);
  if (s.blas) cublasDestroy(s.blas);
  cudaFree(s.r);
  cudaFree(s.z);
  cudaFree(s.p);
  cudaFree(s.ap);
  cudaFree(s.s);
  cudaFree(s.spmv_buffer);
  if (s.mapped) cudaFreeHost(s.mapped);
  delete s_;
  s_ = nullptr;
}

template <class T>
int ladder<T>::solve(rung which, const T* b, T* x, double rtol, int max_iterations) {
  state& s = *s_;
  const int n = s.a.n;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  const T one = 1, zero = 0;
  // x = 0, r = b; the threshold on ‖r‖² from ‖b‖ (computed once, on the host's side).
  TALLY_CUDA(cudaMemset(x, 0, bytes));
  TALLY_CUDA(cudaMemcpy(s.r, b, bytes, cudaMemcpyDeviceToDevice));
  s.pointer_mode(false);
  T bb = 0;
  PEER_CUBLAS(dot(s.blas, n, b, b, &bb));
  const T threshold = static_cast<T>(rtol * rtol) * bb;
  const scalars<T> init{0, 0, 0, 0, 0, 0, 0, one, zero};
  TALLY_CUDA(cudaMemcpy(s.s, &init, sizeof init, cudaMemcpyHostToDevice));

  if (which == rung::sample) {  // the CUDA sample's loop
    T abs_new = 0, abs_old = 0;
    PEER_CUBLAS(dot(s.blas, n, s.r, s.r, &abs_new));
    int k = 1;
    while (abs_new > threshold && k <= max_iterations) {
      if (k > 1) {
        const T beta = abs_new / abs_old;
        PEER_CUBLAS(scal(s.blas, n, &beta, s.p));
        PEER_CUBLAS(axpy(s.blas, n, &one, s.r, s.p));
      } else {
        PEER_CUBLAS(copy(s.blas, n, s.r, s.p));
      }
      s.spmv(&one, &zero);
      T pap = 0;
      PEER_CUBLAS(dot(s.blas, n, s.p, s.ap, &pap));
      const T alpha = abs_new / pap, nalpha = -alpha;
      PEER_CUBLAS(axpy(s.blas, n, &alpha, s.p, x));
      PEER_CUBLAS(axpy(s.blas, n, &nalpha, s.ap, s.r));
      abs_old = abs_new;
      PEER_CUBLAS(dot(s.blas, n, s.r, s.r, &abs_new));
      TALLY_CUDA(cudaDeviceSynchronize());
      ++k;
    }
    return k - 1;
  }

  // Jacobi rungs: z = M·r, p = z, r·z.
  jacobi_kernel<<<s.blocks(), kBlock>>>(s.a.inverse_diagonal, s.r, s.z, n);
  TALLY_CUDA(cudaGetLastError());
  PEER_CUBLAS(copy(s.blas, n, s.z, s.p));
  if (which == rung::jacobi) {  // impl 1: host scalars, a sync every iteration
    T abs_new = 0;
    PEER_CUBLAS(dot(s.blas, n, s.r, s.z, &abs_new));
    int k = 1;
    for (; k <= max_iterations; ++k) {
      s.spmv(&one, &zero);
      T pap = 0, rr = 0;
      PEER_CUBLAS(dot(s.blas, n, s.p, s.ap, &pap));
      const T alpha = abs_new / pap, nalpha = -alpha;
      PEER_CUBLAS(axpy(s.blas, n, &alpha, s.p, x));
      PEER_CUBLAS(axpy(s.blas, n, &nalpha, s.ap, s.r));
      PEER_CUBLAS(dot(s.blas, n, s.r, s.r, &rr));
      TALLY_CUDA(cudaDeviceSynchronize());
      if (rr < threshold) break;
      jacobi_kernel<<<s.blocks(), kBlock>>>(s.a.inverse_diagonal, s.r, s.z, n);
      const T abs_old = abs_new;
      PEER_CUBLAS(dot(s.blas, n, s.r, s.z, &abs_new));
      const T beta = abs_new / abs_old;
      PEER_CUBLAS(scal(s.blas, n, &beta, s.p));
      PEER_CUBLAS(axpy(s.blas, n, &one, s.z, s.p));
    }
    TALLY_CUDA(cudaGetLastError());
    return k > max_iterations ? max_iterations : k;
  }

  // Device-scalar rungs.
  s.pointer_mode(true);
  PEER_CUBLAS(dot(s.blas, n, s.r, s.z, &s.s->rz));
  const int dot_blocks = std::min(s.blocks(), 1024);
  auto own_dot = [&](const T* u, const T* v, T* out) {
    TALLY_CUDA(cudaMemsetAsync(out, 0, sizeof(T)));
    dot_kernel<<<dot_blocks, kBlock>>>(u, v, out, n);
  };
  int k = 1;
  if (which == rung::device_scalars || which == rung::own_dot) {  // impls 2 and 3
    for (; k <= max_iterations; ++k) {
      s.spmv(&s.s->one, &s.s->zero);
      if (which == rung::own_dot) own_dot(s.p, s.ap, &s.s->dot);
      else PEER_CUBLAS(dot(s.blas, n, s.p, s.ap, &s.s->dot));
      alpha_kernel<<<1, 1>>>(s.s);
      PEER_CUBLAS(axpy(s.blas, n, &s.s->alpha, s.p, x));
      PEER_CUBLAS(axpy(s.blas, n, &s.s->nalpha, s.ap, s.r));
      if (which == rung::own_dot) own_dot(s.r, s.r, &s.s->rr);
      else PEER_CUBLAS(dot(s.blas, n, s.r, s.r, &s.s->rr));
      if (k % 20 == 0 && s.read_rr() < threshold) break;
      jacobi_kernel<<<s.blocks(), kBlock>>>(s.a.inverse_diagonal, s.r, s.z, n);
      TALLY_CUDA(cudaMemcpyAsync(&s.s->rz_old, &s.s->rz, sizeof(T), cudaMemcpyDeviceToDevice));
      if (which == rung::own_dot) own_dot(s.r, s.z, &s.s->rz);
      else PEER_CUBLAS(dot(s.blas, n, s.r, s.z, &s.s->rz));
      beta_kernel<<<1, 1>>>(s.s);
      PEER_CUBLAS(scal(s.blas, n, &s.s->beta, s.p));
      PEER_CUBLAS(axpy(s.blas, n, &s.s->one, s.z, s.p));
    }
  } else {  // impls 4 and 5: fused kernels
    const bool mapped = which == rung::mapped_flag;
    *s.mapped = 3.0e38f;
    for (; k <= max_iterations; ++k) {
      s.spmv(&s.s->one, &s.s->zero);
      // dot = p·Ap (own kernel, into the zeroed s->dot)
      dot_kernel<<<dot_blocks, kBlock>>>(s.p, s.ap, &s.s->dot, n);
      update_params_kernel<<<1, 1>>>(s.s, mapped ? s.mapped_device : nullptr);
      if (mapped) {
        TALLY_CUDA(cudaDeviceSynchronize());
        if (k > 1 && *static_cast<volatile T*>(s.mapped) < threshold) break;  // the previous iteration's ‖r‖²
      }
      step_kernel<<<s.blocks(), kBlock>>>(s.p, x, s.r, s.ap, s.a.inverse_diagonal, s.z, s.s, n);
      fused_dot_kernel<<<dot_blocks, kBlock>>>(s.r, s.z, s.s, n);
      if (!mapped && k % 20 == 0 && s.read_rr() < threshold) break;
      direction_kernel<<<s.blocks(), kBlock>>>(s.z, s.p, s.s, n);
    }
    if (mapped && k <= max_iterations) --k;  // the break came one SpMV after the converged update
  }
  TALLY_CUDA(cudaGetLastError());
  TALLY_CUDA(cudaDeviceSynchronize());
  return k > max_iterations ? max_iterations : k;
}

template class ladder<float>;
template class ladder<double>;

}  // namespace tally::bench::cg
