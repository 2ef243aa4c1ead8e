// One row and one report type for every benchmark (reduce, histogram, copy,
// CG, Himeno): what was run, on which parameters, how long it took, what was
// derived from that (GB/s, % of a floor, ratios to a named peer), and how its
// result was checked before and after timing. Plain C++ (no CUDA).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "timing.hpp"

namespace tally::bench {

using json = nlohmann::ordered_json;

/// How one check of a row came out.
enum class check_status {
  passed,       ///< the result matched its reference
  failed,       ///< the result differed from its reference (a mismatch)
  not_checked,  ///< the row has no result to check (a bandwidth probe)
  not_run,      ///< the check was never reached (the row was not run or stopped before)
  peer_error,   ///< the peer itself reported an error or crashed (in isolation): measured, not a mismatch
};

/// "pass", "FAIL", "-", "not run", "peer error".
const char* to_string(check_status status);

/// The outcome of comparing one result with its reference.
struct check {
  check_status status = check_status::not_run;
  std::string detail;  ///< how it was compared, or the first difference found
  double error = NAN;  ///< the measured error, where one is defined
  double bound = NAN;  ///< the largest error accepted, where one is defined

  static check pass(std::string detail = "exact", double error = NAN, double bound = NAN) {
    return {check_status::passed, std::move(detail), error, bound};
  }
  static check fail(std::string detail, double error = NAN, double bound = NAN) {
    return {check_status::failed, std::move(detail), error, bound};
  }
  static check none(std::string detail) { return {check_status::not_checked, std::move(detail)}; }
  bool ok() const { return status == check_status::passed || status == check_status::not_checked; }
};

/// One implementation measured on one set of parameters.
struct row {
  std::string benchmark;  ///< "reduce", "histogram", "copy", "cg", "himeno"
  std::string impl;       ///< "tally", "tally (no PDL)", "cub", "probe", ...
  /// What distinguishes this measurement from the other rows of the same
  /// implementation, in table order: {"type": "f32", "n": 1024}. Rows whose
  /// params are equal are compared with each other (ratios, % of a floor).
  /// Keys must not be one of the row's own JSON keys (impl, median_us, ...).
  json params = json::object();
  double bytes = 0;       ///< bytes one call must move (0: none); gives the GB/s metric
  timing time;            ///< per-call times; not measured() when the row was not timed
  /// Derived figures in column order, e.g. {"GB/s", 2950.1}, {"%probe", 96.3},
  /// {"/cub", 0.91}. NaN prints as "-" and is written as null.
  std::vector<std::pair<std::string, double>> metrics;
  check before;           ///< the check before timing (a failed one means the row was not timed)
  check after;            ///< the check after the timed loop, on a re-poisoned output
  std::string note;       ///< what a call includes beyond the work, or why the row did not run
  json extra = json::object();  ///< benchmark-specific fields for the JSON only (a grid sweep, a strategy)

  /// Bytes per second over the median call, in GB/s (1e9); NaN without bytes or a time.
  double gbps() const { return bytes > 0 && time.median_us > 0 ? bytes / (time.median_us * 1e3) : NAN; }
  /// The metric `name`, or NaN.
  double metric(const std::string& name) const;
  /// Sets (or replaces) the metric `name`.
  void set_metric(const std::string& name, double value);
};

/// The results of one command: rows plus what is needed to read them.
struct report {
  std::string command;   ///< "tally bench reduce"
  std::string backend;   ///< "gpu" or "cpu"
  json metadata = json::object();  ///< versions, device or host (gpu_run_metadata, host_run_metadata)
  json settings = json::object();  ///< trial settings, sizes, seeds: what the command was asked to do
  std::string check_mode;          ///< one line: how rows are checked (exact integers, a derived bound, ...)
  std::vector<std::string> header; ///< lines printed above the table (what the columns mean, fairness notes)
  std::vector<row> rows;
  std::vector<std::string> notes;  ///< failures, skipped sizes, anything a reader must know
  int mismatches = 0;              ///< checks that failed (before or after timing)
  int failures = 0;                ///< rows that threw (a CUDA error, an unexpected exception)
  int peer_errors = 0;             ///< peers that failed on their own (measured and reported, not counted as failures)

  /// The row of `impl` whose params equal `params`, or null.
  const row* find(const std::string& impl, const json& params) const;
  /// Rows whose both checks passed (or needed none).
  int rows_checked() const;
  /// 0 when every check passed and nothing failed, else 1.
  int exit_code() const { return mismatches + failures > 0 ? 1 : 0; }
};

/// For every row with a time: metric `name` = row time / time of the row of
/// implementation `peer` with the same params (rows of `peer` itself get none).
/// `name` defaults to "/<peer>".
void add_ratio_to(report& r, const std::string& peer, std::string name = {});
/// For every row with a time: metric `name` = 100 × time of the `floor_impl`
/// row with the same params / row time (how close a row gets to the floor).
/// `name` defaults to "%<floor_impl>".
void add_percent_of(report& r, const std::string& floor_impl, std::string name = {});

/// "2^k" when n is a power of two, the number otherwise.
std::string size_label(std::int64_t n);

/// The current UTC time as 2026-11-22T12:34:56Z.
std::string utc_timestamp();

}  // namespace tally::bench
