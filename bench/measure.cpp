// The check → time → check path shared by every row.
#include "measure.hpp"

#include <cstdio>
#include <exception>
#include <iostream>

#include "host_timing.hpp"

namespace tally::bench {

namespace {

std::string row_label(const row& r) { return r.benchmark + " " + r.impl + " " + describe_params(r.params); }

/// Reports a failed check on stdout and stderr (a mismatch is never quiet).
void report_mismatch(report& out, const row& r, const char* when, const check& c) {
  ++out.mismatches;
  const std::string msg = "MISMATCH " + row_label(r) + " (" + when + " timing): " + c.detail;
  std::cerr << "\n*** " << msg << " ***\n";
  std::cout << "*** " << msg << " ***\n";
  out.notes.push_back(msg);
}

}  // namespace

std::string describe_params(const json& params) {
  std::string text;
  for (const auto& [key, value] : params.items()) {
    if (!text.empty()) text += ' ';
    text += key + '=';
    if (value.is_string()) text += value.get<std::string>();
    else if (value.is_number_integer()) text += size_label(value.get<std::int64_t>());
    else text += value.dump();
  }
  return text;
}

harness host_harness(report& out, const trial_settings& settings) {
  harness h;
  h.out = &out;
  h.time = [settings](const std::function<void()>& call) { return time_host_calls(call, settings); };
  return h;
}

row& measure(harness& h, const peer& p, row proto) {
  report& out = *h.out;
  proto.impl = p.name;
  if (!p.note.empty()) proto.note = proto.note.empty() ? p.note : proto.note + "; " + p.note;
  out.rows.push_back(std::move(proto));
  const std::size_t at = out.rows.size() - 1;
  auto current = [&]() -> row& { return out.rows[at]; };
  if (h.progress) std::cerr << "[" << current().benchmark << " " << describe_params(current().params) << "] " << p.name
                            << " ..." << std::flush;
  try {
    if (p.setup) p.setup();
    if (p.reset) p.reset();
    p.run();
    current().before = p.verify();
    if (!current().before.ok()) {
      report_mismatch(out, current(), "before", current().before);
      current().after = check{check_status::not_run, "not timed: the check before timing failed"};
      return current();
    }
    const timing t = h.time(p.run);
    current().time = t;
    if (p.reset) p.reset();
    p.run();
    current().after = p.verify();
    if (!current().after.ok()) report_mismatch(out, current(), "after", current().after);
    if (current().bytes > 0) current().set_metric("GB/s", current().gbps());
    if (h.progress) {
      char text[96];
      std::snprintf(text, sizeof text, " %.2f us", t.median_us);
      std::cerr << text << (current().after.ok() ? "" : " (after-check FAILED)") << "\n";
    }
  } catch (const device_lost&) {
    throw;
  } catch (const std::exception& e) {
    ++out.failures;
    row& r = current();
    const std::string msg = "FAILED " + row_label(r) + ": " + e.what();
    std::cerr << "\n*** " << msg << " ***\n";
    std::cout << "*** " << msg << " ***\n";
    out.notes.push_back(msg);
    r.note = r.note.empty() ? std::string("error: ") + e.what() : r.note + "; error: " + e.what();
    if (r.before.status == check_status::not_run) r.before.detail = "error before the check";
    if (r.after.status == check_status::not_run) r.after.detail = "error";
    r.time = timing{};
    if (h.recover) h.recover();
  }
  return out.rows[at];
}

row& add_not_run(report& out, row proto, const std::string& impl, const std::string& reason) {
  proto.impl = impl;
  proto.note = proto.note.empty() ? "not run: " + reason : proto.note + "; not run: " + reason;
  proto.before = check{check_status::not_run, reason};
  proto.after = check{check_status::not_run, reason};
  out.rows.push_back(std::move(proto));
  return out.rows.back();
}

}  // namespace tally::bench
