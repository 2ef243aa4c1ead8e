"""tally against PyTorch and CuPy on the same buffers (run on a GPU machine).

Every row: CUDA events around back-to-back calls of the operation alone,
warm-up first, median of trials (calls of over 0.1 s: one a trial, at most 3
trials); the result is checked against an independent reference (NumPy on the
host, or float64 on the device) before and after timing, an output that the
operation adds into zeroed before each checked call and never inside the timed
ones. PyTorch rows are also run under torch.use_deterministic_algorithms(True),
recording PyTorch's error where it refuses. Groups: the Python call overhead of
the bar (a 2^10-element tally.sum on a torch CUDA tensor against the C++
tally::reduce on the same buffer and stream), scatter-add and bincount,
histograms, Zipf-keyed counts beside uniform ones, and the row scatter of the
issue (index_add_, 7.77 M rows of 128 into 1.72 M, 50 % / 10 % / none to one
hot row, widths 1-1024 with the bytes of src kept, f32/bf16/f64). The JSON is
rewritten after every row: a run cut short keeps what it finished.

    python python/bench/bench_torch.py --out bench-python.json [--quick] [--budget SECONDS]
        [--only GROUP ...] [--widths 1 16 128 1024] [--dtypes float32 ...] [--hots 0.5 ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch

import tally

try:
    import cupy
except ImportError:  # pragma: no cover
    cupy = None


def time_us(fn, calls, trials, warmup=3):
    """Median over trials of µs per call, `calls` calls between two events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(trials):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(1000.0 * start.elapsed_time(stop) / calls)
    return statistics.median(samples)


# A call slower than this is timed once a trial and not warmed up again (the
# checked call was its warm-up); slower than SINGLE_TRIAL_US, in one trial.
SLOW_CALL_US = 1e5
SINGLE_TRIAL_US = 2e6


class Runner:
    def __init__(self, trials, budget_s=None, on_row=None):
        """on_row(rows), if given, runs after each row is recorded (main()
        rewrites the JSON file there, so a run cut short keeps its rows)."""
        self.trials = trials
        self.rows = []
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.on_row = on_row

    def record(self, entry):
        self.rows.append(entry)
        print(json.dumps(entry), flush=True)
        if self.on_row is not None:
            self.on_row(self.rows)

    def spent(self):
        """Whether the run's time budget is spent (rows from now on are not run)."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def row(self, name, fn, check, calls=5, deterministic_torch=False, reset=None, **info):
        """Checks fn's result, times fn, checks again, records the row.

        The timed calls are fn alone, back to back. `reset` (e.g. zeroing the
        output that fn adds into) runs before each checked call only, so the
        checks see one call's result and the timing sees nothing else. Calls of
        over SLOW_CALL_US are timed one a trial, in at most 3 trials (1 over
        SINGLE_TRIAL_US). Once the run's time budget is spent, rows are
        recorded as not run."""
        entry = {"name": name, **info}
        if self.spent():
            entry.update(us=None, checked=False, not_run="the run's time budget (--budget) was spent")
            self.record(entry)
            return

        def checked_call():
            """Checks one call; returns (passed, µs the call took, launch to finish)."""
            if reset is not None:
                reset()
            torch.cuda.synchronize()
            started = time.perf_counter()
            result = fn()
            torch.cuda.synchronize()
            return check(result), 1e6 * (time.perf_counter() - started)

        try:
            if deterministic_torch:
                torch.use_deterministic_algorithms(True)
            ok_before, first_us = checked_call()
            trials, warmup = self.trials, 3
            if first_us > SLOW_CALL_US:
                calls, trials, warmup = 1, min(trials, 3), 0
                if first_us > SINGLE_TRIAL_US:
                    trials = 1
            us = time_us(fn, calls, trials, warmup)
            ok_after, _ = checked_call()
            entry.update(us=round(us, 2), calls=calls, trials=trials, checked=bool(ok_before and ok_after))
            if not (ok_before and ok_after):
                entry["error"] = "result differs from the reference"
        except Exception as e:  # a peer refusing (deterministic mode) is a result to record
            entry.update(us=None, checked=False, error=f"{type(e).__name__}: {str(e)[:160]}")
        finally:
            torch.use_deterministic_algorithms(False)
        self.record(entry)


def close(a, b, rtol=1e-9, atol=1e-9):
    a = a.cpu().numpy() if isinstance(a, torch.Tensor) else (a.get() if cupy is not None and isinstance(a, cupy.ndarray) else np.asarray(a))
    return a.shape == np.shape(b) and np.allclose(a, b, rtol=rtol, atol=atol)


def equal(a, b):
    a = a.cpu().numpy() if isinstance(a, torch.Tensor) else (a.get() if cupy is not None and isinstance(a, cupy.ndarray) else np.asarray(a))
    return a.shape == np.shape(b) and np.array_equal(a, b)


def scatter_rows(r, n, bins_list):
    g = torch.Generator(device="cuda").manual_seed(1)
    values = torch.randn(n, device="cuda", dtype=torch.float64, generator=g)
    host_values = values.cpu().numpy()
    for bins in bins_list:
        index = torch.randint(0, bins, (n,), device="cuda", generator=g)
        host_index = index.cpu().numpy()
        ref = np.bincount(host_index, weights=host_values, minlength=bins)
        ref_counts = np.bincount(host_index, minlength=bins)
        out = torch.zeros(bins, device="cuda", dtype=torch.float64)
        tol = dict(rtol=1e-9, atol=1e-9 * max(1.0, math.sqrt(n / bins)))

        # The scatters add into out: zeroed before each checked call, not
        # within the timed ones (which then add into what the last left).
        r.row("tally.scatter_add f64", lambda: tally.scatter_add(out, index, values, check_indices=False),
              lambda o: close(o, ref, **tol), reset=out.zero_, bins=bins, n=n)
        r.row("tally.scatter_add f64 deterministic",
              lambda: tally.scatter_add(out, index, values, deterministic=True, check_indices=False),
              lambda o: close(o, ref, **tol), reset=out.zero_, bins=bins, n=n)
        r.row("torch.scatter_add_ f64", lambda: out.scatter_add_(0, index, values),
              lambda o: close(o, ref, **tol), reset=out.zero_, bins=bins, n=n)
        r.row("torch.scatter_add_ f64 deterministic", lambda: out.scatter_add_(0, index, values),
              lambda o: close(o, ref, **tol), reset=out.zero_, bins=bins, n=n, deterministic_torch=True, calls=1)
        r.row("tally.bincount weighted f64", lambda: tally.bincount(index, weights=values, minlength=bins),
              lambda o: close(o, ref, **tol), bins=bins, n=n)
        r.row("tally.bincount weighted f64 deterministic",
              lambda: tally.bincount(index, weights=values, minlength=bins, deterministic=True),
              lambda o: close(o, ref, **tol), bins=bins, n=n)
        r.row("torch.bincount weighted f64", lambda: torch.bincount(index, weights=values, minlength=bins),
              lambda o: close(o, ref, **tol), bins=bins, n=n)
        r.row("torch.bincount weighted f64 deterministic",
              lambda: torch.bincount(index, weights=values, minlength=bins),
              lambda o: close(o, ref, **tol), bins=bins, n=n, deterministic_torch=True, calls=1)
        r.row("tally.bincount", lambda: tally.bincount(index, minlength=bins), lambda o: equal(o, ref_counts),
              bins=bins, n=n)
        r.row("torch.bincount", lambda: torch.bincount(index, minlength=bins), lambda o: equal(o, ref_counts),
              bins=bins, n=n)
        if cupy is not None:
            cindex = cupy.from_dlpack(index)
            cvalues = cupy.from_dlpack(values)
            r.row("cupy.bincount weighted f64", lambda: cupy.bincount(cindex, weights=cvalues, minlength=bins),
                  lambda o: close(o, ref, **tol), bins=bins, n=n)
            r.row("cupy.bincount", lambda: cupy.bincount(cindex, minlength=bins), lambda o: equal(o, ref_counts),
                  bins=bins, n=n)


def histogram_rows(r, n, bins_list):
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.rand(n, device="cuda", dtype=torch.float64, generator=g)
    host = x.cpu().numpy()
    for bins in bins_list:
        ref = np.histogram(host, bins=bins, range=(0.0, 1.0))[0]
        r.row("tally.histogram f64", lambda: tally.histogram(x, bins=bins, range=(0.0, 1.0), return_edges=False),
              lambda o: equal(o, ref), bins=bins, n=n)
        # histc: float counts, bins closed like NumPy's at the top.
        r.row("torch.histc f64", lambda: torch.histc(x, bins=bins, min=0.0, max=1.0),
              lambda o: equal(o, ref.astype(np.float64)), bins=bins, n=n)
        r.row("torch.histc f64 deterministic", lambda: torch.histc(x, bins=bins, min=0.0, max=1.0),
              lambda o: equal(o, ref.astype(np.float64)), bins=bins, n=n, deterministic_torch=True, calls=1)
        if cupy is not None:
            cx = cupy.from_dlpack(x)
            edges = cupy.linspace(0.0, 1.0, bins + 1)
            r.row("cupy.histogram f64", lambda: cupy.histogram(cx, bins=edges)[0], lambda o: equal(o, ref),
                  bins=bins, n=n)


def overhead_rows(r, calls):
    """The bar's Python call overhead: µs per call of a 2^10-element f32 sum,
    back to back between CUDA events, for the C++ tally::reduce into device
    memory, tally.sum into `out=` (the same work from Python), tally.sum with a
    new result (plus torch's allocation of it, timed alone beside it) and
    torch.sum. The candidates take turns within each trial, after a warm-up of
    `calls` calls each, so that a clock or host change between trials moves
    them all; the rows hold each one's median and its ratio to the C++ call."""
    x = torch.rand(1024, device="cuda", dtype=torch.float32)
    out = torch.empty((), device="cuda", dtype=torch.float32)
    ref = float(x.double().sum())

    def check(o):
        return abs(float(o) - ref) <= 1e-5 * ref

    cpp_out = torch.empty((), device="cuda", dtype=torch.float32)

    def cpp(checked):
        return lambda: tally._time_sum_cpp(x, calls, checked=checked, out=cpp_out)

    def python(fn):
        return lambda: time_us(fn, calls, 1, warmup=0)

    def allocated(t):
        return t.shape == () and t.is_cuda and t.dtype == torch.float32

    # name: (timer, what its calls wrote is checked by, poisons cpp_out first)
    candidates = {
        "C++ tally::reduce f32 2^10 (per call)": (cpp(False), lambda: check(cpp_out), True),
        "C++ tally::reduce f32 2^10 (per call, checked mode)": (cpp(True), lambda: check(cpp_out), True),
        "tally.sum f32 2^10 (Python, out=)": (python(lambda: tally.sum(x, out=out)),
                                              lambda: check(tally.sum(x, out=out)), False),
        "tally.sum f32 2^10 (Python, new output)": (python(lambda: tally.sum(x)), lambda: check(tally.sum(x)), False),
        "torch.empty((), cuda) alone": (python(lambda: torch.empty((), device="cuda")),
                                        lambda: allocated(torch.empty((), device="cuda")), False),
        "torch.sum f32 2^10": (python(lambda: torch.sum(x)), lambda: check(torch.sum(x)), False),
    }
    ok = {name: True for name in candidates}
    samples = {name: [] for name in candidates}
    for trial in range(1 + max(r.trials, 9)):  # trial 0 warms up
        for name, (timer, verify, poison) in candidates.items():
            if poison:
                cpp_out.fill_(-1.0)  # only the timed calls write it
            elif trial == 0:
                ok[name] = verify()  # before timing
            us = timer()
            ok[name] = ok[name] and verify()  # after: for the C++ rows, what the timed calls wrote
            if trial > 0:
                samples[name].append(us)
    cpp_us = statistics.median(samples["C++ tally::reduce f32 2^10 (per call)"])
    for name in candidates:
        us = statistics.median(samples[name])
        checked = ok[name]
        row = {"name": name, "n": 1024, "us": round(us, 3), "ratio_to_cpp": round(us / cpp_us, 3),
               "trials": len(samples[name]), "calls": calls, "checked": checked}
        if not checked:
            row["error"] = "result differs from the reference"
        r.record(row)


UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def hot_keys(n, rows_out, hot, g):
    """n keys in [0, rows_out): a fraction `hot` of them 0, the rest uniform, in random order."""
    keys = torch.randint(0, rows_out, (n,), device="cuda", generator=g)
    if hot > 0:
        keys[torch.rand(n, device="cuda", generator=g) < hot] = 0
    return keys


def index_add_rows(r, src_rows, rows_out, widths, dtypes, hots):
    """The issue's hot-row problem: src_rows x 128 values into rows_out rows, a
    fraction `hot` of them to row 0; other widths keep the bytes of src. Checked
    against torch.index_add_ in float64 within the recursive-summation bound
    (m_k - 1)·u·Σ|x| of each output element (m_k its addends, u the unit
    roundoff of the accumulation: f32 for bf16/f16 rows tally groups, which the
    bound covers as the larger of the two), before and after timing."""
    g = torch.Generator(device="cuda").manual_seed(3)
    for width in widths:
        n = max(1, src_rows * 128 // width)
        for hot in hots:
            index = hot_keys(n, rows_out, hot, g)
            addends = torch.bincount(index, minlength=rows_out).to(torch.float64)
            for dtype in dtypes:
                name = str(dtype).replace("torch.", "")
                info = dict(n=n, width=width, rows_out=rows_out, hot=hot, dtype=name)
                impls = [f"tally.index_add {name}", f"tally.index_add {name} deterministic",
                         f"tally.index_add {name} deterministic, given scale", f"torch.index_add_ {name}",
                         f"torch.index_add_ {name} deterministic"]
                if r.spent():  # recorded as not run, without building the float64 references
                    for impl in impls:
                        r.row(impl, None, None, **info)
                    continue
                src = torch.randn(n, width, device="cuda", generator=g).to(dtype)
                wide = src.double()
                ref = torch.zeros(rows_out, width, device="cuda", dtype=torch.float64).index_add_(0, index, wide)
                bound = torch.zeros(rows_out, width, device="cuda", dtype=torch.float64).index_add_(0, index, wide.abs())
                # Plus the deterministic mode's quantum (values kept to 61 - ceil(log2 n)
                # bits below the largest), once per addend.
                top = float(wide.abs().max())
                del wide
                quantum = 2.0 ** (math.ceil(math.log2(top)) + math.ceil(math.log2(n)) - 60) if top > 0 else 0.0
                u = UNIT_ROUNDOFF[dtype]
                # In place, a slice of rows at a time: at width 1024 one float64
                # output is 14 GB, and whole-tensor temporaries would not fit.
                for rows in row_slices(rows_out, width):
                    bound[rows].mul_((addends[rows].clamp(min=1) - 1)[:, None] * u)
                    bound[rows].add_(ref[rows].abs(), alpha=2 * u).add_(addends[rows, None] * quantum)
                out = torch.zeros(rows_out, width, device="cuda", dtype=dtype)

                def within(o):
                    return all(bool(((o[rows].double() - ref[rows]).abs() <= bound[rows]).all())
                               for rows in row_slices(rows_out, width))

                # Zeroed before each checked call only (see Runner.row): the
                # timed calls are the row scatter alone, adding into out.
                info["reset"] = out.zero_
                r.row(impls[0], lambda: tally.index_add(out, index, src, check_indices=False), within, **info)
                r.row(impls[1], lambda: tally.index_add(out, index, src, deterministic=True, check_indices=False),
                      within, **info)
                # The scale a caller who knows |src| <= top would give: every
                # |v|·2^s <= 2^(61 - ceil(log2 n)), inside the contract, and no
                # pass over src to derive it. (Its quantum is at most the
                # derived one's, so the bound above covers it.)
                given = 61 - math.ceil(math.log2(n)) - (math.ceil(math.log2(top)) if top > 0 else 0)
                r.row(impls[2], lambda: tally.index_add(out, index, src, deterministic=True, fixed_point_bits=given,
                                                        check_indices=False), within, fixed_point_bits=given, **info)
                r.row(impls[3], lambda: out.index_add_(0, index, src), within, **info)
                r.row(impls[4], lambda: out.index_add_(0, index, src), within, deterministic_torch=True, calls=1,
                      **info)
                del src, ref, bound, out
                torch.cuda.empty_cache()


def row_slices(rows_out, width):
    """Slices of the output rows of about 2^26 elements each (512 MiB in float64)."""
    step = max(1, 2**26 // width)
    return [slice(start, min(start + step, rows_out)) for start in range(0, rows_out, step)]


def zipf_keys(n, bins, s, g):
    """n keys in [0, bins) with P(rank k) ∝ k^-s (Zipf), the ranks scattered over the bins."""
    ranks = torch.arange(1, bins + 1, device="cuda", dtype=torch.float64)
    p = ranks.pow(-s)
    draws = torch.multinomial(p / p.sum(), n, replacement=True, generator=g) if bins <= 2**24 else None
    if draws is None:  # multinomial takes at most 2^24 categories: inverse CDF instead
        cdf = torch.cumsum(p / p.sum(), 0)
        draws = torch.searchsorted(cdf, torch.rand(n, device="cuda", dtype=torch.float64, generator=g)).clamp(max=bins - 1)
    return torch.randperm(bins, device="cuda", generator=g)[draws]


def zipf_rows(r, n, bins_list, s=1.1):
    """Counts of Zipf keys (bincount) beside the same count of uniform keys, for
    the skew bar (Zipf ≤ 3x uniform at 10^6 and 10^7 bins); exact counts."""
    g = torch.Generator(device="cuda").manual_seed(4)
    for bins in bins_list:
        for kind, keys in (("zipf", zipf_keys(n, bins, s, g)), ("uniform", torch.randint(0, bins, (n,), device="cuda", generator=g))):
            ref = np.bincount(keys.cpu().numpy(), minlength=bins)
            info = dict(n=n, bins=bins, keys=kind, zipf_s=s if kind == "zipf" else None)
            r.row(f"tally.bincount {kind}", lambda: tally.bincount(keys, minlength=bins), lambda o: equal(o, ref), **info)
            r.row(f"torch.bincount {kind}", lambda: torch.bincount(keys, minlength=bins), lambda o: equal(o, ref), **info)
            if cupy is not None:
                ckeys = cupy.from_dlpack(keys)
                r.row(f"cupy.bincount {kind}", lambda: cupy.bincount(ckeys, minlength=bins), lambda o: equal(o, ref),
                      **info)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-python.json")
    p.add_argument("--quick", action="store_true", help="fewer sizes and trials")
    p.add_argument("--only", choices=["overhead", "scatter", "histogram", "zipf", "index_add"], action="append",
                   help="run only these groups of rows (repeatable; default: all)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no row after this many seconds; the rest are recorded as not run")
    p.add_argument("--widths", type=int, nargs="+", default=None, help="index_add row widths (default 1 16 128 1024)")
    p.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16", "float64"], default=None,
                   help="index_add dtypes (default all three)")
    p.add_argument("--hots", type=float, nargs="+", default=None,
                   help="index_add fractions of rows to row 0 (default 0.5 0.1 0)")
    args = p.parse_args()
    wanted = set(args.only or ["overhead", "scatter", "histogram", "zipf", "index_add"])
    if not (torch.cuda.is_available() and tally.gpu_available()):
        sys.exit("bench_torch.py needs a CUDA GPU: " + tally.gpu_status()[1])
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cupy": None if cupy is None else cupy.__version__, "tally": tally.__version__}

    def write(rows):
        # Written whole after every row, through a temporary file: a run cut
        # by a time limit leaves a complete JSON of the rows it finished.
        with open(args.out + ".part", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
        os.replace(args.out + ".part", args.out)

    r = Runner(trials=3 if args.quick else 7, budget_s=args.budget, on_row=write)
    if "overhead" in wanted:
        overhead_rows(r, 5000)
    bins = [1, 10, 1000, 10**6] if args.quick else [1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7]
    if "scatter" in wanted:
        scatter_rows(r, 10**7, bins)
    if "histogram" in wanted:
        histogram_rows(r, 10**7, bins)
    if "zipf" in wanted:
        zipf_rows(r, 10**7, [10**3, 10**6] if args.quick else [10**3, 10**4, 10**5, 10**6, 10**7])
    if "index_add" in wanted:
        widths = args.widths or ([128] if args.quick else [1, 16, 128, 1024])
        dtypes = [getattr(torch, d) for d in args.dtypes] if args.dtypes else (
            [torch.float32] if args.quick else [torch.float32, torch.bfloat16, torch.float64])
        hots = args.hots or ([0.5] if args.quick else [0.5, 0.1, 0.0])
        index_add_rows(r, 7_770_000, 1_720_000, widths, dtypes, hots)
    write(r.rows)
    # A PyTorch row under use_deterministic_algorithms may be refused: that is
    # a result. Every other row -- tally's deterministic ones included -- must
    # have passed its checks.
    refused = [row for row in r.rows if row["name"].startswith("torch.") and "deterministic" in row["name"]
               and row.get("us") is None]
    not_run = [row for row in r.rows if "not_run" in row]
    bad = [row for row in r.rows if not row.get("checked") and row not in refused and row not in not_run]
    print(f"{len(r.rows)} rows, {len(refused)} refused by PyTorch's deterministic mode, {len(not_run)} not run "
          f"(time budget), {len(bad)} failed", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
