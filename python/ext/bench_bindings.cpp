// tally._bench: the benchmark library (bench/) for benchmarks written in
// Python (python/bench/bench_torch.py). A Session is one report and the way
// its rows are timed -- CUDA events on a stream (the caller's torch stream)
// or the host clock -- and every row goes through bench::measure, the one
// check → time → check path the C++ benchmarks take, with Python callables
// as the peer's setup, reset, run and verify. Parameters and metadata cross
// as JSON text, and the report is written by the library's own JSON writer,
// so the Python rows have the C++ rows' format.
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "gpu_harness.cuh"
#include "measure.hpp"
#include "output.hpp"
#include "run_info.hpp"

namespace nb = nanobind;
namespace tb = tally::bench;

namespace {

/// A JSON object from text, or a ValueError naming the argument.
tb::json parse_object(const std::string& text, const char* argument) {
  tb::json j = tb::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw nb::value_error((std::string("argument '") + argument + "' is not a JSON object").c_str());
  return j;
}

/// The check a Python verify returned: (status, detail) with status "pass",
/// "fail" or "none" (nothing to check), or a bool (detail "").
tb::check check_from(const nb::object& got) {
  if (nb::isinstance<nb::bool_>(got)) return nb::cast<bool>(got) ? tb::check::pass("") : tb::check::fail("differs");
  const auto [status, detail] = nb::cast<std::tuple<std::string, std::string>>(got);
  if (status == "pass") return tb::check::pass(detail);
  if (status == "fail") return tb::check::fail(detail);
  if (status == "none") return tb::check::none(detail);
  throw nb::value_error(("verify returned the status '" + status + "': expected pass, fail or none").c_str());
}

/// One report and how its rows are timed.
class session {
 public:
  /// backend "gpu": CUDA events on `stream` (a cudaStream_t as an integer,
  /// 0 the legacy stream) and the GPU's run metadata; "cpu": the host clock.
  session(std::string command, std::string backend, std::string check_mode, std::uintptr_t stream, int trials,
          double trial_ms, int warmup, bool progress)
      : stream_(reinterpret_cast<cudaStream_t>(stream)), progress_(progress) {
    if (backend != "gpu" && backend != "cpu") throw nb::value_error("argument 'backend' must be 'gpu' or 'cpu'");
    if (trials < 1 || trial_ms <= 0 || warmup < 0)
      throw nb::value_error("trials >= 1, trial_ms > 0 and warmup >= 0 are required");
    report_.command = std::move(command);
    report_.backend = std::move(backend);
    report_.check_mode = std::move(check_mode);
    report_.metadata = gpu() ? tb::gpu_run_metadata() : tb::host_run_metadata();
    settings_ = {trials, trial_ms, warmup};
    report_.settings = {{"trials", trials}, {"trial_ms", trial_ms}, {"warmup", warmup}};
  }

  bool gpu() const { return report_.backend == "gpu"; }

  /// Merges the keys of `text` (a JSON object) into the metadata or settings.
  void add_metadata(const std::string& text) { report_.metadata.update(parse_object(text, "metadata")); }
  void add_settings(const std::string& text) { report_.settings.update(parse_object(text, "settings")); }
  void add_header(std::string line) { report_.header.push_back(std::move(line)); }
  void add_note(std::string line) { report_.notes.push_back(std::move(line)); }

  /// One row through bench::measure; trials, trial_ms and warmup override the
  /// session's for this row (a call of seconds runs once a trial). A run()
  /// that makes `calls_per_run` calls of the operation (a C++ loop, so that
  /// Python's own call is not in the time) has its times divided by it.
  /// Returns the row as JSON text.
  std::string measure(const std::string& benchmark, const std::string& impl, const std::string& params,
                      nb::callable run, nb::callable verify, std::optional<nb::callable> reset,
                      std::optional<nb::callable> setup, double bytes, const std::string& note, int trials,
                      double trial_ms, int warmup, int calls_per_run) {
    if (calls_per_run < 1) throw nb::value_error("argument 'calls_per_run' must be at least 1");
    tb::trial_settings s = settings_;
    if (trials > 0) s.trials = trials;
    if (trial_ms > 0) s.trial_ms = trial_ms;
    if (warmup >= 0) s.warmup = warmup;
    tb::harness h = gpu() ? tb::gpu_harness(report_, stream_, s) : tb::host_harness(report_, s);
    h.progress = progress_;
    if (calls_per_run > 1)
      h.time = [per_run = std::move(h.time), k = calls_per_run](const std::function<void()>& call) {
        tb::timing t = per_run(call);
        t.median_us /= k;
        t.min_us /= k;
        t.max_us /= k;
        t.calls_per_trial *= k;
        return t;
      };
    tb::peer p;
    p.name = impl;
    p.note = note;
    p.run = [run] { run(); };
    p.verify = [verify] { return check_from(verify()); };
    if (reset) p.reset = [f = *reset] { f(); };
    if (setup) p.setup = [f = *setup] { f(); };
    tb::row proto = proto_of(benchmark, params);
    proto.bytes = bytes;
    return row_text(tb::measure(h, p, std::move(proto)));
  }

  /// A row deliberately not run (a time budget spent, a size left out).
  std::string not_run(const std::string& benchmark, const std::string& impl, const std::string& params,
                      const std::string& reason) {
    return row_text(tb::add_not_run(report_, proto_of(benchmark, params), impl, reason));
  }

  /// A row whose peer refused or failed on its own (PyTorch's deterministic
  /// mode refusing an operation): measured and reported, not a failure.
  std::string peer_error(const std::string& benchmark, const std::string& impl, const std::string& params,
                         const std::string& what) {
    return row_text(tb::add_peer_error(report_, proto_of(benchmark, params), impl, what, what));
  }

  std::string to_json() const { return tb::to_json(report_).dump(1); }
  /// Writes the report's JSON to `path`; "" or the error.
  std::string write_json(const std::string& path) const { return tb::write_json(report_, path); }
  std::string table() const {
    std::ostringstream out;
    tb::print_table(report_, out);
    return out.str();
  }
  int exit_code() const { return report_.exit_code(); }
  int mismatches() const { return report_.mismatches; }
  int failures() const { return report_.failures; }

 private:
  /// A row's prototype: its benchmark and params (JSON object text).
  static tb::row proto_of(const std::string& benchmark, const std::string& params) {
    tb::row proto;
    proto.benchmark = benchmark;
    proto.params = parse_object(params, "params");
    return proto;
  }

  /// The JSON of one row, as the report's JSON writes it.
  std::string row_text(const tb::row& r) const {
    tb::report one;
    one.rows.push_back(r);
    return tb::to_json(one)["rows"][0].dump();
  }

  tb::report report_;
  tb::trial_settings settings_;
  cudaStream_t stream_ = nullptr;
  bool progress_ = true;
};

}  // namespace

NB_MODULE(_bench, m) {
  m.doc() = "The benchmark library of tally (bench/) for benchmarks written in Python: rows checked before and "
            "after timing, timed by CUDA events or the host clock, written as the C++ benchmarks' JSON.";
  m.def("gpu_unusable_reason", &tb::gpu_unusable_reason,
        "Why no GPU can be used here, or '' when one can (makes the first CUDA call of the process).");
  nb::class_<session>(m, "Session",
                      "One report and how its rows are timed: backend 'gpu' (CUDA events on `stream`, a "
                      "cudaStream_t as an integer) or 'cpu' (the host clock).")
      .def(nb::init<std::string, std::string, std::string, std::uintptr_t, int, double, int, bool>(),
           nb::arg("command"), nb::arg("backend"), nb::arg("check_mode"), nb::arg("stream") = 0,
           nb::arg("trials") = 7, nb::arg("trial_ms") = 10.0, nb::arg("warmup") = 3, nb::arg("progress") = true)
      .def("add_metadata", &session::add_metadata, nb::arg("json"), "Merges a JSON object into the metadata.")
      .def("add_settings", &session::add_settings, nb::arg("json"), "Merges a JSON object into the settings.")
      .def("add_header", &session::add_header, nb::arg("line"), "A line printed above the table.")
      .def("add_note", &session::add_note, nb::arg("line"), "A note printed under the table.")
      .def("measure", &session::measure, nb::arg("benchmark"), nb::arg("impl"), nb::arg("params"), nb::arg("run"),
           nb::arg("verify"), nb::arg("reset") = nb::none(), nb::arg("setup") = nb::none(), nb::arg("bytes") = 0.0,
           nb::arg("note") = "", nb::arg("trials") = 0, nb::arg("trial_ms") = 0.0, nb::arg("warmup") = -1,
           nb::arg("calls_per_run") = 1,
           "One row through the library's check -> time -> check path (bench::measure). verify returns "
           "(status, detail), status 'pass', 'fail' or 'none', or a bool. trials, trial_ms and warmup (when "
           "given) override the session's; a run() of calls_per_run calls has its times divided by it. "
           "Returns the row as JSON text.")
      .def("not_run", &session::not_run, nb::arg("benchmark"), nb::arg("impl"), nb::arg("params"), nb::arg("reason"),
           "A row deliberately not run; returns it as JSON text.")
      .def("peer_error", &session::peer_error, nb::arg("benchmark"), nb::arg("impl"), nb::arg("params"),
           nb::arg("what"), "A row whose peer refused or failed on its own; returns it as JSON text.")
      .def("to_json", &session::to_json, "The report as the library's JSON text.")
      .def("write_json", &session::write_json, nb::arg("path"), "Writes the JSON; returns '' or the error.")
      .def("table", &session::table, "The report's table, as the C++ benchmarks print it.")
      .def_prop_ro("exit_code", &session::exit_code, "1 on a mismatch or a failure, else 0.")
      .def_prop_ro("mismatches", &session::mismatches)
      .def_prop_ro("failures", &session::failures);
}
