// The peers tally's reductions are measured against. Each factory binds a
// peer to device buffers and a stream and returns a reduce_peer: a
// bench::peer whose run() queues exactly the work a user of that peer would
// queue for one reduction and whose reset() poisons its output, plus
// result(), which waits and returns the last result. The benchmark sets
// peer.verify (it holds the reference).
//
// What a call includes beyond the reduction is stated in the peer's note
// (Thrust returns to the host; seed 000 must zero its output first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>
#include <string>

#include <cuda_runtime.h>

#include "peer.hpp"

namespace tally::bench {

/// A reduction peer and the way to read its result back.
struct reduce_peer {
  peer p;                          ///< verify left empty for the caller
  std::function<double()> result;  ///< waits for the stream; the last run()'s result (exact for i32)
};

/// cub::DeviceReduce::Sum into out[0]. Temporary storage is sized and
/// allocated here, once; run() is the Sum call alone. T: float, double, int.
template <class T>
reduce_peer cub_sum(const T* x, std::int64_t n, T* out, cudaStream_t stream);

/// Σ x[i]·y[i] by cub::DeviceReduce::TransformReduce over indices (CUB has no
/// dot product of its own). Storage allocated once. T: float, double.
template <class T>
reduce_peer cub_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream);

/// thrust::reduce(thrust::cuda::par.on(stream), ...). Thrust returns the sum
/// to the host, so every run() waits for the stream (and Thrust allocates its
/// temporary storage per call): that is what a Thrust user pays.
template <class T>
reduce_peer thrust_sum(const T* x, std::int64_t n, cudaStream_t stream);

/// thrust::inner_product on the stream; returns to the host like thrust_sum.
template <class T>
reduce_peer thrust_dot(const T* x, const T* y, std::int64_t n, cudaStream_t stream);

/// cublasSdot / cublasDdot with CUBLAS_POINTER_MODE_DEVICE into out[0]: stays
/// on the device, no host wait. One handle per peer. T: float, double.
/// Pre: n fits in int (cuBLAS's 32-bit API), else this throws.
template <class T>
reduce_peer cublas_dot(const T* x, const T* y, std::int64_t n, T* out, cudaStream_t stream);

/// Threads per block of seed 000's kernel (the seed settles on 256).
inline constexpr int kSeed000Threads = 256;

/// Seed 000's kernel: a grid-stride loop, a warp-shuffle sum, one atomicAdd
/// per warp into out[0], on `blocks` × kSeed000Threads threads. The kernel
/// accumulates into out[0], so run() zeroes it first with cudaMemsetAsync:
/// the memset is part of what is timed. T: float, double, int.
/// Pre: n + blocks·256 fits in int (the seed indexes with int), else this throws.
template <class T>
reduce_peer seed000_sum(const T* x, std::int64_t n, T* out, int blocks, cudaStream_t stream);

/// Grid sizes swept for seed 000 (1024 … 65536 blocks, ×2 steps).
inline constexpr int kSeed000Grids[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536};

/// Seed 002's classic shared-memory block reductions (written from the
/// seed's description): 256 threads, one element per thread, a tree in
/// shared memory, one partial per block; passes repeat over the partials
/// until one block writes out[0].
enum class seed002_kernel {
  interleaved_modulo,   ///< reduce0: interleaved addressing, `tid % (2s) == 0` (divergent warps)
  interleaved_strided,  ///< reduce1: interleaved addressing, index = 2·s·tid (bank conflicts)
  sequential,           ///< reduce2: sequential addressing, s = blockDim/2 … 1
};
/// "interleaved %", "interleaved strided", "sequential".
const char* to_string(seed002_kernel k);
/// Seed 002's kernel `k` over x[0, n) into out[0]; the partials' scratch is
/// allocated here, once. T: float, double, int. Pre: n >= 1.
template <class T>
reduce_peer seed002_sum(seed002_kernel k, const T* x, std::int64_t n, T* out, cudaStream_t stream);

/// Threads per block of the read probe.
inline constexpr int kProbeThreads = 256;

/// The bandwidth ceiling: reads bytes [0, bytes) of `data` with 16-byte loads
/// on `blocks` × kProbeThreads threads and writes one word to *sink (only if
/// an improbable value comes up, so the loads cannot be dropped). Its
/// verify() returns check::none (nothing to check). Pre: data 16-byte
/// aligned; a tail of < 16 bytes is not read.
peer read_probe(const void* data, std::size_t bytes, int blocks, unsigned* sink, cudaStream_t stream);

/// Grids the probe tries for `bytes`: 4, 8, 16 and 32 blocks per SM, each
/// capped at one 16-byte load per thread (a grid larger than the input only
/// adds empty blocks: 4224 blocks at 2^16 made the probe slower than the
/// reductions it bounds). Sorted, without repeats.
std::vector<int> probe_grids(std::size_t bytes, int sm_count);

/// The fastest grid of probe_grids() for data[0, bytes), by short trials.
int best_probe_grid(const void* data, std::size_t bytes, unsigned* sink, cudaStream_t stream, double trial_ms);

/// Measured read bandwidth (for `tally info`): the best probe grid, timed.
struct probe_result {
  int blocks = 0;
  double median_us = 0;
  double gbps = 0;  ///< bytes / median time, in GB/s (1e9 bytes per second)
};
probe_result measure_read_probe(const void* data, std::size_t bytes, unsigned* sink, cudaStream_t stream, int trials,
                                double trial_ms);

/// cuBLAS's version as reported by cublasGetProperty ("13.0.0").
std::string cublas_version();

}  // namespace tally::bench
