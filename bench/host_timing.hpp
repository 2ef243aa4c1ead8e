// Timing host work (the CPU backend's rows) like the GPU timer: warm-up, a
// batch of back-to-back calls that lasts about a trial, the median of trials,
// on the steady clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "timing.hpp"

namespace tally::bench {

/// Microseconds that `calls` back-to-back calls of call() take.
template <class Call>
double host_batch_us(Call&& call, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

/// The timing of trials' per-call times (their median, min and max).
/// Pre: per_call is not empty.
inline timing summarize_trials(std::vector<double> per_call, int calls_per_trial) {
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front(), per_call.back(), static_cast<int>(per_call.size()),
          calls_per_trial};
}

/// Calls of call() per trial so that a trial lasts about settings.trial_ms
/// (at least 1, at most 2^20), after settings.warmup untimed calls.
template <class Call>
int host_calls_per_trial(Call&& call, const trial_settings& settings) {
  for (int i = 0; i < settings.warmup; ++i) call();
  int calls = 1;
  for (;;) {
    const double us = host_batch_us(call, calls);
    if (us >= settings.trial_ms * 250 || calls >= (1 << 20))
      return std::clamp(static_cast<int>(calls * settings.trial_ms * 1e3 / std::max(us, 1e-3)), 1, 1 << 20);
    calls *= 4;
  }
}

/// Times call() on the host: settings.warmup calls, a batch size that makes
/// a trial last about settings.trial_ms, then the median of settings.trials
/// trials. Post: per-call times in microseconds. call() must leave its result
/// somewhere the compiler cannot see through (an output buffer, a volatile).
template <class Call>
timing time_host_calls(Call&& call, const trial_settings& settings) {
  const int calls = host_calls_per_trial(call, settings);
  std::vector<double> per_call;
  for (int t = 0; t < settings.trials; ++t) per_call.push_back(host_batch_us(call, calls) / calls);
  return summarize_trials(per_call, calls);
}

/// Times several calls on the host as time_host_calls does each, but with
/// their trials interleaved (trial t of every call before trial t + 1 of
/// any), so that a host whose speed drifts over seconds (other tenants, clock
/// changes) shifts them alike and their ratios hold. Post: one timing per
/// call, in the calls' order.
inline std::vector<timing> time_host_interleaved(const std::vector<std::function<void()>>& calls,
                                                 const trial_settings& settings) {
  std::vector<int> batch;
  for (const auto& call : calls) batch.push_back(host_calls_per_trial(call, settings));
  std::vector<std::vector<double>> per_call(calls.size());
  for (int t = 0; t < settings.trials; ++t)
    for (std::size_t i = 0; i < calls.size(); ++i) per_call[i].push_back(host_batch_us(calls[i], batch[i]) / batch[i]);
  std::vector<timing> out;
  for (std::size_t i = 0; i < calls.size(); ++i) out.push_back(summarize_trials(per_call[i], batch[i]));
  return out;
}

}  // namespace tally::bench
