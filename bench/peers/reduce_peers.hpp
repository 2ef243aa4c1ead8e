// The peers tally's reductions are measured against, behind one small
// interface: each factory binds a peer to device buffers and a stream and
// returns a reduce_call whose run() queues exactly the work a user of that
// peer would queue for one reduction.
//
// What a call includes, beyond the reduction itself, is stated in its note
// (thrust returns to the host; seed 000 must zero its output first), so a
// table can say what was timed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <cuda_runtime.h>

namespace tally::bench {

/// One reduction bound to its buffers and stream.
struct reduce_call {
  /// Queues one reduction on the stream (thrust's also waits for it).
  std::function<void()> run;
  /// Waits for the stream and returns the last run()'s result (exact for i32).
  std::function<double()> result;
  /// What run() does besides reducing, for the table and the JSON ("" if nothing).
  std::string note;
};

/// cub::DeviceReduce::Sum into out[0]. Temporary storage is sized and
/// allocated here, once; run() is the Sum call alone. T: float, double, int.
template <class T>
reduce_call cub_sum(const T* x, std::int64_t n, T* out, cudaStream_t stream);

/// Σ x[i]·y[i] by cub::DeviceReduce::TransformReduce over indices (CUB has no
/// dot product of its own). Storage allocated once. T: float, double.
template <class T>
reduce_call cub_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream);

/// thrust::reduce(thrust::cuda::par.on(stream), ...). Thrust returns the sum
/// to the host, so every run() waits for the stream (and Thrust allocates its
/// temporary storage per call): that is what a Thrust user pays.
template <class T>
reduce_call thrust_sum(const T* x, std::int64_t n, cudaStream_t stream);

/// thrust::inner_product on the stream; returns to the host like thrust_sum.
template <class T>
reduce_call thrust_dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream);

/// cublasSdot / cublasDdot with CUBLAS_POINTER_MODE_DEVICE into out[0]: stays
/// on the device, no host wait. One handle per call object. T: float, double.
/// Pre: n fits in int (cuBLAS's 32-bit API).
template <class T>
reduce_call cublas_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream);

/// Threads per block of seed 000's kernel (the seed settles on 256).
inline constexpr int kSeed000Threads = 256;

/// Seed 000's kernel: a grid-stride loop, a warp-shuffle sum, one atomicAdd
/// per warp into out[0], on `blocks` × kSeed000Threads threads. The kernel
/// accumulates into out[0], so run() zeroes it first with cudaMemsetAsync:
/// the memset is part of what is timed. T: float, double, int.
/// Pre: n + blocks·256 fits in int (the seed indexes with int).
template <class T>
reduce_call seed000_sum(const T* x, std::int64_t n, T* out, int blocks, cudaStream_t stream);

/// Grid sizes swept for seed 000 (1024 … 65536 blocks, ×2 steps).
inline constexpr int kSeed000Grids[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536};

/// The bandwidth ceiling: reads bytes [0, bytes) of `data` with 16-byte loads
/// on `blocks` × kProbeThreads threads and writes one word to *sink (only if
/// an improbable value comes up, so the loads cannot be dropped). result()
/// returns 0. Pre: data 16-byte aligned; a tail of < 16 bytes is not read.
reduce_call read_probe(const void* data, std::size_t bytes, int blocks, unsigned* sink, cudaStream_t stream);

/// Threads per block of the read probe.
inline constexpr int kProbeThreads = 256;

/// Grid sizes the probe tries on this device: 4, 8, 16 and 32 blocks per SM.
int probe_grid_count();
int probe_grid(int i, int sm_count);

/// The fastest probe over probe_grid(): its blocks and median µs per pass.
struct probe_result {
  int blocks = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  int trials = 0, calls = 0;
  /// bytes / median time, in GB/s (1e9 bytes per second).
  double gbps = 0;
};
/// Sweeps the probe grids over data[0, bytes) on `stream` with short trials,
/// then times the fastest grid with `trials` trials of about `trial_ms`.
/// `sink` is one device word.
probe_result best_read_probe(const void* data, std::size_t bytes, unsigned* sink, cudaStream_t stream, int trials,
                             double trial_ms);

/// Version strings of the peers as built: "3.0.1" for CUB and Thrust, cuBLAS
/// as reported by cublasGetProperty.
std::string cub_version();
std::string thrust_version();
std::string cublas_version();

}  // namespace tally::bench
