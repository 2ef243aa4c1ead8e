// Plain atomics and the paper's warp aggregation (seed 003, figure 5): the
// baselines of `tally bench histogram`.
#include <cstdint>

#include "peers/hist_peers.hpp"
#include "tally/cuda/check.cuh"

namespace tally::bench::peers {
namespace {

constexpr int kThreads = 128;   // the paper's block size
constexpr int kBlocks = 8192;   // 1048576 threads, as the paper

/// The paper's atomicAddW (figure 5) with __ballot/__shfl replaced by their
/// _sync forms over the active lanes, generalised to int and double.
template <class T>
__device__ T paper_atomic_add(T* addr, T data) {
  const unsigned mask = __activemask();
  const int addr_high = static_cast<int>(reinterpret_cast<unsigned long long>(addr) >> 32);
  const int addr_low = static_cast<int>(reinterpret_cast<unsigned long long>(addr));
  int lane;
  asm("mov.s32 %0, %%laneid;" : "=r"(lane));
  int writer = lane;
  T sum = 0;
  unsigned active = __brev(__ballot_sync(mask, true));
  for (int remaining = __popc(active); remaining--;) {
    const int r = __clz(active);
    active ^= 1u << (31 - r);
    const bool same = addr_low == __shfl_sync(mask, addr_low, r) && addr_high == __shfl_sync(mask, addr_high, r);
    const T other = __shfl_sync(mask, data, r);
    if (same) {
      if (lane < r) sum += other;
      if (r < writer) writer = r;
    }
  }
  T old = 0;
  if (writer == lane) old = atomicAdd(addr, sum + data);
  old = __shfl_sync(mask, old, writer);
  return old + sum;
}

template <class T>
__device__ __forceinline__ void add(hist_atomics how, T* addr, T v) {
  if (how == hist_atomics::plain) atomicAdd(addr, v);
  else paper_atomic_add(addr, v);
}

template <class C>
__global__ void hist_kernel(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo,
                            double scale, double hi, C* counts) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    if (!(v >= lo && v < hi)) continue;
    std::int64_t b = static_cast<std::int64_t>((v - lo) * scale);
    if (b >= bins) b = bins - 1;
    add(how, counts + b, C(1));
  }
}

__global__ void scatter_kernel(hist_atomics how, const std::int64_t* index, const double* value, std::int64_t n, double* out) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    add(how, out + index[i], value[i]);
}

template <class C>
void run_hist(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo, double hi, C* counts,
              cudaStream_t stream) {
  TALLY_CUDA(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(bins) * sizeof(C), stream));
  hist_kernel<<<kBlocks, kThreads, 0, stream>>>(how, x, n, bins, lo, static_cast<double>(bins) / (hi - lo), hi,
                                                counts);
  ::tally::detail::check_cuda(cudaGetLastError(), "launch of hist_kernel");
}

}  // namespace

void hist_even_atomics(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo, double hi,
                       int* counts, cudaStream_t stream) {
  run_hist(how, x, n, bins, lo, hi, counts, stream);
}
void hist_even_atomics(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo, double hi,
                       double* counts, cudaStream_t stream) {
  run_hist(how, x, n, bins, lo, hi, counts, stream);
}

void scatter_add_atomics(hist_atomics how, const std::int64_t* index, const double* value, std::int64_t n, double* out,
                         std::int64_t out_size, cudaStream_t stream) {
  TALLY_CUDA(cudaMemsetAsync(out, 0, static_cast<std::size_t>(out_size) * sizeof(double), stream));
  scatter_kernel<<<kBlocks, kThreads, 0, stream>>>(how, index, value, n, out);
  ::tally::detail::check_cuda(cudaGetLastError(), "launch of scatter_kernel");
}

}  // namespace tally::bench::peers
