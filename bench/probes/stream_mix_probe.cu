// The flat streaming ceiling of the CG iteration's traffic mixes (a probe,
// not a test): what bandwidth a kernel that reads R vectors and writes W of
// n floats each reaches on this GPU, grid-stride with 16-byte loads and
// stores. The graph mode's update moves 2 reads + 1 write (r, Ap; r), its
// march 3 + 3 (r, p, x; p, Ap, x). H100, 32 MB a vector, 528-4224 blocks
// (bench/results/h100-2026-11-27-stream-mix-probe-final.txt): 2 + 1 reach
// 2.67-2.71 TB/s, 3 + 3 2.64-2.80, 1 + 1 2.44-2.60, against a copy's 3.02.
// (Its first form timed single launches, each with its launch and tail:
// 2.40-2.48 and 2.51-2.66; docs/NOTES.md, thirty-third session.)
//
//   build-gpu/bench/stream_mix_probe      (a few seconds, one line a case)
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "tally/cuda/check.cuh"
#include "timing.cuh"

// Sums the R inputs at i and writes the sum (plus k) to each of the W outputs.
template <int R, int W>
__global__ void mix(const float4* const* in, float4* const* out, long n4) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    float4 s = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const float4 v = in[k][i];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
#pragma unroll
    for (int k = 0; k < W; ++k) out[k][i] = make_float4(s.x + k, s.y, s.z, s.w);
  }
}

// Per-call µs of the mix (the bench library's timing: warm-up, batches of
// launches between CUDA events, the median of the trials).
template <int R, int W>
void run(const float4* const* in, float4* const* out, long n4, int blocks) {
  const double us = tally::bench::time_calls(cudaStream_t{}, [&] {
                      mix<R, W><<<blocks, 256>>>(in, out, n4);
                      TALLY_CUDA(cudaGetLastError());
                    }).median_us;
  const double bytes = static_cast<double>(R + W) * n4 * 16;
  std::printf("%d reads + %d writes, %5d blocks, %.0f MB a vector: %7.1f us  %5.0f GB/s\n", R, W, blocks, n4 * 16 / 1e6,
              us, bytes / us / 1e3);
}

int main() {
  for (const long n : {8000000L, 2097152L}) {  // g = 200 and g = 128, f32
    const long n4 = n / 4;
    std::vector<float4*> buffers(6);
    for (auto& p : buffers) {
      TALLY_CUDA(cudaMalloc(&p, n4 * sizeof(float4)));
      TALLY_CUDA(cudaMemset(p, 0, n4 * sizeof(float4)));
    }
    float4** table = nullptr;  // inputs 0..2, outputs 3..5
    TALLY_CUDA(cudaMalloc(&table, buffers.size() * sizeof(float4*)));
    TALLY_CUDA(cudaMemcpy(table, buffers.data(), buffers.size() * sizeof(float4*), cudaMemcpyHostToDevice));
    for (const int blocks : {528, 1056, 2112, 4224}) {
      run<2, 1>(table, table + 3, n4, blocks);
      run<3, 3>(table, table + 3, n4, blocks);
      run<1, 1>(table, table + 3, n4, blocks);
    }
    for (auto* p : buffers) TALLY_CUDA(cudaFree(p));
    TALLY_CUDA(cudaFree(table));
  }
  return 0;
}
