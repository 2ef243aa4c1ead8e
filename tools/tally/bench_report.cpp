// Printing and saving bench reports.
#include "bench_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <ostream>
#include <set>

namespace tally::cli {

const bench_row* bench_report::find(const std::string& impl, const std::string& type, std::int64_t n) const {
  for (const auto& r : rows)
    if (r.impl == impl && r.type == type && r.n == n) return &r;
  return nullptr;
}

double bench_report::percent_of_probe(const bench_row& row) const {
  const bench_row* probe = find("probe", row.type, row.n);
  if (!probe || row.median_us <= 0) return NAN;
  return 100.0 * probe->median_us / row.median_us;
}

double bench_report::ratio_to_baseline(const bench_row& row) const {
  const bench_row* base = find(baseline, row.type, row.n);
  if (!base || base->median_us <= 0) return NAN;
  return row.median_us / base->median_us;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", value);
  return buf;
}

std::string size_label(std::int64_t n) {
  if (n > 0 && (n & (n - 1)) == 0) {
    int k = 0;
    while ((std::int64_t{1} << k) < n) ++k;
    return "2^" + std::to_string(k);
  }
  return std::to_string(n);
}

namespace {

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

/// Four significant figures, without exponents for the values a table shows.
std::string time_text(double us) {
  if (!std::isfinite(us) || us <= 0) return "-";
  return fixed(us, us < 10 ? 2 : us < 100 ? 1 : 0);
}

bool is_tally(const std::string& impl) { return impl.rfind("tally", 0) == 0; }

/// Types in table order, as they appear in the rows.
std::vector<std::string> types_of(const bench_report& report) {
  std::vector<std::string> types;
  for (const auto& r : report.rows)
    if (std::find(types.begin(), types.end(), r.type) == types.end()) types.push_back(r.type);
  return types;
}

}  // namespace

void print_table(const bench_report& report, std::ostream& out) {
  int impl_width = 12;
  for (const auto& r : report.rows) impl_width = std::max(impl_width, static_cast<int>(r.impl.size()));
  const std::string ratio_header = "tally/" + report.baseline;
  const int ratio_width = std::max(9, static_cast<int>(ratio_header.size()));
  char line[320];
  std::snprintf(line, sizeof line, "%-*s %-7s %6s %12s %9s %7s %*s  %s\n", impl_width, "impl", "type", "N", "us/call",
                "GB/s", "%probe", ratio_width, ratio_header.c_str(), "notes");
  out << line;
  for (const auto& type : types_of(report)) {
    std::vector<const bench_row*> rows;
    for (const auto& r : report.rows)
      if (r.type == type) rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->n < b->n; });
    for (const bench_row* r : rows) {
      std::string notes = r->blocks > 0 ? "blocks=" + std::to_string(r->blocks) : "";
      if (!r->note.empty()) notes += (notes.empty() ? "" : "; ") + r->note;
      const double ratio = is_tally(r->impl) ? report.ratio_to_baseline(*r) : NAN;
      std::snprintf(line, sizeof line, "%-*s %-7s %6s %12s %9s %7s %*s  %s\n", impl_width, r->impl.c_str(),
                    r->type.c_str(), size_label(r->n).c_str(), time_text(r->median_us).c_str(),
                    fixed(r->gbps(), 1).c_str(), fixed(report.percent_of_probe(*r), 1).c_str(), ratio_width,
                    fixed(ratio, 3).c_str(), notes.c_str());
      out << line;
    }
  }
}

void print_summary(const bench_report& report, std::ostream& out) {
  out << "== summary (" << report.backend << "): us per call (median); tally/" << report.baseline
      << " = time ratio (< 1: tally faster); %probe = tally's bandwidth / the read probe's\n";
  const std::string ratio_header = "tally/" + report.baseline;
  const int ratio_width = std::max(10, static_cast<int>(ratio_header.size()));
  char cell[96];
  for (const auto& type : types_of(report)) {
    std::vector<std::string> impls;
    std::set<std::int64_t> sizes;
    for (const auto& r : report.rows)
      if (r.type == type) {
        if (std::find(impls.begin(), impls.end(), r.impl) == impls.end()) impls.push_back(r.impl);
        sizes.insert(r.n);
      }
    auto width = [](const std::string& impl) { return std::max(9, static_cast<int>(impl.size())); };
    std::snprintf(cell, sizeof cell, "%-7s %-6s", type.c_str(), "N");
    std::string header = cell;
    for (const auto& impl : impls) {
      std::snprintf(cell, sizeof cell, " %*s", width(impl), impl.c_str());
      header += cell;
    }
    std::snprintf(cell, sizeof cell, " %*s %7s", ratio_width, ratio_header.c_str(), "%probe");
    out << header << cell << "\n";
    for (const std::int64_t n : sizes) {
      std::snprintf(cell, sizeof cell, "%-7s %-6s", "", size_label(n).c_str());
      std::string text = cell;
      for (const auto& impl : impls) {
        const bench_row* r = report.find(impl, type, n);
        std::snprintf(cell, sizeof cell, " %*s", width(impl), r ? time_text(r->median_us).c_str() : "-");
        text += cell;
      }
      const bench_row* t = report.find("tally", type, n);
      std::snprintf(cell, sizeof cell, " %*s %7s", ratio_width,
                    t ? fixed(report.ratio_to_baseline(*t), 3).c_str() : "-",
                    t ? fixed(report.percent_of_probe(*t), 1).c_str() : "-");
      out << text << cell << "\n";
    }
  }
  // The bar for compensated sums: within 5 % of plain at the largest size.
  for (const auto& type : types_of(report)) {
    std::int64_t largest = -1;
    for (const auto& r : report.rows)
      if (r.type == type && r.impl == "tally-comp" && report.find("tally", type, r.n)) largest = std::max(largest, r.n);
    if (largest < 0) continue;
    const double ratio = report.find("tally-comp", type, largest)->median_us /
                         report.find("tally", type, largest)->median_us;
    // The bar is about memory-bound GPU sums; on the CPU the ratio is only shown.
    const char* verdict = report.backend != "gpu" ? "" : ratio <= 1.05 ? "  (within the 5% bar)" : "  (OVER the 5% bar)";
    out << "compensated/plain time, " << type << " N=" << size_label(largest) << ": " << fixed(ratio, 3) << verdict
        << "\n";
  }
  for (const auto& note : report.notes) out << "note: " << note << "\n";
  out << "verification: " << report.mismatches << " mismatches, " << report.failures << " failures\n";
}

std::string write_json(const bench_report& report, const std::string& path) {
  std::ofstream file(path);
  if (!file) return "cannot open " + path + " for writing";
  file << "{\n  \"command\": " << json_string(report.command) << ",\n  \"backend\": " << json_string(report.backend)
       << ",\n  \"baseline\": " << json_string(report.baseline) << ",\n";
  for (const auto& [key, value] : report.meta) file << "  " << json_string(key) << ": " << value << ",\n";
  file << "  \"mismatches\": " << report.mismatches << ",\n  \"failures\": " << report.failures
       << ",\n  \"notes\": [";
  for (std::size_t i = 0; i < report.notes.size(); ++i) file << (i ? ", " : "") << json_string(report.notes[i]);
  file << "],\n  \"rows\": [\n";
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const bench_row& r = report.rows[i];
    file << "    {\"impl\": " << json_string(r.impl) << ", \"type\": " << json_string(r.type) << ", \"n\": " << r.n
         << ", \"bytes\": " << json_number(r.bytes) << ", \"median_us\": " << json_number(r.median_us)
         << ", \"min_us\": " << json_number(r.min_us) << ", \"max_us\": " << json_number(r.max_us)
         << ", \"trials\": " << r.trials << ", \"calls\": " << r.calls << ", \"gbps\": " << json_number(r.gbps())
         << ", \"pct_probe\": " << json_number(report.percent_of_probe(r))
         << ", \"ratio_to_baseline\": " << json_number(report.ratio_to_baseline(r))
         << ", \"rel_error\": " << (r.rel_error < 0 ? "null" : json_number(r.rel_error));
    if (r.blocks > 0) file << ", \"blocks\": " << r.blocks;
    if (!r.note.empty()) file << ", \"note\": " << json_string(r.note);
    if (!r.sweep.empty()) {
      file << ", \"sweep\": [";
      for (std::size_t k = 0; k < r.sweep.size(); ++k)
        file << (k ? ", " : "") << "{\"blocks\": " << r.sweep[k].first
             << ", \"median_us\": " << json_number(r.sweep[k].second) << "}";
      file << "]";
    }
    file << "}" << (i + 1 < report.rows.size() ? "," : "") << "\n";
  }
  file << "  ]\n}\n";
  file.close();
  return file ? "" : "error writing " + path;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

int finish_report(const bench_report& report, const std::string& json_path) {
  print_table(report, std::cout);
  std::cout << "\n";
  print_summary(report, std::cout);
  if (!json_path.empty()) {
    const std::string error = write_json(report, json_path);
    if (!error.empty()) {
      std::cerr << "tally bench reduce: " << error << "\n";
      return 1;
    }
    std::cerr << "wrote " << json_path << "\n";
  }
  return report.mismatches + report.failures > 0 ? 1 : 0;
}

}  // namespace tally::cli
