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
  h.time_interleaved = [settings](const std::vector<std::function<void()>>& calls) {
    return time_host_interleaved(calls, settings);
  };
  return h;
}

namespace {

/// Appends p's row to h.out and runs the check before timing. Returns the
/// row's index, and whether it passed (a failed check is reported and the
/// row left untimed; an exception is let through).
std::size_t begin_row(harness& h, const peer& p, row proto, bool& passed) {
  report& out = *h.out;
  proto.impl = p.name;
  if (!p.note.empty()) proto.note = proto.note.empty() ? p.note : proto.note + "; " + p.note;
  out.rows.push_back(std::move(proto));
  const std::size_t at = out.rows.size() - 1;
  if (h.progress)
    std::cerr << "[" << out.rows[at].benchmark << " " << describe_params(out.rows[at].params) << "] " << p.name
              << " ..." << std::flush;
  passed = false;
  if (p.setup) p.setup();
  if (p.reset) p.reset();
  p.run();
  row& r = out.rows[at];
  r.before = p.verify();
  if (!r.before.ok()) {
    report_mismatch(out, r, "before", r.before);
    r.after = check{check_status::not_run, "not timed: the check before timing failed"};
    return at;
  }
  passed = true;
  return at;
}

/// Stores the timing of the row at `at` and runs the check after timing.
/// The progress line names the row again when `label` (its first part was
/// ended by other rows' lines).
void finish_row(harness& h, const peer& p, std::size_t at, const timing& t, bool label) {
  report& out = *h.out;
  out.rows[at].time = t;
  if (p.reset) p.reset();
  p.run();
  row& r = out.rows[at];
  r.after = p.verify();
  if (!r.after.ok()) report_mismatch(out, r, "after", r.after);
  if (r.bytes > 0) r.set_metric("GB/s", r.gbps());
  if (h.progress) {
    char text[96];
    std::snprintf(text, sizeof text, " %.2f us", t.median_us);
    if (label) std::cerr << "[" << r.benchmark << " " << describe_params(r.params) << "] " << r.impl;
    std::cerr << text << (r.after.ok() ? "" : " (after-check FAILED)") << "\n";
  }
}

/// Marks the row at `at` as failed by `what` (a row that threw).
void fail_row(harness& h, std::size_t at, const std::string& what) {
  row& r = h.out->rows[at];
  if (r.before.status == check_status::not_run) r.before.detail = "error before the check";
  if (r.after.status == check_status::not_run) r.after.detail = "error";
  r.time = timing{};
  note_failure(h, r, what);
}

}  // namespace

row& measure(harness& h, const peer& p, row proto) {
  std::size_t at = h.out->rows.size();
  try {
    bool passed = false;
    at = begin_row(h, p, std::move(proto), passed);
    if (passed) finish_row(h, p, at, h.time(p.run), false);
  } catch (const device_lost&) {
    throw;
  } catch (const std::exception& e) {
    fail_row(h, at, e.what());
  }
  return h.out->rows[at];
}

std::vector<std::size_t> measure_interleaved(harness& h, const std::vector<peer>& peers, const row& proto) {
  std::vector<std::size_t> rows, timed;
  std::vector<const peer*> timed_peers;
  for (const peer& p : peers) {
    std::size_t at = h.out->rows.size();
    try {
      bool passed = false;
      at = begin_row(h, p, proto, passed);
      if (h.progress) std::cerr << (passed ? " checked\n" : "\n");
      if (passed) {
        timed.push_back(at);
        timed_peers.push_back(&p);
      }
    } catch (const device_lost&) {
      throw;
    } catch (const std::exception& e) {
      fail_row(h, at, e.what());
    }
    rows.push_back(at);
  }
  if (timed.empty()) return rows;
  try {
    std::vector<timing> times;
    if (h.time_interleaved) {
      std::vector<std::function<void()>> calls;
      for (const peer* p : timed_peers) calls.push_back(p->run);
      times = h.time_interleaved(calls);
    } else {
      for (const peer* p : timed_peers) times.push_back(h.time(p->run));
    }
    for (std::size_t i = 0; i < timed.size(); ++i) {
      try {
        finish_row(h, *timed_peers[i], timed[i], times[i], true);
      } catch (const device_lost&) {
        throw;
      } catch (const std::exception& e) {
        fail_row(h, timed[i], e.what());
      }
    }
  } catch (const device_lost&) {
    throw;
  } catch (const std::exception& e) {
    for (const std::size_t at : timed) fail_row(h, at, std::string("while timing the group: ") + e.what());
  }
  return rows;
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
