// Writing a report: the table (stdout) and the JSON (nlohmann_json). Every
// benchmark prints and saves through these, so every JSON carries the same
// run metadata, trial settings, check mode and mismatch count.
#pragma once

#include <iosfwd>
#include <string>

#include "report.hpp"

namespace tally::bench {

/// The table: the report's header lines, then one line per row in order
/// (impl, each param, median µs, each metric, checks before/after, note),
/// then the notes and a line "verification: R of N rows checked before and
/// after timing, M mismatches, F failures".
void print_table(const report& r, std::ostream& out);

/// The report as JSON: command, backend, date, metadata, settings,
/// check_mode, header, mismatches, failures, peer_errors, rows_checked,
/// notes, rows. A row's params are written as keys of the row itself, beside
/// impl, benchmark, bytes, median_us, min_us, max_us, trials, calls,
/// metrics {name: value}, check_before and check_after {status, detail,
/// error, bound}, note, and its extra fields.
json to_json(const report& r);

/// Writes to_json(r) to `path`. Returns "" or an error message.
std::string write_json(const report& r, const std::string& path);

/// Prints the table to `out`, writes the JSON when json_path is not empty,
/// and returns the exit code: 1 on a mismatch, a failure or a JSON that
/// could not be written, else 0. The table and JSON are written either way.
int finish(const report& r, const std::string& json_path, std::ostream& out);

}  // namespace tally::bench
