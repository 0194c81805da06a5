"""View speed: every htatui analysis view against HTA 0.6.1's equivalent call, in one process.

    python benchmarks/views.py [--traces ../shared/traces] [--folders a b …] [--repeat 3]
                               [--big 1000000] [--big-hta] [--hta-compat]

Each folder is loaded once by HTA (``TraceAnalysis(trace_dir=…)``) and once by htatui
(``load_traces(use_cache=False)``); loading is not timed. HTA's call is made ``--repeat`` times and
the best wall-clock time (time.perf_counter) is kept. htatui's view is timed twice over: *cold*,
its first call with the job's derived frames emptied (``TraceSet.derived``: the prepared events,
idle's gaps, launch's pairs, the op tree, … — so each view pays for its own ``prepare()``), and
*warm*, the best of ``--repeat`` further calls, which reuse what the first one kept (what the TUI
sees when a screen is shown again or a second table of the same view is asked for). Ratio = HTA s
÷ htatui s; the targets are judged on the cold figure. One HTA call can stand for several
views (``get_gpu_kernel_breakdown`` returns both the kernel-type and the per-kernel tables, and
its per-kernel table is what HTA plots as the spread across ranks); it is timed once per folder
and compared with each of those views.
``idle`` on our side is ``compute`` + ``interval_stats``, since HTA's call with
show_idle_interval_stats=True returns both. Views without an HTA counterpart (steps, ops) get
htatui times only.

``--big N`` writes a one-rank trace of N events with ``python -m fixtures.generate --scale N``
into a temporary folder and times our views on it (target: each under 0.5 s). HTA on it only
with ``--big-hta``: HTA needs minutes to load a million events.

Targets (from the issue): every view ≥ 10× faster than HTA, and < 0.5 s on a 1M-event rank.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from htatui.analysis.core.scope import Scope  # noqa: E402
from htatui.analysis.views import annotations as user_annotations  # noqa: E402
from htatui.analysis.views import idle, kernels, launch, membw, ops, overlap, patterns, queue, steps, temporal  # noqa: E402
from htatui.jobs.load import load_traces  # noqa: E402

DEFAULT_FOLDERS = [
    "nccl_parser_config",
    "negative_queue_length_values_check",
    "ns_resolution_trace",
    "df_index_resolver",
    "trace_filter",
]
SPEEDUP_TARGET = 10.0
BIG_TARGET_S = 0.5


@dataclass(frozen=True)
class Bench:
    """One view: how to call it on htatui's TraceSet, and which HTA call it is compared with."""

    view: str
    ours: Callable[[Any, bool], Any]
    hta_key: str | None
    """Name of the HTA call (a key of hta_calls); None = no HTA counterpart."""


def _idle(traces: Any, compat: bool) -> Any:
    options = idle.IdleOptions(scope=Scope(hta_compat=compat))
    return idle.compute(traces, options), idle.interval_stats(traces, options)


BENCHES: list[Bench] = [
    Bench(
        "temporal", lambda t, c: temporal.compute(t, temporal.TemporalOptions(scope=Scope(hta_compat=c))), "temporal"
    ),
    Bench("idle", _idle, "idle"),
    Bench(
        "kernel-types",
        lambda t, c: kernels.compute_types(t, kernels.KernelTypesOptions(scope=Scope(hta_compat=c))),
        "kernel",
    ),
    Bench("kernels", lambda t, c: kernels.compute(t, kernels.KernelsOptions(scope=Scope(hta_compat=c))), "kernel"),
    Bench(
        "kernel-spread",
        lambda t, c: kernels.spread(t, kernels.KernelSpreadOptions(scope=Scope(hta_compat=c))),
        "kernel",
    ),
    Bench("overlap", lambda t, c: overlap.compute(t, overlap.OverlapOptions(scope=Scope(hta_compat=c))), "overlap"),
    Bench("launch", lambda t, c: launch.compute(t, launch.LaunchOptions(scope=Scope(hta_compat=c))), "launch"),
    Bench("queue", lambda t, c: queue.compute(t, queue.QueueOptions(scope=Scope(hta_compat=c))), "queue"),
    Bench("membw", lambda t, c: membw.compute(t, membw.MemoryBandwidthOptions(scope=Scope(hta_compat=c))), "membw"),
    Bench(
        "annotations",
        lambda t, c: user_annotations.compute(t, user_annotations.AnnotationOptions(scope=Scope(hta_compat=c))),
        "annot",
    ),
    Bench(
        "patterns", lambda t, c: patterns.compute(t, patterns.PatternsOptions(scope=Scope(hta_compat=c))), "patterns"
    ),
    Bench(
        "stragglers", lambda t, c: steps.stragglers(t, steps.StragglerOptions(scope=Scope(hta_compat=c))), "stragglers"
    ),
    Bench("steps", lambda t, c: steps.compute(t, steps.StepsOptions(scope=Scope(hta_compat=c))), None),
    Bench("ops", lambda t, c: ops.compute(t, ops.OpsOptions(scope=Scope(hta_compat=c))), None),
]

HTA_LABELS = {
    "temporal": "get_temporal_breakdown",
    "idle": "get_idle_time_breakdown",
    "kernel": "get_gpu_kernel_breakdown",
    "overlap": "get_comm_comp_overlap",
    "launch": "get_cuda_kernel_launch_stats",
    "queue": "get_queue_length_summary",
    "membw": "get_memory_bw_summary",
    "annot": "get_gpu_user_annotation_breakdown",
    "patterns": "get_frequent_cuda_kernel_sequences",
    "stragglers": "get_potential_stragglers",
}


def hta_calls(analyzer: Any, out_dir: str) -> dict[str, Callable[[], Any] | None]:
    """HTA's call for each key; None where HTA has no call for this folder (stragglers, 1 rank)."""
    ranks = sorted(analyzer.t.get_ranks())
    return {
        "temporal": lambda: analyzer.get_temporal_breakdown(visualize=False),
        "idle": lambda: analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True),
        "kernel": lambda: analyzer.get_gpu_kernel_breakdown(visualize=False),
        "overlap": lambda: analyzer.get_comm_comp_overlap(visualize=False),
        "launch": lambda: analyzer.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False),
        "queue": lambda: analyzer.get_queue_length_summary(ranks),
        "membw": lambda: analyzer.get_memory_bw_summary(ranks),
        "annot": lambda: analyzer.get_gpu_user_annotation_breakdown(visualize=False),
        "patterns": lambda: analyzer.get_frequent_cuda_kernel_sequences(
            operator_name="aten::linear",
            output_dir=out_dir,
            min_pattern_len=3,
            rank=ranks[0],
            top_k=5,
            visualize=False,
        ),
        "stragglers": (lambda: analyzer.get_potential_stragglers(visualize=False)) if len(ranks) > 1 else None,
    }


@contextlib.contextmanager
def quiet() -> Any:
    """HTA logs, warns and sometimes prints; keep it off the table."""
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        yield


def cold_and_warm(fn: Callable[[], Any], traces: Any, repeat: int) -> tuple[float, float]:
    """Seconds of the first call with the job's derived frames emptied, and the best of `repeat` more."""
    traces.derived.clear()
    start = time.perf_counter()
    fn()
    cold = time.perf_counter() - start
    return cold, best_of(fn, repeat)[0]


def best_of(fn: Callable[[], Any], repeat: int, silence: bool = False) -> tuple[float, Any]:
    """Best wall-clock seconds of `repeat` calls, and the last result; raises what fn raises."""
    times: list[float] = []
    result = None
    for _ in range(repeat):
        if silence:
            with quiet():
                start = time.perf_counter()
                result = fn()
                elapsed = time.perf_counter() - start
        else:
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
        times.append(elapsed)
    return min(times), result


def is_empty(result: Any) -> bool:
    """HTA's answer carries nothing (None, an empty dict/frame, or a tuple of such)."""
    if result is None:
        return True
    if isinstance(result, tuple):
        return all(is_empty(part) for part in result)
    if isinstance(result, (dict, list)):
        return len(result) == 0
    return bool(getattr(result, "empty", False))


def fmt(seconds: float) -> str:
    return f"{seconds:.4f}" if seconds >= 0.001 else f"{seconds:.6f}"


def load_hta(folder: Path) -> Any:
    from hta.trace_analysis import TraceAnalysis

    with quiet():
        return TraceAnalysis(trace_dir=str(folder))


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text[:70]


def events_of(traces: Any) -> int:
    return sum(r.events.height for r in traces.ranks.values())


def bench_folder(
    name: str, folder: Path, args: argparse.Namespace, rows: list[str], misses: list[str], notes: list[str]
) -> None:
    start = time.perf_counter()
    try:
        analyzer = load_hta(folder)
        hta_error = None
    except Exception as exc:  # noqa: BLE001 - HTA failing to load is a result, not a crash
        analyzer, hta_error = None, _error(exc)
    hta_load = time.perf_counter() - start
    start = time.perf_counter()
    traces = load_traces([folder], use_cache=False)
    our_load = time.perf_counter() - start
    n_ranks = len(traces.ranks)
    notes.append(
        f"{name}: {n_ranks} rank(s), {events_of(traces):,} events; load (untimed in the table):"
        f" HTA {hta_load:.2f} s, htatui {our_load:.3f} s" + (f"; HTA load fails: {hta_error}" if hta_error else "")
    )
    with tempfile.TemporaryDirectory() as out_dir:
        calls = hta_calls(analyzer, out_dir) if analyzer is not None else {}
        hta_times: dict[str, float | str] = {}
        hta_empty: set[str] = set()
        for bench in BENCHES:
            hta_cell = "—"
            hta_s: float | None = None
            if bench.hta_key is not None:
                if analyzer is None:
                    hta_cell = "HTA fails"
                elif calls.get(bench.hta_key) is None:
                    hta_cell = "n/a"  # no HTA call for this folder (e.g. stragglers on one rank)
                else:
                    if bench.hta_key not in hta_times:
                        try:
                            seconds, result = best_of(calls[bench.hta_key], args.repeat, silence=True)  # type: ignore[arg-type]
                            hta_times[bench.hta_key] = seconds
                            if is_empty(result):
                                hta_empty.add(bench.hta_key)
                                notes.append(f"{name} / {HTA_LABELS[bench.hta_key]}: HTA returns nothing (None/empty)")
                        except Exception as exc:  # noqa: BLE001
                            hta_times[bench.hta_key] = _error(exc)
                            notes.append(f"{name} / {HTA_LABELS[bench.hta_key]}: HTA fails: {_error(exc)}")
                    got = hta_times[bench.hta_key]
                    if isinstance(got, str):
                        hta_cell = "HTA fails"
                    else:
                        hta_s = got
                        hta_cell = fmt(got)
            try:
                ours, warm = cold_and_warm(lambda b=bench: b.ours(traces, args.hta_compat), traces, args.repeat)  # type: ignore[misc]
                ours_cell, warm_cell = fmt(ours), fmt(warm)
            except Exception as exc:  # noqa: BLE001
                ours = warm = None
                ours_cell = warm_cell = "fails"
                misses.append(f"{name} / {bench.view}: htatui raises {_error(exc)}")
            warm_ratio_cell = "—"
            if hta_s is not None and ours is not None and warm is not None:
                ratio = hta_s / ours
                empty = bench.hta_key in hta_empty
                ratio_cell = f"{ratio:.1f}×" + ("*" if empty else "")
                warm_ratio_cell = _ratio(hta_s, warm) + ("*" if empty else "")
                if ratio < SPEEDUP_TARGET:
                    misses.append(
                        f"{name} / {bench.view}: {ratio:.1f}× cold, {warm_ratio_cell} warm"
                        f" (target ≥ {SPEEDUP_TARGET:.0f}×)" + (" — HTA returned nothing" if empty else "")
                    )
            else:
                ratio_cell = "—"
            row = (
                f"{name:36} {bench.view:14} {hta_cell:>10} {ours_cell:>10} {ratio_cell:>9}"
                f" {warm_cell:>10} {warm_ratio_cell:>9}"
            )
            rows.append(row)
            print(row, flush=True)


def _ratio(hta_s: float, ours_s: float) -> str:
    """HTA ÷ htatui; a warm call can be under the clock's resolution."""
    return f"{hta_s / ours_s:.1f}×" if ours_s > 0 else "∞"


def generate_big(n_events: int, out: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fixtures.generate", "--scale", str(n_events), "--ranks", "1", "--out", str(out)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"fixtures.generate failed:\n{done.stderr}")
    return time.perf_counter() - start


def bench_big(n_events: int, args: argparse.Namespace, misses: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="htatui-big-") as tmp:
        folder = Path(tmp) / "big"
        gen_s = generate_big(n_events, folder)
        start = time.perf_counter()
        traces = load_traces([folder], use_cache=False)
        load_s = time.perf_counter() - start
        print()
        print(
            f"big rank: fixtures.generate --scale {n_events} --ranks 1 → {events_of(traces):,} events"
            f" (generated in {gen_s:.1f} s, htatui load {load_s:.2f} s)"
        )
        analyzer = None
        calls: dict[str, Callable[[], Any] | None] = {}
        if args.big_hta:
            start = time.perf_counter()
            try:
                analyzer = load_hta(folder)
                print(f"HTA load {time.perf_counter() - start:.1f} s; HTA calls timed once each (not best of N)")
            except Exception as exc:  # noqa: BLE001
                print(f"HTA load fails: {_error(exc)}")
        header = f"{'view':14} {'cold s':>9} {'< 0.5 s?':>9} {'warm s':>9}"
        if analyzer is not None:
            header += f" {'HTA s':>9} {'cold ×':>8} {'warm ×':>8}"
        print(header)
        print("-" * len(header))
        with tempfile.TemporaryDirectory() as out_dir:
            if analyzer is not None:
                calls = hta_calls(analyzer, out_dir)
            hta_times: dict[str, float | str] = {}
            hta_empty: set[str] = set()
            for bench in BENCHES:
                warm: float | None = None
                try:
                    ours: float | None
                    ours, warm = cold_and_warm(lambda b=bench: b.ours(traces, args.hta_compat), traces, args.repeat)  # type: ignore[misc]
                except Exception as exc:  # noqa: BLE001
                    ours = None
                    misses.append(f"big / {bench.view}: htatui raises {_error(exc)}")
                ok = ours is not None and ours < BIG_TARGET_S
                if ours is not None and not ok:
                    misses.append(f"big / {bench.view}: {ours:.3f} s cold (target < {BIG_TARGET_S} s)")
                ours_cell = fmt(ours) if ours is not None else "fails"
                warm_cell = fmt(warm) if warm is not None else "fails"
                line = f"{bench.view:14} {ours_cell:>9} {'yes' if ok else 'NO':>9} {warm_cell:>9}"
                if analyzer is not None:
                    call = calls.get(bench.hta_key) if bench.hta_key else None
                    if call is None or bench.hta_key is None:
                        line += f" {'—':>9} {'—':>8} {'—':>8}"
                    else:
                        if bench.hta_key not in hta_times:
                            try:
                                seconds, result = best_of(call, 1, silence=True)
                                hta_times[bench.hta_key] = seconds
                                if is_empty(result):
                                    hta_empty.add(bench.hta_key)
                            except Exception as exc:  # noqa: BLE001
                                hta_times[bench.hta_key] = _error(exc)
                                print(f"  {HTA_LABELS[bench.hta_key]}: HTA fails: {_error(exc)}")
                        got = hta_times[bench.hta_key]
                        if isinstance(got, str):
                            line += f" {'HTA fails':>9} {'—':>8} {'—':>8}"
                        elif ours is None or warm is None:
                            line += f" {fmt(got):>9} {'—':>8} {'—':>8}"
                        else:
                            star = "*" if bench.hta_key in hta_empty else ""
                            line += f" {fmt(got):>9} {_ratio(got, ours) + star:>8} {_ratio(got, warm) + star:>8}"
                            if got / ours < SPEEDUP_TARGET:
                                misses.append(
                                    f"big / {bench.view}: {got / ours:.1f}× cold, {_ratio(got, warm)} warm"
                                    f" (target ≥ {SPEEDUP_TARGET:.0f}×)" + (" — HTA returned nothing" if star else "")
                                )
                print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces")
    parser.add_argument("--folders", nargs="+", default=DEFAULT_FOLDERS, help="folders under --traces")
    parser.add_argument("--repeat", type=int, default=3, help="best of N calls per figure")
    parser.add_argument("--big", type=int, default=0, metavar="N", help="also time our views on an N-event rank")
    parser.add_argument("--big-hta", action="store_true", help="also time HTA on the --big rank (slow)")
    parser.add_argument("--hta-compat", action="store_true", help="run our views in HTA-compatible mode")
    args = parser.parse_args()

    logging.disable(logging.CRITICAL)
    os.environ.setdefault("TQDM_DISABLE", "1")
    print(f"repeat: best of {args.repeat}; htatui mode: {'hta-compat' if args.hta_compat else 'corrected'}")
    header = f"{'folder':36} {'view':14} {'HTA s':>10} {'cold s':>10} {'cold ×':>9} {'warm s':>10} {'warm ×':>9}"
    print(header)
    print("-" * len(header))
    rows: list[str] = []
    misses: list[str] = []
    notes: list[str] = []
    for name in args.folders:
        folder = args.traces / name
        if not folder.is_dir():
            misses.append(f"{name}: folder not found under {args.traces}")
            continue
        bench_folder(name, folder, args, rows, misses, notes)
    print()
    print("HTA calls: " + "; ".join(f"{view}={HTA_LABELS[key]}" for view, key in _pairs()))
    print(
        "—: no HTA counterpart; n/a: HTA's call needs ≥ 2 ranks; × = HTA s ÷ htatui s (cold: first call,"
        " derived frames emptied; warm: best of the next --repeat calls);"
        " *: HTA returned nothing (None/empty), so it did next to no work"
    )
    for note in notes:
        print(f"  {note}")
    if args.big:
        bench_big(args.big, args, misses)
    print()
    print(
        f"targets (judged cold): every view ≥ {SPEEDUP_TARGET:.0f}× faster than HTA; < {BIG_TARGET_S} s on the big rank"
    )
    print("all targets met" if not misses else "missed:\n  " + "\n  ".join(misses))
    return 0


def _pairs() -> list[tuple[str, str]]:
    return [(b.view, b.hta_key) for b in BENCHES if b.hta_key is not None]


if __name__ == "__main__":
    raise SystemExit(main())
