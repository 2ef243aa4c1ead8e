"""tally._bench, the benchmark library for Python benchmarks, on the host
clock: every row goes check -> time -> check, failed checks and errors are
counted, and the report is the C++ benchmarks' JSON."""
import json
import pathlib
import subprocess
import sys
import time

import numpy as np
import pytest

_bench = pytest.importorskip("tally._bench", reason="tally._bench is built where nlohmann_json is found")


def session(**kw):
    return _bench.Session("test_bench_cpu", "cpu", "exact sums of small integers", trials=3, trial_ms=0.2, warmup=1,
                          progress=False, **kw)


def test_a_row_is_checked_before_and_after_timing():
    rng = np.random.default_rng()
    x = rng.integers(-9, 10, size=4099).astype(np.float64)
    out = np.zeros(1)
    calls = {"verify": 0, "reset": 0}

    def run():
        out[0] = x.sum()

    def reset():
        calls["reset"] += 1
        out[0] = np.nan  # poisoned: a run that wrote nothing cannot pass

    def verify():
        calls["verify"] += 1
        return ("pass", "exact") if out[0] == float(sum(int(v) for v in x)) else ("fail", f"got {out[0]}")

    s = session()
    row = json.loads(s.measure("sum", "numpy", json.dumps({"n": 4099}), run, verify, reset=reset, bytes=x.nbytes))
    assert calls == {"verify": 2, "reset": 2}
    assert row["impl"] == "numpy" and row["benchmark"] == "sum" and row["n"] == 4099
    assert row["check_before"]["status"] == "pass" and row["check_after"]["status"] == "pass"
    assert row["median_us"] > 0 and row["trials"] == 3 and row["calls"] >= 1
    assert row["metrics"]["GB/s"] > 0
    assert s.exit_code == 0 and s.mismatches == 0


def test_a_failed_check_before_timing_leaves_the_row_untimed_and_counts():
    s = session()
    row = json.loads(s.measure("sum", "wrong", "{}", lambda: None, lambda: ("fail", "differs by 1")))
    assert row["check_before"]["status"] == "FAIL" and row["median_us"] is None
    assert s.mismatches == 1 and s.exit_code == 1


def test_a_result_that_breaks_after_timing_is_a_mismatch():
    state = {"checks": 0}

    def verify():
        state["checks"] += 1
        return state["checks"] == 1  # passes before timing only

    s = session()
    row = json.loads(s.measure("sum", "flaky", "{}", lambda: None, verify))
    assert row["check_before"]["status"] == "pass" and row["check_after"]["status"] == "FAIL"
    assert row["median_us"] is not None and s.mismatches == 1 and s.exit_code == 1


def test_an_exception_in_a_row_is_a_failure_with_its_message():
    def run():
        raise RuntimeError("the peer broke")

    s = session()
    row = json.loads(s.measure("sum", "broken", "{}", run, lambda: True))
    assert "the peer broke" in row["note"] and row["median_us"] is None
    assert s.failures == 1 and s.exit_code == 1


def test_not_run_and_peer_error_rows_and_the_report_json(tmp_path):
    s = session()
    s.add_settings(json.dumps({"budget_s": 30}))
    s.add_metadata(json.dumps({"torch": "none"}))
    s.add_header("a line above the table")
    s.measure("sum", "numpy", json.dumps({"n": 3}), lambda: None, lambda: ("none", "nothing to compare"))
    s.not_run("sum", "late", json.dumps({"n": 3}), "the run's time budget was spent")
    s.peer_error("sum", "torch deterministic", json.dumps({"n": 3}), "refused: no deterministic implementation")
    path = tmp_path / "report.json"
    assert s.write_json(str(path)) == ""
    report = json.loads(path.read_text())
    assert report["command"] == "test_bench_cpu" and report["backend"] == "cpu"
    assert report["settings"]["budget_s"] == 30 and report["settings"]["trials"] == 3
    assert report["metadata"]["torch"] == "none" and "host" in report["metadata"]
    assert report["peer_errors"] == 1 and report["mismatches"] == 0 and report["failures"] == 0
    assert [r["impl"] for r in report["rows"]] == ["numpy", "late", "torch deterministic"]
    assert report["rows"][1]["check_before"]["status"] == "not run"
    assert report["rows"][2]["check_before"]["status"] == "peer error"
    assert report["rows"][2]["check_after"]["status"] == "not run"
    assert any("refused: no deterministic implementation" in note for note in report["notes"])
    assert "a line above the table" in s.table()
    assert s.exit_code == 0


def test_bad_arguments_are_value_errors_naming_them():
    with pytest.raises(ValueError, match="'backend'"):
        _bench.Session("x", "tpu", "none")
    with pytest.raises(ValueError, match="trials"):
        _bench.Session("x", "cpu", "none", trials=0)
    s = session()
    with pytest.raises(ValueError, match="'params'"):
        s.measure("sum", "numpy", "[1, 2]", lambda: None, lambda: True)
    # A verify that answers nonsense fails its row (as any error inside a row does).
    row = json.loads(s.measure("sum", "numpy", "{}", lambda: None, lambda: ("maybe", "")))
    assert "status 'maybe'" in row["note"] and s.failures == 1


def test_a_run_of_several_calls_is_timed_per_call():
    """calls_per_run: one run() that makes k calls (a C++ loop behind one
    Python call) has its times divided by k, and its calls counted k times."""
    def run_of(k):
        return lambda: [time.sleep(2e-4) for _ in range(k)]

    s = session()
    one = json.loads(s.measure("sleep", "one", "{}", run_of(1), lambda: True))
    ten = json.loads(s.measure("sleep", "ten", "{}", run_of(10), lambda: True, calls_per_run=10))
    assert ten["calls"] % 10 == 0
    assert 0.5 < ten["median_us"] / one["median_us"] < 2.0  # about one sleep each, not ten
    with pytest.raises(ValueError, match="calls_per_run"):
        s.measure("sleep", "none", "{}", run_of(1), lambda: True, calls_per_run=0)


def test_plot_python_tabulates_a_session_json(tmp_path):
    """scripts/plot-python reads the library's JSON as bench_torch.py writes
    it: times of rows that passed both checks, 'refused' for PyTorch's peer
    errors, 'not run' and 'FAILED' in place of a time, ratios between rows."""
    s = session()
    cpu = {"n": 1024, "dtype": "float32"}
    s.measure("call overhead", "C++ tally::reduce", json.dumps(cpu), lambda: time.sleep(1e-4), lambda: True)
    s.measure("call overhead", "tally.sum, out=", json.dumps(cpu), lambda: time.sleep(2e-4), lambda: True)
    p = {"n": 99, "width": 16, "rows_out": 7, "hot": 0.5, "dtype": "float32"}
    s.measure("index_add", "tally.index_add", json.dumps(p), lambda: time.sleep(1e-4), lambda: True)
    s.measure("index_add", "tally.index_add deterministic", json.dumps(p), lambda: None, lambda: ("fail", "off"))
    s.not_run("index_add", "torch.index_add_", json.dumps(p), "budget")
    s.peer_error("index_add", "torch.index_add_ deterministic", json.dumps(p), "RuntimeError: no deterministic kernel")
    path = tmp_path / "bench-python.json"
    assert s.write_json(str(path)) == ""
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "plot-python"
    text = subprocess.run([sys.executable, str(script), str(path), "--no-plots"], check=True, capture_output=True,
                          text=True).stdout
    overhead = next(line for line in text.splitlines() if line.startswith("| tally.sum, out="))
    assert overhead.split("|")[3].strip().endswith("x")  # its ratio to the C++ row
    index_add = next(line for line in text.splitlines() if line.startswith("| 16 |")).split("|")
    assert index_add[4].strip().replace(".", "").isdigit()  # tally: a time
    assert [c.strip() for c in index_add[5:6] + index_add[7:9]] == ["FAILED", "not run", "refused"]
