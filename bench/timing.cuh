// Timing GPU work the way the lent machine's method asks: CUDA events around
// many back-to-back calls, warm-up first, the median of repeated trials.
#pragma once

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"
#include "timing.hpp"

namespace tally::bench {

/// Two CUDA events, destroyed on every path out (a failing call throws).
class event_pair {
 public:
  event_pair() {
    TALLY_CUDA(cudaEventCreate(&start_));
    if (const cudaError_t e = cudaEventCreate(&stop_); e != cudaSuccess) {
      cudaEventDestroy(start_);
      TALLY_CUDA(e);
    }
  }
  ~event_pair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;

  /// Milliseconds of `calls` back-to-back calls of call() on `stream`,
  /// between the two events (waits for the second).
  template <class Call>
  double ms(cudaStream_t stream, Call&& call, int calls = 1) {
    TALLY_CUDA(cudaEventRecord(start_, stream));
    for (int i = 0; i < calls; ++i) call();
    TALLY_CUDA(cudaEventRecord(stop_, stream));
    TALLY_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    TALLY_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// Times call() (which must queue its work on `stream`): settings.warmup
/// calls, then a number of calls per trial chosen so that a trial lasts about
/// settings.trial_ms, then settings.trials trials between two events each.
/// Pre: call() queues only on `stream` (or waits for it itself, as Thrust
/// does). Post: the stream is idle; per-call times in microseconds.
template <class Call>
timing time_calls(cudaStream_t stream, Call&& call, const trial_settings& settings) {
  event_pair events;
  for (int i = 0; i < settings.warmup; ++i) call();
  TALLY_CUDA(cudaStreamSynchronize(stream));
  auto batch_ms = [&](int calls) { return events.ms(stream, call, calls); };
  // Calibration: grow the batch ×4 until it lasts a quarter trial, then scale.
  int calls = 1;
  for (;;) {
    const double ms = batch_ms(calls);
    if (ms >= settings.trial_ms / 4 || calls >= (1 << 16)) {
      calls = std::clamp(static_cast<int>(calls * settings.trial_ms / std::max(ms, 1e-3)), 1, 1 << 16);
      break;
    }
    calls *= 4;
  }
  std::vector<double> per_call;
  for (int t = 0; t < settings.trials; ++t) per_call.push_back(1000.0 * batch_ms(calls) / calls);
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front(), per_call.back(), settings.trials, calls};
}

/// The older form: `trials` trials of about `trial_ms` after `warmup` calls.
template <class Call>
timing time_calls(cudaStream_t stream, Call&& call, int trials = 7, double trial_ms = 20.0, int warmup = 3) {
  return time_calls(stream, call, trial_settings{trials, trial_ms, warmup});
}

}  // namespace tally::bench
