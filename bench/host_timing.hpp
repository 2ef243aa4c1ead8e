// Timing host work (the CPU backend's rows) like the GPU timer: warm-up, a
// batch of back-to-back calls that lasts about a trial, the median of trials,
// on the steady clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "timing.hpp"

namespace tally::bench {

/// Times call() on the host: settings.warmup calls, a batch size that makes
/// a trial last about settings.trial_ms, then the median of settings.trials
/// trials. Post: per-call times in microseconds. call() must leave its result
/// somewhere the compiler cannot see through (an output buffer, a volatile).
template <class Call>
timing time_host_calls(Call&& call, const trial_settings& settings) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < settings.warmup; ++i) call();
  auto batch_us = [&](int calls) {
    const auto start = clock::now();
    for (int i = 0; i < calls; ++i) call();
    return std::chrono::duration<double, std::micro>(clock::now() - start).count();
  };
  int calls = 1;
  for (;;) {
    const double us = batch_us(calls);
    if (us >= settings.trial_ms * 250 || calls >= (1 << 20)) {
      calls = std::clamp(static_cast<int>(calls * settings.trial_ms * 1e3 / std::max(us, 1e-3)), 1, 1 << 20);
      break;
    }
    calls *= 4;
  }
  std::vector<double> per_call;
  for (int t = 0; t < settings.trials; ++t) per_call.push_back(batch_us(calls) / calls);
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front(), per_call.back(), settings.trials, calls};
}

}  // namespace tally::bench
