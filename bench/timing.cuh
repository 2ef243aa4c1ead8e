// Timing GPU work the way the lent machine's method asks: CUDA events around
// many back-to-back calls, warm-up first, the median of repeated trials.
#pragma once

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::bench {

struct timing {
  double median_us = 0;  ///< median over trials of (trial time / calls)
  double min_us = 0;
  double max_us = 0;
  int trials = 0;
  int calls_per_trial = 0;
};

/// Times call() (which must queue its work on `stream`): `warmup` calls, then
/// picks the number of calls per trial so a trial lasts about `trial_ms`, then
/// `trials` trials between events. Returns per-call times in microseconds.
template <class Call>
timing time_calls(cudaStream_t stream, Call&& call, int trials = 7, double trial_ms = 20.0, int warmup = 3) {
  cudaEvent_t start, stop;
  TALLY_CUDA(cudaEventCreate(&start));
  TALLY_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) call();
  TALLY_CUDA(cudaStreamSynchronize(stream));
  // Milliseconds for `calls` back-to-back calls between two events.
  auto batch_ms = [&](int calls) {
    TALLY_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < calls; ++i) call();
    TALLY_CUDA(cudaEventRecord(stop, stream));
    TALLY_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    TALLY_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  };
  // Calibration sets the batch size so that a trial lasts about trial_ms.
  int calls = 1;
  for (;;) {
    const float ms = batch_ms(calls);
    if (ms >= trial_ms / 4 || calls >= (1 << 16)) {
      calls = std::clamp(static_cast<int>(calls * trial_ms / std::max(ms, 1e-3f)), 1, 1 << 16);
      break;
    }
    calls *= 4;
  }
  std::vector<double> per_call;
  for (int t = 0; t < trials; ++t) per_call.push_back(1000.0 * batch_ms(calls) / calls);
  TALLY_CUDA(cudaGetLastError());
  TALLY_CUDA(cudaEventDestroy(start));
  TALLY_CUDA(cudaEventDestroy(stop));
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front(), per_call.back(), trials, calls};
}

}  // namespace tally::bench
