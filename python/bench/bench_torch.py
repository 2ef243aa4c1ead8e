"""tally against PyTorch and CuPy on the same buffers (run on a GPU machine).

Written on tally's benchmark library (tally._bench, the C++ bench/ that
`tally bench` uses): every row goes its one path -- checked against an
independent reference (NumPy on the host, or float64 on the device), timed
with CUDA events on torch's current stream around back-to-back calls of the
operation alone after a warm-up (median of trials; calls of over 0.1 s one a
trial, at most 3 trials), checked again -- and the JSON is the C++
benchmarks'. An output that the operation adds into is zeroed before each
checked call and never inside the timed ones. PyTorch rows are also run under
torch.use_deterministic_algorithms(True); where PyTorch refuses, the row is a
peer error carrying its message. Groups: the Python call overhead of the bar
(a 2^10-element tally.sum on a torch CUDA tensor against the C++
tally::reduce on the same buffer and stream), scatter-add and bincount,
histograms, Zipf-keyed counts beside uniform ones, and the row scatter of the
issue (index_add_, 7.77 M rows of 128 into 1.72 M, 50 % / 10 % / none to one
hot row, widths 1-1024 with the bytes of src kept, f32/bf16/f64). The JSON is
rewritten after every row: a run cut short keeps what it finished. Exit
status 1 when a row failed its checks or raised (PyTorch's refusals and rows
left out by --budget are not failures).

    python python/bench/bench_torch.py --out bench-python.json [--quick] [--budget SECONDS]
        [--only GROUP ...] [--widths 1 16 128 1024] [--dtypes float32 ...] [--hots 0.5 ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

import tally

try:
    from tally import _bench
except ImportError:  # pragma: no cover
    sys.exit("bench_torch.py needs tally._bench, the benchmark library, which the package builds where "
             "nlohmann_json is found (Debian's nlohmann-json3-dev)")

try:
    import cupy
except ImportError:  # pragma: no cover
    cupy = None


# A call slower than this is timed once a trial, in at most 3 trials, with no
# warm-up beyond its first checked call; slower than SINGLE_TRIAL_US, in one.
SLOW_CALL_US = 1e5
SINGLE_TRIAL_US = 2e6


class Runner:
    """Rows through a tally._bench.Session, with the run's time budget and
    PyTorch's deterministic mode around the rows that ask for it."""

    def __init__(self, session, trials, budget_s=None, on_row=None):
        """on_row(), if given, runs after each row is recorded (main() rewrites
        the JSON file there, so a run cut short keeps its rows)."""
        self.session = session
        self.trials = trials
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.on_row = on_row

    def spent(self):
        """Whether the run's time budget is spent (rows from now on are not run)."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def row(self, benchmark, impl, fn, check, params, reset=None, deterministic_torch=False, **timing):
        """One row: fn's result checked by check(result) -> (status, detail),
        fn timed, checked again (bench::measure); then on_row().

        The timed calls are fn alone, back to back (each with the store of its
        result that the check reads, a Python assignment). `reset` (e.g.
        zeroing the output that fn adds into) runs before each checked call
        only. One untimed call first says how long a call takes (calls of
        over SLOW_CALL_US are timed one a trial) and, under PyTorch's
        deterministic mode, whether PyTorch refuses: then the row is a peer
        error with PyTorch's message. Once the run's time budget is spent,
        rows are recorded as not run, and so is a slow row whose calls would
        end past it (after that one call). `timing` overrides the session's
        trial settings."""
        try:
            if deterministic_torch:
                torch.use_deterministic_algorithms(True)
            self._row(benchmark, impl, fn, check, json.dumps(params), reset, deterministic_torch, timing)
        finally:
            torch.use_deterministic_algorithms(False)
        if self.on_row is not None:
            self.on_row()

    def _row(self, benchmark, impl, fn, check, params_json, reset, deterministic_torch, timing):
        if self.spent():
            self.session.not_run(benchmark, impl, params_json, "the run's time budget (--budget) was spent")
            return
        try:
            if reset is not None:
                reset()
            torch.cuda.synchronize()
            started = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            first_us = 1e6 * (time.perf_counter() - started)
        except Exception as e:
            if deterministic_torch and isinstance(e, RuntimeError):
                self.session.peer_error(benchmark, impl, params_json, f"{type(e).__name__}: {str(e)[:200]}")
                return
            # Any other error is the row's failure: the library's path runs
            # the call again, records the exception and goes on.
            first_us = 0.0
        if first_us > SLOW_CALL_US:
            timing = {**timing, "trials": min(self.trials, 3) if first_us <= SINGLE_TRIAL_US else 1, "warmup": 0,
                      "trial_ms": 1e-3}
            # Its calls: a checked one, the timer's calibration, the trials, a
            # checked one. A row that would end past the budget stops here,
            # one call over it at most.
            calls = timing["trials"] + 3
            if self.deadline is not None and time.monotonic() + calls * first_us / 1e6 > self.deadline:
                self.session.not_run(benchmark, impl, params_json,
                                     f"one call took {first_us / 1e6:.1f} s: its {calls} timed and checked "
                                     "calls would end past the run's time budget (--budget)")
                return
        result = [None]

        def run():
            result[0] = fn()

        self.session.measure(benchmark, impl, params_json, run, lambda: check(result[0]), reset=reset, **timing)


def host(a):
    """A torch tensor, CuPy array or anything array-like as a NumPy array."""
    if isinstance(a, torch.Tensor):
        return a.cpu().numpy()
    if cupy is not None and isinstance(a, cupy.ndarray):
        return a.get()
    return np.asarray(a)


def compare(a, b, differs, agreement):
    """(status, detail): a against the reference b, elementwise; differs(a, b)
    marks the elements that disagree; `agreement` is the detail of a pass."""
    a = host(a)
    if a.shape != np.shape(b):
        return "fail", f"shape {a.shape}, expected {np.shape(b)}"
    bad = differs(a, b)
    if bad.any():
        k = int(np.argmax(bad))
        return "fail", f"{int(bad.sum())} elements differ, e.g. [{k}] = {a.flat[k]!r} against {b.flat[k]!r}"
    return "pass", agreement


def close(a, b, rtol=1e-9, atol=1e-9):
    """(status, detail): a within rtol/atol of the reference b, elementwise."""
    return compare(a, b, lambda x, y: ~np.isclose(x, y, rtol=rtol, atol=atol), f"within rtol {rtol:g}, atol {atol:g}")


def equal(a, b):
    """(status, detail): a equal to the reference b, elementwise."""
    return compare(a, b, lambda x, y: x != y, "exact")


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
        params = dict(n=n, bins=bins, dtype="float64")

        def row(benchmark, impl, fn, check, **kw):
            r.row(benchmark, impl, fn, check, params, **kw)

        def near(o):
            return close(o, ref, **tol)

        def counts(o):
            return equal(o, ref_counts)

        # The scatters add into out: zeroed before each checked call, not
        # within the timed ones (which then add into what the last left).
        row("scatter_add", "tally.scatter_add", lambda: tally.scatter_add(out, index, values, check_indices=False),
            near, reset=out.zero_)
        row("scatter_add", "tally.scatter_add deterministic",
            lambda: tally.scatter_add(out, index, values, deterministic=True, check_indices=False),
            near, reset=out.zero_)
        row("scatter_add", "torch.scatter_add_", lambda: out.scatter_add_(0, index, values), near, reset=out.zero_)
        row("scatter_add", "torch.scatter_add_ deterministic", lambda: out.scatter_add_(0, index, values),
            near, reset=out.zero_, deterministic_torch=True)
        row("bincount weighted", "tally.bincount", lambda: tally.bincount(index, weights=values, minlength=bins),
            near)
        row("bincount weighted", "tally.bincount deterministic",
            lambda: tally.bincount(index, weights=values, minlength=bins, deterministic=True), near)
        # Without the report of bad weights (which waits for the GPU a second
        # time), as the scatter_add rows run without the check of indices.
        row("bincount weighted", "tally.bincount deterministic, check_weights=False",
            lambda: tally.bincount(index, weights=values, minlength=bins, deterministic=True, check_weights=False),
            near)
        row("bincount weighted", "torch.bincount", lambda: torch.bincount(index, weights=values, minlength=bins),
            near)
        row("bincount weighted", "torch.bincount deterministic",
            lambda: torch.bincount(index, weights=values, minlength=bins), near, deterministic_torch=True)
        row("bincount", "tally.bincount", lambda: tally.bincount(index, minlength=bins), counts)
        row("bincount", "torch.bincount", lambda: torch.bincount(index, minlength=bins), counts)
        if cupy is not None:
            cindex = cupy.from_dlpack(index)
            cvalues = cupy.from_dlpack(values)
            row("bincount weighted", "cupy.bincount", lambda: cupy.bincount(cindex, weights=cvalues, minlength=bins),
                near)
            row("bincount", "cupy.bincount", lambda: cupy.bincount(cindex, minlength=bins), counts)


def histogram_rows(r, n, bins_list):
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.rand(n, device="cuda", dtype=torch.float64, generator=g)
    samples = x.cpu().numpy()
    for bins in bins_list:
        ref = np.histogram(samples, bins=bins, range=(0.0, 1.0))[0]
        params = dict(n=n, bins=bins, dtype="float64")
        r.row("histogram", "tally.histogram", lambda: tally.histogram(x, bins=bins, range=(0.0, 1.0),
                                                                      return_edges=False),
              lambda o: equal(o, ref), params)
        # histc: float counts, bins closed like NumPy's at the top.
        r.row("histogram", "torch.histc", lambda: torch.histc(x, bins=bins, min=0.0, max=1.0),
              lambda o: equal(o, ref.astype(np.float64)), params)
        r.row("histogram", "torch.histc deterministic", lambda: torch.histc(x, bins=bins, min=0.0, max=1.0),
              lambda o: equal(o, ref.astype(np.float64)), params, deterministic_torch=True)
        if cupy is not None:
            cx = cupy.from_dlpack(x)
            edges = cupy.linspace(0.0, 1.0, bins + 1)
            r.row("histogram", "cupy.histogram", lambda: cupy.histogram(cx, bins=edges)[0], lambda o: equal(o, ref),
                  params)


def overhead_rows(r, cpp_calls=1000):
    """The bar's Python call overhead: µs per call of a 2^10-element f32 sum on
    the same buffer and stream, for the C++ tally::reduce (cpp_calls calls
    queued by one Python call, so that Python's own call is not in its time),
    tally.sum into `out=` (the same work from Python), tally.sum with a new
    result (plus torch's allocation of it, timed alone beside it) and
    torch.sum. Each is timed by the library's CUDA events around back-to-back
    calls; the table divides each by the C++ row."""
    x = torch.rand(1024, device="cuda", dtype=torch.float32)
    out = torch.empty((), device="cuda", dtype=torch.float32)
    ref = float(x.double().sum())

    def sum_check(o):
        got = float(o)
        if abs(got - ref) <= 1e-5 * ref:
            return "pass", "within 1e-5 of the float64 sum"
        return "fail", f"{got!r} against {ref!r}"

    def allocated(t):
        ok = t.shape == () and t.is_cuda and t.dtype == torch.float32
        return ("pass", "a 0-d float32 CUDA tensor") if ok else ("fail", f"got {t!r}")

    def poison():
        out.fill_(-1.0)  # only the checked call writes it

    params = dict(n=1024, dtype="float32")
    settings = dict(trials=max(r.trials, 9))
    for checked, impl in ((False, "C++ tally::reduce"), (True, "C++ tally::reduce, checked mode")):
        r.row("call overhead", impl, lambda checked=checked: tally._sum_cpp_calls(x, out, cpp_calls, checked=checked),
              lambda _: sum_check(out), params, reset=poison, calls_per_run=cpp_calls, **settings)
    r.row("call overhead", "tally.sum, out=", lambda: tally.sum(x, out=out), lambda _: sum_check(out), params,
          reset=poison, **settings)
    r.row("call overhead", "tally.sum, new output", lambda: tally.sum(x), sum_check, params, **settings)
    r.row("call overhead", "torch.empty((), cuda) alone", lambda: torch.empty((), device="cuda"), allocated, params,
          **settings)
    r.row("call overhead", "torch.sum", lambda: torch.sum(x), sum_check, params, **settings)


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
                params = dict(n=n, width=width, rows_out=rows_out, hot=hot, dtype=name)
                impls = ["tally.index_add", "tally.index_add deterministic", "tally.index_add deterministic, given scale",
                         "torch.index_add_", "torch.index_add_ deterministic"]
                if r.spent():  # recorded as not run, without building the float64 references
                    for impl in impls:
                        r.row("index_add", impl, None, None, params)
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
                    outside = sum(int(((o[rows].double() - ref[rows]).abs() > bound[rows]).sum())
                                  for rows in row_slices(rows_out, width))
                    if outside:
                        return "fail", f"{outside} elements outside the summation bound"
                    return "pass", "within (m-1)·u·Σ|x| + 2u·|Σx| + m·quantum of the float64 sum"

                def row(impl, fn, **kw):
                    # Zeroed before each checked call only (see Runner.row): the
                    # timed calls are the row scatter alone, adding into out.
                    r.row("index_add", impl, fn, within, params, reset=out.zero_, **kw)

                row(impls[0], lambda: tally.index_add(out, index, src, check_indices=False))
                row(impls[1], lambda: tally.index_add(out, index, src, deterministic=True, check_indices=False))
                # The scale a caller who knows |src| <= top would give: every
                # |v|·2^s <= 2^(61 - ceil(log2 n)), inside the contract, and no
                # pass over src to derive it. (Its quantum is at most the
                # derived one's, so the bound above covers it.)
                given = 61 - math.ceil(math.log2(n)) - (math.ceil(math.log2(top)) if top > 0 else 0)
                row(impls[2], lambda: tally.index_add(out, index, src, deterministic=True, fixed_point_bits=given,
                                                      check_indices=False), note=f"fixed_point_bits={given}")
                row(impls[3], lambda: out.index_add_(0, index, src))
                row(impls[4], lambda: out.index_add_(0, index, src), deterministic_torch=True)
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
            params = dict(n=n, bins=bins, keys=kind, zipf_s=s if kind == "zipf" else None)
            r.row("bincount keys", "tally.bincount", lambda: tally.bincount(keys, minlength=bins),
                  lambda o: equal(o, ref), params)
            r.row("bincount keys", "torch.bincount", lambda: torch.bincount(keys, minlength=bins),
                  lambda o: equal(o, ref), params)
            if cupy is not None:
                ckeys = cupy.from_dlpack(keys)
                r.row("bincount keys", "cupy.bincount", lambda: cupy.bincount(ckeys, minlength=bins),
                      lambda o: equal(o, ref), params)


def run_groups(r, args, wanted):
    """The groups of rows main() was asked for, in order."""
    if "overhead" in wanted:
        overhead_rows(r)
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-python.json")
    p.add_argument("--quick", action="store_true", help="fewer sizes and trials")
    p.add_argument("--only", choices=["overhead", "scatter", "histogram", "zipf", "index_add"], action="append",
                   help="run only these groups of rows (repeatable; default: all)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="start no row after this many seconds, nor time a slow row whose calls would end past "
                        "them (its first call tells); such rows are recorded as not run")
    p.add_argument("--widths", type=int, nargs="+", default=None, help="index_add row widths (default 1 16 128 1024)")
    p.add_argument("--dtypes", nargs="+", choices=["float32", "bfloat16", "float64"], default=None,
                   help="index_add dtypes (default all three)")
    p.add_argument("--hots", type=float, nargs="+", default=None,
                   help="index_add fractions of rows to row 0 (default 0.5 0.1 0)")
    args = p.parse_args()
    wanted = set(args.only or ["overhead", "scatter", "histogram", "zipf", "index_add"])
    if not (torch.cuda.is_available() and tally.gpu_available()):
        sys.exit("bench_torch.py needs a CUDA GPU: " + tally.gpu_status()[1])
    trials = 3 if args.quick else 7
    session = _bench.Session(" ".join(["bench_torch.py"] + sys.argv[1:]), "gpu",
                             "each row against an independent reference (NumPy on the host, or float64 on the device: "
                             "exact counts, sums within their rounding bound), before and after timing",
                             stream=torch.cuda.current_stream().cuda_stream, trials=trials)
    session.add_metadata(json.dumps({"torch": torch.__version__, "cupy": None if cupy is None else cupy.__version__,
                                     "tally_python": tally.__version__}))
    if args.budget is not None:
        session.add_settings(json.dumps({"budget_s": args.budget}))
    session.add_header("tally against PyTorch and CuPy on the same buffers and stream; µs a call")

    def write():
        # Written whole after every row, through a temporary file: a run cut
        # by a time limit leaves a complete JSON of the rows it finished.
        error = session.write_json(args.out + ".part")
        if error:
            sys.exit(f"bench_torch.py: {error}")
        os.replace(args.out + ".part", args.out)

    r = Runner(session, trials, budget_s=args.budget, on_row=write)
    try:
        run_groups(r, args, wanted)
    finally:
        write()  # also when the CUDA context was lost (the library raises) or the run was interrupted
    print(session.table())
    # PyTorch refusing under use_deterministic_algorithms is a peer error (a
    # result); rows left out by --budget are not run. Every other row --
    # tally's deterministic ones included -- must have passed its checks.
    report = json.loads(session.to_json())
    not_run = sum(1 for row in report["rows"] if row["check_before"]["status"] == "not run")
    print(f"{len(report['rows'])} rows, {report['peer_errors']} refused by PyTorch's deterministic mode, {not_run} not "
          f"run (time budget), {report['mismatches']} mismatches, {report['failures']} failures", file=sys.stderr)
    sys.exit(session.exit_code)


if __name__ == "__main__":
    main()
