"""The rules of python/bench/bench_torch.py's Runner, on the host clock with a
stand-in for torch (its CUDA calls and deterministic-mode switch): a row that
raises is a failure and the run goes on, PyTorch refusing in deterministic
mode is a peer error, the budget leaves rows not run, slow rows whose calls
would pass the budget included."""
import importlib.util
import json
import pathlib
import sys
import time
import types

import pytest

_bench = pytest.importorskip("tally._bench", reason="tally._bench is built where nlohmann_json is found")


@pytest.fixture
def bench_torch(monkeypatch):
    deterministic = []
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(synchronize=lambda: None)
    torch.use_deterministic_algorithms = deterministic.append
    torch.Tensor = type("Tensor", (), {})
    for name in ("float32", "float64", "bfloat16", "float16"):
        setattr(torch, name, object())
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails: no CuPy rows
    path = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench_torch.py"
    spec = importlib.util.spec_from_file_location("bench_torch_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.deterministic_switches = deterministic
    return module


def runner(module, budget_s=None):
    session = _bench.Session("test", "cpu", "exact", trials=3, trial_ms=0.2, warmup=1, progress=False)
    return module.Runner(session, trials=3, budget_s=budget_s), session


def rows(session):
    return json.loads(session.to_json())["rows"]


def test_a_row_that_raises_is_a_failure_and_the_run_goes_on(bench_torch):
    r, session = runner(bench_torch)

    def broken():
        raise ValueError("the binding broke")

    r.row("sum", "tally.broken", broken, lambda out: ("pass", ""), {"n": 1})
    r.row("sum", "tally.fine", lambda: 7, lambda out: ("pass", "7") if out == 7 else ("fail", repr(out)), {"n": 1})
    got = rows(session)
    assert [row["impl"] for row in got] == ["tally.broken", "tally.fine"]
    assert "the binding broke" in got[0]["note"] and got[0]["median_us"] is None
    assert got[1]["check_before"]["status"] == "pass" and got[1]["check_after"]["status"] == "pass"
    assert session.failures == 1 and session.mismatches == 0


def test_pytorch_refusing_in_deterministic_mode_is_a_peer_error(bench_torch):
    r, session = runner(bench_torch)

    def refuses():
        raise RuntimeError("index_add_cuda_ does not have a deterministic implementation")

    r.row("index_add", "torch.index_add_ deterministic", refuses, lambda out: ("pass", ""), {"n": 1},
          deterministic_torch=True)
    got = rows(session)
    assert got[0]["check_before"]["status"] == "peer error"
    assert "deterministic implementation" in got[0]["check_before"]["detail"]
    assert session.failures == 0 and session.exit_code == 0
    assert bench_torch.deterministic_switches == [True, False]  # switched back off


def test_the_budget_leaves_rows_not_run_slow_ones_included(bench_torch, monkeypatch):
    monkeypatch.setattr(bench_torch, "SLOW_CALL_US", 1e4)  # 10 ms calls count as slow here
    r, session = runner(bench_torch, budget_s=0.2)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.06)  # 6 calls (check, calibration, 3 trials, check) would take 0.36 s > the budget

    r.row("sleep", "slow", slow, lambda out: ("pass", ""), {"n": 1})
    time.sleep(0.25)
    r.row("sleep", "late", lambda: None, lambda out: ("pass", ""), {"n": 1})
    got = rows(session)
    assert [row["check_before"]["status"] for row in got] == ["not run", "not run"]
    assert "would end past" in got[0]["note"] and "was spent" in got[1]["note"]
    assert len(calls) == 1  # the first call only
