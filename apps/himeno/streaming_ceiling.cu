// The streaming ceiling behind issue 9's L/XL bar (a probe, not a test): what
// bandwidth a kernel reading K arrays of Himeno L's size and writing one
// reaches on this GPU, flat (grid-stride, 16-byte loads) and in the row
// sweep's access pattern (rows of 511 points on 32 consecutive planes, items
// chunk-major and round-robin over blocks, plain 4-byte loads). The sweep's
// 56 bytes a point are 13 reads and 1 write: 1600 GFLOPS needs 2.63 TB/s of
// them. Results: bench/results/h100-2026-11-26-himeno-narrow-rows3-tune.txt.
//
//   build-gpu/apps/himeno/himeno_streaming_ceiling     (~30 s, prints one line a case)
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "tally/cuda/check.cuh"
#include "timing.cuh"

// K arrays summed a float4 at a time, grid-stride; the sum written (Write) or
// kept alive by an improbable branch.
template <int K, bool Write, bool Streaming>
__global__ void streams(const float4* const* in, float4* out, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 s = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const float4 v = Streaming ? __ldcs(in[k] + i) : __ldg(in[k] + i);
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    if (Write) {
      if (Streaming)
        __stcs(out + i, s);
      else
        out[i] = s;
    } else if (s.x == 123.f)
      out[0] = s;  // keeps the loads
  }
}

// The row sweep's access pattern with plain loads: a block walks work items
// (row j's 511 interior points on 32 consecutive planes, items chunk-major and
// round-robin over blocks, as rows_kernel does), reading the row from each of
// K arrays and writing one.
template <int K>
__global__ void rows_pattern(const float* const* in, float* out, int mi, int mj, int mk, int chunk) {
  const int rows = mj - 2, chunks = (mi - 2 + chunk - 1) / chunk;
  const long items = (long)rows * chunks;
  for (long w = blockIdx.x; w < items; w += gridDim.x) {
    const int c = (int)(w / rows), j = 1 + (int)(w % rows);
    const int i0 = 1 + c * chunk, i1 = min(i0 + chunk, mi - 1);
    for (int i = i0; i < i1; ++i) {
      const long base = ((long)i * mj + j) * mk + 1;
      float s0 = 0, s1 = 0;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        s0 += __ldg(in[k] + base + threadIdx.x);
        if (threadIdx.x + 256 < mk - 2) s1 += __ldg(in[k] + base + threadIdx.x + 256);
      }
      out[base + threadIdx.x] = s0;
      if (threadIdx.x + 256 < mk - 2) out[base + threadIdx.x + 256] = s1;
    }
  }
}

namespace {

// Milliseconds a launch takes: the bench library's timer (CUDA events around
// back-to-back launches, median of 7 trials after 2 warm-up launches). A CUDA
// error, a launch's own included, throws: a probe that ran nothing never
// prints a bandwidth.
template <class Launch>
double median_ms(const Launch& launch) {
  const auto checked = [&] {
    launch();
    TALLY_CUDA(cudaGetLastError());
  };
  return tally::bench::time_calls(nullptr, checked, tally::bench::trial_settings{7, 10.0, 2}).median_us / 1e3;
}

template <int K, bool Write, bool Streaming>
void run_flat(const float4* const* in, float4* out, long n4, int blocks) {
  const double ms = median_ms([&] { streams<K, Write, Streaming><<<blocks, 256>>>(in, out, n4); });
  const double bytes = static_cast<double>(n4) * 16 * (K + (Write ? 1 : 0));
  std::printf("K=%2d write=%d streaming=%d blocks=%5d threads= 256: %8.3f ms  %7.1f GB/s\n", K, Write, Streaming,
              blocks, ms, bytes / ms / 1e6);
}

template <int K>
void run_rows(const float* const* in, float* out, int blocks) {
  const int mi = 257, mj = 257, mk = 513;  // Himeno L
  const double ms = median_ms([&] { rows_pattern<K><<<blocks, 256>>>(in, out, mi, mj, mk, 32); });
  const double bytes = static_cast<double>(mi - 2) * (mj - 2) * (mk - 2) * 4 * (K + 1);
  std::printf("rows pattern K=%2d+1 blocks=%5d: %8.3f ms  %7.1f GB/s\n", K, blocks, ms, bytes / ms / 1e6);
}

}  // namespace

int main() {
  const long points = 257L * 257 * 513;  // Himeno L
  const long n4 = points / 4;
  std::vector<float*> arrays(14);
  for (auto& p : arrays) {
    TALLY_CUDA(cudaMalloc(&p, n4 * 16));
    TALLY_CUDA(cudaMemset(p, 0x3f, n4 * 16));  // 0.747f everywhere: no zero pages
  }
  const float4** in = nullptr;
  TALLY_CUDA(cudaMalloc(&in, 14 * sizeof(float*)));
  TALLY_CUDA(cudaMemcpy(in, arrays.data(), 14 * sizeof(float*), cudaMemcpyHostToDevice));
  float4* out = reinterpret_cast<float4*>(arrays[13]);  // never one of the K <= 13 inputs
  int sms = 0;
  TALLY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int per_sm : {2, 4, 8}) {
    run_flat<1, true, false>(in, out, n4, sms * per_sm);
    run_flat<13, false, false>(in, out, n4, sms * per_sm);
    run_flat<13, true, false>(in, out, n4, sms * per_sm);
    run_flat<13, true, true>(in, out, n4, sms * per_sm);
    run_flat<6, true, false>(in, out, n4, sms * per_sm);
  }
  const float* const* in_floats = reinterpret_cast<const float* const*>(in);
  for (int per_sm : {1, 2, 4, 8}) {
    run_rows<13>(in_floats, arrays[13], sms * per_sm);
    run_rows<1>(in_floats, arrays[13], sms * per_sm);
  }
  for (float* p : arrays) cudaFree(p);
  cudaFree(in);
  return 0;
}
