// The two backends. Every algorithm takes one of these as its first argument;
// the same call on either gives the same result, bit for bit (NaN results
// excepted: their payloads may differ, see reduce()).
#pragma once

struct CUstream_st;  // cudaStream_t, without pulling in the CUDA runtime here

namespace tally {

/// The host backend: OpenMP threads and SIMD. Pointers are host memory.
struct cpu_backend {
  /// OpenMP threads to use; 0 means OpenMP's default.
  int threads = 0;
  /// A copy that uses `t` threads (t >= 1), or OpenMP's default for t = 0.
  constexpr cpu_backend with_threads(int t) const { return cpu_backend{t}; }
};
inline constexpr cpu_backend cpu{};

class workspace;

/// The GPU backend: work is queued on `stream` (the legacy default stream when
/// null) and never waits for the device, except in the value-returning forms
/// (sum, ...), which say so. Pointers are device (or managed) memory.
/// Scratch comes from `scratch` when given, else from a pool kept per stream.
struct gpu_backend {
  CUstream_st* stream = nullptr;
  workspace* scratch = nullptr;
  /// A copy that queues its work on stream `s`.
  constexpr gpu_backend on(CUstream_st* s) const { return gpu_backend{s, scratch}; }
  /// A copy that takes its scratch memory from `w` (stream-ordered on this stream).
  constexpr gpu_backend with(workspace& w) const { return gpu_backend{stream, &w}; }
};
inline constexpr gpu_backend gpu{};

}  // namespace tally
