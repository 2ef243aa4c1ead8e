// The table a report prints: columns found from the rows themselves.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "output.hpp"

namespace tally::bench {

namespace {

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// About four significant figures for times and metrics, no exponents.
std::string figure(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  return fixed(v, a < 10 ? 3 : a < 100 ? 2 : a < 1000 ? 1 : 0);
}

std::string param_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) {
    const auto n = value.get<std::int64_t>();
    return n >= 1024 ? size_label(n) : std::to_string(n);
  }
  if (value.is_null()) return "-";
  return value.dump();
}

std::string check_text(const row& r) {
  if (r.before.status == check_status::not_checked && r.after.status == check_status::not_checked) return "-";
  return std::string(to_string(r.before.status)) + "/" + to_string(r.after.status);
}

void pad(std::string& line, const std::string& cell, std::size_t width, bool right) {
  const std::size_t fill = width > cell.size() ? width - cell.size() : 0;
  if (right) line.append(fill, ' ');
  line += cell;
  if (!right) line.append(fill, ' ');
  line += "  ";
}

}  // namespace

void print_table(const report& r, std::ostream& out) {
  for (const auto& line : r.header) out << line << "\n";
  // Columns: impl, the params' keys and the metrics' names in order of first appearance.
  std::vector<std::string> keys, metrics;
  for (const auto& x : r.rows) {
    for (const auto& [key, value] : x.params.items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    for (const auto& [name, value] : x.metrics)
      if (std::find(metrics.begin(), metrics.end(), name) == metrics.end()) metrics.push_back(name);
  }
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> head = {"impl"};
  head.insert(head.end(), keys.begin(), keys.end());
  head.push_back("us");
  head.insert(head.end(), metrics.begin(), metrics.end());
  head.push_back("check");
  head.push_back("note");
  cells.push_back(head);
  for (const auto& x : r.rows) {
    std::vector<std::string> line = {x.impl};
    for (const auto& key : keys) line.push_back(x.params.contains(key) ? param_text(x.params[key]) : "");
    line.push_back(x.time.measured() ? figure(x.time.median_us) : "-");
    for (const auto& name : metrics) line.push_back(figure(x.metric(name)));
    line.push_back(check_text(x));
    line.push_back(x.note);
    cells.push_back(std::move(line));
  }
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c + 1 < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  const std::size_t first_number = 1 + keys.size();
  for (const auto& line : cells) {
    std::string text;
    for (std::size_t c = 0; c + 1 < line.size(); ++c) pad(text, line[c], width[c], c >= first_number);
    text += line.back();
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  }
  for (const auto& note : r.notes) out << "note: " << note << "\n";
  out << "verification (" << r.check_mode << "): " << r.rows_checked() << " of " << r.rows.size()
      << " rows checked before and after timing, " << r.mismatches << " mismatches, " << r.failures << " failures";
  if (r.peer_errors > 0) out << ", " << r.peer_errors << " peer errors (measured, see notes)";
  out << "\n";
}

}  // namespace tally::bench
