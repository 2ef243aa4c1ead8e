// The one path every row takes: check → time → check. A harness says where
// rows go (a report) and how a call is timed (CUDA events on a stream, or
// the host clock); measure() does the rest the same way for tally and for
// every peer, so no row can skip a check.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace tally::bench {

/// Thrown by a harness's recover() when the device can no longer be used
/// (a sticky CUDA error): the sweep must stop, the report keeps its rows.
struct device_lost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where rows go and how calls are timed.
struct harness {
  report* out = nullptr;
  /// Times back-to-back calls of its argument (see gpu_harness, host_harness).
  std::function<timing(const std::function<void()>&)> time;
  /// Times back-to-back calls of each of its arguments with their trials
  /// interleaved (see time_host_interleaved). Optional: measure_interleaved
  /// falls back to `time`, one call after the other.
  std::function<std::vector<timing>(const std::vector<std::function<void()>>&)> time_interleaved;
  /// Called after a row threw: clears what can be cleared, or throws
  /// device_lost when nothing more can run. Optional.
  std::function<void()> recover;
  /// Progress lines on stderr ("[reduce type=f32 n=2^20] cub ... 3.21 us").
  bool progress = true;
};

/// A harness timing with the host clock (time_host_calls, and
/// time_host_interleaved for measure_interleaved).
harness host_harness(report& out, const trial_settings& settings);

/// Runs `p` through the one path, appending one row to h.out: the row is
/// `proto` (benchmark, params, bytes, note filled in by the caller) with
/// impl = p.name and p.note appended to the note.
///   1. p.setup(), p.reset(), p.run(), then row.before = p.verify();
///   2. only if that passed: row.time = h.time(p.run) (warm-up included);
///   3. p.reset(), p.run(), then row.after = p.verify().
/// A failed check counts one mismatch in the report (before: the row is
/// not timed). An exception counts one failure, is noted in the row and
/// the report, then h.recover() runs (it may throw device_lost, which
/// measure() lets through). The row gets the metric "GB/s" when bytes > 0.
/// Returns the row added (valid until the next row is added).
row& measure(harness& h, const peer& p, row proto);

/// measure() for several peers of one row prototype, with their timed
/// trials interleaved (h.time_interleaved): every peer is checked before
/// timing as measure() does, those that passed are timed together, then each
/// is checked after timing. Rows are appended in the peers' order. A peer
/// that throws before timing fails alone; an exception while timing fails
/// every row timed in that group. Returns the indices of the rows added in
/// h.out->rows.
std::vector<std::size_t> measure_interleaved(harness& h, const std::vector<peer>& peers, const row& proto);

/// Appends a row for an implementation that could not even be set up (its
/// factory threw): counts one failure, notes it, then runs h.recover().
row& add_failure(harness& h, row proto, const std::string& impl, const std::string& what);

/// Appends a row that was deliberately not run (a strategy that cannot hold
/// the bins, a size above a limit): impl, the reason in its note, both checks
/// not_run. Counts nothing as failed.
row& add_not_run(report& out, row proto, const std::string& impl, const std::string& reason);

/// Appends a row whose peer failed or refused on its own (CUB faulting in a
/// child process, PyTorch's deterministic mode refusing an operation): impl,
/// check before = peer_error with `detail`, check after = not_run, the note
/// "peer error: <summary>". Counts one peer error (measured, not a failure)
/// and notes impl, params and detail in the report.
row& add_peer_error(report& out, row proto, const std::string& impl, const std::string& detail,
                    const std::string& summary);

/// "type=f32 n=2^20": a row's params on one line, for progress and messages.
std::string describe_params(const json& params);

}  // namespace tally::bench
