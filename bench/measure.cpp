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

/// Counts and reports a row that threw, then lets the harness recover.
void note_failure(harness& h, row& r, const std::string& what) {
  report& out = *h.out;
  ++out.failures;
  const std::string msg = "FAILED " + row_label(r) + ": " + what;
  std::cerr << "\n*** " << msg << " ***\n";
  std::cout << "*** " << msg << " ***\n";
  out.notes.push_back(msg);
  r.note = r.note.empty() ? "error: " + what : r.note + "; error: " + what;
  if (h.recover) h.recover();
}

}  // namespace

std::string describe_params(const json& params) {
  std::string text;
  for (const auto& [key, value] : params.items()) {
    if (!text.empty()) text += ' ';
    text += key + '=';
    if (value.is_string())
      text += value.get<std::string>();
    else if (value.is_number_integer())
      text += size_label(value.get<std::int64_t>());
    else
      text += value.dump();
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
  if (h.progress)
    std::cerr << "[" << current().benchmark << " " << describe_params(current().params) << "] " << p.name << " ..."
              << std::flush;
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
    row& r = current();
    if (r.before.status == check_status::not_run) r.before.detail = "error before the check";
    if (r.after.status == check_status::not_run) r.after.detail = "error";
    r.time = timing{};
    note_failure(h, r, e.what());
  }
  return out.rows[at];
}

row& add_failure(harness& h, row proto, const std::string& impl, const std::string& what) {
  proto.impl = impl;
  proto.before = check{check_status::not_run, "error before the check"};
  proto.after = check{check_status::not_run, "error"};
  h.out->rows.push_back(std::move(proto));
  const std::size_t at = h.out->rows.size() - 1;
  note_failure(h, h.out->rows[at], what);
  return h.out->rows[at];
}

row& add_not_run(report& out, row proto, const std::string& impl, const std::string& reason) {
  proto.impl = impl;
  proto.note = proto.note.empty() ? "not run: " + reason : proto.note + "; not run: " + reason;
  proto.before = check{check_status::not_run, reason};
  proto.after = check{check_status::not_run, reason};
  out.rows.push_back(std::move(proto));
  return out.rows.back();
}

row& add_peer_error(report& out, row proto, const std::string& impl, const std::string& detail,
                    const std::string& summary) {
  proto.impl = impl;
  proto.note = proto.note.empty() ? "peer error: " + summary : proto.note + "; peer error: " + summary;
  proto.before = check{check_status::peer_error, detail};
  proto.after = check{check_status::not_run, "the peer failed before timing"};
  ++out.peer_errors;
  out.notes.push_back(impl + " " + describe_params(proto.params) + ": " + detail);
  out.rows.push_back(std::move(proto));
  return out.rows.back();
}

}  // namespace tally::bench
