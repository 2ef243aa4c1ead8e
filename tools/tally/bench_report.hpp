// The results of one `tally bench reduce` run: rows, the table and summary
// printed from them, and the JSON written from them. Plain C++, shared by the
// GPU and CPU runs.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::cli {

/// One implementation timed on one type and size.
struct bench_row {
  std::string impl;               ///< "tally", "tally-comp", "cub", "probe", ...
  std::string type;               ///< "f32", "f64", "i32", "f32dot", "f64dot"
  std::int64_t n = 0;             ///< elements per input
  double bytes = 0;               ///< input bytes read per call
  double median_us = 0, min_us = 0, max_us = 0;  ///< per call
  int trials = 0, calls = 0;      ///< trials, and calls per trial
  int blocks = 0;                 ///< grid size chosen by a sweep (0: none)
  double rel_error = -1;          ///< |result − reference| / Σ|terms|; −1: not checked
  std::string note;               ///< what the timed call includes beyond the reduction
  std::vector<std::pair<int, double>> sweep;  ///< grid size → median µs, for swept rows
  /// Input bytes read per second, in GB/s (1e9).
  double gbps() const { return median_us > 0 ? bytes / (median_us * 1e3) : 0; }
};

struct bench_report {
  std::string command;   ///< "tally bench reduce"
  std::string backend;   ///< "gpu" or "cpu"
  std::string baseline;  ///< the peer tally's time is divided by: "cub", "openmp"
  /// Key → JSON value text (already encoded: see json_string, json_number).
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<bench_row> rows;
  std::vector<std::string> notes;  ///< skipped sizes, failures, mismatches
  int mismatches = 0;
  int failures = 0;

  /// The row of `impl` for (type, n), or null.
  const bench_row* find(const std::string& impl, const std::string& type, std::int64_t n) const;
  /// Probe time / row time × 100 (NaN without a probe row of that type and n).
  double percent_of_probe(const bench_row& row) const;
  /// Row time / baseline time for (type, n) (NaN without a baseline row).
  double ratio_to_baseline(const bench_row& row) const;
};

/// JSON text of a string (quoted, escaped) and of a number (null if not finite).
std::string json_string(std::string_view text);
std::string json_number(double value);

/// "2^k" when n is a power of two, the number otherwise.
std::string size_label(std::int64_t n);

/// The full table: impl, type, N, µs per call, GB/s, % of probe, tally/baseline, notes.
void print_table(const bench_report& report, std::ostream& out);
/// A compact view: per type, one line per N with each implementation's µs,
/// tally/baseline and tally's % of the probe; then the compensated-sum bar
/// and the mismatch count. Begins with a line "== summary".
void print_summary(const bench_report& report, std::ostream& out);
/// Writes the report as JSON. Returns "" or an error message.
std::string write_json(const bench_report& report, const std::string& path);
/// Prints the table and the summary, writes the JSON when json_path is not
/// empty, and returns the command's exit code: 1 on a mismatch, a failure or
/// a JSON that could not be written, else 0.
int finish_report(const bench_report& report, const std::string& json_path);

/// The current UTC time as 2026-11-22T12:34:56Z.
std::string utc_timestamp();

}  // namespace tally::cli
