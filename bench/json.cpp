// The JSON a report is saved as (nlohmann_json), and finish().
#include <cmath>
#include <fstream>
#include <iostream>
#include <ostream>

#include "output.hpp"

namespace tally::bench {

namespace {

json check_json(const check& c) {
  json j = {{"status", to_string(c.status)}, {"detail", c.detail}};
  if (std::isfinite(c.error)) j["error"] = c.error;
  if (std::isfinite(c.bound)) j["bound"] = c.bound;
  return j;
}

/// NaN and infinities as null (JSON has no such numbers).
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json row_json(const row& x) {
  json j = {{"benchmark", x.benchmark}, {"impl", x.impl}};
  for (const auto& [key, value] : x.params.items()) j[key] = value;
  j["bytes"] = x.bytes;
  j["median_us"] = x.time.measured() ? json(x.time.median_us) : json(nullptr);
  j["min_us"] = x.time.measured() ? json(x.time.min_us) : json(nullptr);
  j["max_us"] = x.time.measured() ? json(x.time.max_us) : json(nullptr);
  j["trials"] = x.time.trials;
  j["calls"] = x.time.calls_per_trial;
  json metrics = json::object();
  for (const auto& [name, value] : x.metrics) metrics[name] = number(value);
  j["metrics"] = metrics;
  j["check_before"] = check_json(x.before);
  j["check_after"] = check_json(x.after);
  j["note"] = x.note;
  for (const auto& [key, value] : x.extra.items()) j[key] = value;
  return j;
}

}  // namespace

json to_json(const report& r) {
  json j = {{"command", r.command}, {"backend", r.backend}, {"date", utc_timestamp()}};
  j["metadata"] = r.metadata;
  j["settings"] = r.settings;
  j["check_mode"] = r.check_mode;
  j["header"] = r.header;
  j["mismatches"] = r.mismatches;
  j["failures"] = r.failures;
  j["peer_errors"] = r.peer_errors;
  j["rows_checked"] = r.rows_checked();
  j["notes"] = r.notes;
  json rows = json::array();
  for (const auto& x : r.rows) rows.push_back(row_json(x));
  j["rows"] = std::move(rows);
  return j;
}

std::string write_json(const report& r, const std::string& path) {
  std::ofstream file(path);
  if (!file) return "cannot open " + path + " for writing";
  file << to_json(r).dump(1) << "\n";
  file.close();
  return file ? "" : "error writing " + path;
}

int finish(const report& r, const std::string& json_path, std::ostream& out) {
  print_table(r, out);
  out.flush();
  int code = r.exit_code();
  if (!json_path.empty()) {
    const std::string error = write_json(r, json_path);
    if (!error.empty()) {
      std::cerr << r.command << ": " << error << "\n";
      code = 1;
    } else {
      std::cerr << "wrote " << json_path << "\n";
    }
  }
  return code;
}

}  // namespace tally::bench
