// What a timer returns and how long it measures: plain C++, shared by the
// GPU timer (timing.cuh, CUDA events) and the host timer (host_timing.hpp).
#pragma once

namespace tally::bench {

/// How a row is timed: `warmup` untimed calls, then `trials` trials of
/// back-to-back calls, each trial lasting about `trial_ms` milliseconds.
struct trial_settings {
  int trials = 7;
  double trial_ms = 10.0;
  int warmup = 3;
};

/// Per-call times of one implementation, in microseconds.
struct timing {
  double median_us = 0;  ///< median over trials of (trial time / calls per trial)
  double min_us = 0;     ///< fastest trial
  double max_us = 0;     ///< slowest trial
  int trials = 0;
  int calls_per_trial = 0;
  /// True once a measurement was stored (a row that was not timed has none).
  bool measured() const { return trials > 0; }
};

}  // namespace tally::bench
