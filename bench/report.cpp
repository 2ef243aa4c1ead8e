// Rows, reports and the metrics derived across rows.
#include "report.hpp"

#include <ctime>

namespace tally::bench {

const char* to_string(check_status status) {
  switch (status) {
    case check_status::passed: return "pass";
    case check_status::failed: return "FAIL";
    case check_status::not_checked: return "-";
    case check_status::not_run: return "not run";
    case check_status::peer_error: return "peer error";
  }
  return "?";
}

double row::metric(const std::string& name) const {
  for (const auto& [key, value] : metrics)
    if (key == name) return value;
  return NAN;
}

void row::set_metric(const std::string& name, double value) {
  for (auto& [key, v] : metrics)
    if (key == name) {
      v = value;
      return;
    }
  metrics.emplace_back(name, value);
}

const row* report::find(const std::string& impl, const json& params) const {
  for (const auto& r : rows)
    if (r.impl == impl && r.params == params) return &r;
  return nullptr;
}

int report::rows_checked() const {
  int count = 0;
  for (const auto& r : rows)
    if (r.before.status == check_status::passed && r.after.status == check_status::passed) ++count;
  return count;
}

void add_ratio_to(report& r, const std::string& peer, std::string name) {
  if (name.empty()) name = "/" + peer;
  for (auto& x : r.rows) {
    if (x.impl == peer || !x.time.measured()) continue;
    const row* base = r.find(peer, x.params);
    if (base && base->time.measured() && base->time.median_us > 0)
      x.set_metric(name, x.time.median_us / base->time.median_us);
  }
}

void add_percent_of(report& r, const std::string& floor_impl, std::string name) {
  if (name.empty()) name = "%" + floor_impl;
  for (auto& x : r.rows) {
    if (!x.time.measured() || x.time.median_us <= 0) continue;
    const row* floor = r.find(floor_impl, x.params);
    if (floor && floor->time.measured()) x.set_metric(name, 100.0 * floor->time.median_us / x.time.median_us);
  }
}

std::string size_label(std::int64_t n) {
  if (n > 0 && (n & (n - 1)) == 0) {
    int k = 0;
    while ((std::int64_t{1} << k) < n) ++k;
    return "2^" + std::to_string(k);
  }
  return std::to_string(n);
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace tally::bench
