"""Critical path: htatui's `critical-path` view against HTA 0.6.1's `critical_path_analysis`, side by side.

    python benchmarks/critical_path.py [--traces ../shared/traces] [--folders a b …] [--big 100000]

For each folder, both tools load the trace once (not timed); then HTA's
``critical_path_analysis(rank, annotation, instance_id)`` and htatui's path in compat mode (cold:
the job's derived frames emptied first) are timed, best of ``--repeat``, and their results
compared: the path's length and the time per bound type (µs). The window is the first
ProfilerStep when the trace has one, else the whole trace. The default mode is timed too.

``--big N`` writes a one-rank trace of N events (``python -m fixtures.generate --scale N``) and
times the same calls with no annotation: the window is every step but the last (HTA drops the last
step when it loads a trace), about N events (target: a window of 100k events in < 2 s).

The step model (default mode, issue 33): ``--step-rank DIR`` times one rank's step on a big
rank: the first step asked (the rank's frame read from the cache and its scope's mask made: what
a fresh `report --steps N` pays), another step, a 99-step window, and one what-if replay of it.
``--step-job DIR`` times the job's step (every rank's graph joined) and the job's what-ifs on a
many-rank folder (``python -m fixtures.generate --scale 8000 --ranks 256``). Targets: a step of a
rank in < 5 s, a 256-rank job's step in < 30 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from htatui.analysis.core.scope import Scope, Steps  # noqa: E402
from htatui.analysis.views import critical_path as cp  # noqa: E402
from htatui.jobs.load import load_traces  # noqa: E402

DEFAULT_FOLDERS = [
    "critical_path/alexnet",
    "critical_path/simple_add",
    "h100_resnet_eager",
    "h100_gpt_compile",
    "ns_resolution_trace",
    "negative_queue_length_values_check",
    "df_index_resolver",
]


def best(call: Callable[[], Any], repeat: int, before: Callable[[], None] = lambda: None) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        before()
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


def hta_call(folder: Path, annotation: str, repeat: int) -> tuple[float, dict[str, float] | None, float]:
    """HTA's seconds, its µs per bound type, and its path length (None, nan on failure)."""
    from hta.trace_analysis import TraceAnalysis

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analysis = TraceAnalysis(trace_dir=str(folder))
        rank = sorted(analysis.t.traces)[0]

        def call() -> Any:
            return analysis.critical_path_analysis(rank=rank, annotation=annotation, instance_id=0)

        seconds, found = best(call, repeat)
    if found is None or not found[1]:
        return seconds, None, float("nan")
    frame = found[0].get_critical_path_breakdown()
    by = frame.groupby("bound_by").duration.sum()
    return seconds, {k: float(v) for k, v in by.items() if k}, float(frame.duration.sum())


def ours(traces: Any, annotation: str, compat: bool, repeat: int) -> tuple[float, dict[str, float], float, str | None]:
    # No annotation: the scope's steps (compat: HTA's, which drops the last step at load).
    scope = Scope(hta_compat=compat)
    options = cp.CriticalPathOptions(scope=scope, annotation=annotation, instance=0)
    # Default mode: the step model's path (compat: HTA's).
    path = cp.rank_path if compat else cp.edges
    seconds, found = best(lambda: path(traces, options), repeat, traces.derived.clear)
    summary = dict(cp.summarise(found.frame).select("bound_by", "time_us").iter_rows())
    return seconds, summary, float(found.frame["duration_us"].sum()), found.message


def step_model_rank(folder: Path) -> None:
    """One rank's step-model path: a first step (cold), another (warm), steps 2-100, one what-if."""
    from htatui.analysis.views.critical_path import tables
    from htatui.analysis.views.critical_path.step_model import Change, savings_of

    traces = load_traces([folder])
    rank = traces.rank_ids[0]

    def options(steps: str) -> cp.CriticalPathOptions:
        return cp.CriticalPathOptions(scope=Scope(steps=Steps.parse(steps)))

    for label, steps in (("first step (cold)", "300"), ("another step", "301"), ("steps 2-100", "2-100")):
        start, cpu = time.perf_counter(), time.process_time()
        found = tables.rank_path(traces, options(steps))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"rank {rank} {label:20} {seconds:7.2f} s ({cpu:6.2f} s CPU)  {found.frame.height:>8,} path edges")
    built = tables.rank_built(traces, options("2-100"))
    assert built.graph is not None
    start = time.perf_counter()
    savings_of(built.graph, traces, options("2-100"), [Change("bound_by", "gpu_compute_bound")])
    nodes = built.graph.node_count
    print(f"rank {rank} one what-if replay     {time.perf_counter() - start:7.2f} s  {nodes:>8,} nodes")


def step_model_job(folder: Path, step: str) -> None:
    """The job's step-model path and what-ifs for one step over every rank of `folder`."""
    from htatui.analysis.views.critical_path import tables

    load_start = time.perf_counter()
    traces = load_traces([folder])
    print(f"job load ({len(traces.ranks)} ranks) {time.perf_counter() - load_start:7.2f} s")
    options = cp.CriticalPathOptions(scope=Scope(steps=Steps.parse(step)))
    for label, table in (("job path", tables.job_path), ("job what-ifs", tables.job_what_if)):
        start, cpu = time.perf_counter(), time.process_time()
        found = table(traces, options)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{label:28} {seconds:7.2f} s ({cpu:6.2f} s CPU)  {found.frame.height:>8,} rows  {found.message}")
    built = tables.job_graph(traces, options)
    if built.graph is not None:
        print(f"job graph: {built.graph.node_count:,} nodes, {len(built.graph.src):,} edges")


def events_of(traces: Any) -> int:
    return sum(rank.events.height for rank in traces.ranks.values())


def window_of(traces: Any) -> str:
    names = next(iter(traces.ranks.values())).events["name"].cast(str)
    return "ProfilerStep" if names.str.contains("ProfilerStep#", literal=True).any() else ""


def compare(label: str, folder: Path, repeat: int, with_hta: bool, whole: bool = False) -> None:
    traces = load_traces([folder], use_cache=False, max_workers=1)
    annotation = "" if whole else window_of(traces)
    compat_s, compat_sum, compat_len, message = ours(traces, annotation, True, repeat)
    default_s, _default_sum, default_len, _ = ours(traces, annotation, False, repeat)
    line = f"{label:38} {events_of(traces):>9,} {annotation or 'whole':>12}"
    if with_hta:
        hta_s, hta_sum, hta_len = hta_call(folder, annotation, repeat)
        same = hta_sum is not None and hta_sum == compat_sum and hta_len == compat_len
        line += f" {hta_s:8.3f} {compat_s:8.3f} {hta_s / compat_s:6.1f} {default_s:8.3f}"
        line += f" {hta_len:>12,.0f} {compat_len:>12,.0f} {default_len:>12,.0f} {'yes' if same else 'NO'}"
    else:
        line += (
            f" {'-':>8} {compat_s:8.3f} {'-':>6} {default_s:8.3f} {'-':>12} {compat_len:>12,.0f} {default_len:>12,.0f}"
        )
    print(line + (f"  ({message})" if message else ""), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--folders", nargs="*", default=DEFAULT_FOLDERS)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--big", type=int, default=0, help="also a generated one-rank trace of N events")
    parser.add_argument("--no-hta", action="store_true", help="time htatui only")
    parser.add_argument("--step-rank", type=Path, help="a big one-rank folder: time the step model's steps")
    parser.add_argument("--step-job", type=Path, help="a many-rank folder: time the step model's job step")
    parser.add_argument("--job-step", default="3", help="--step-job: the step to follow")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if args.step_rank or args.step_job:
        if args.step_rank:
            step_model_rank(args.step_rank)
        if args.step_job:
            step_model_job(args.step_job, args.job_step)
        return
    print(
        f"{'folder':38} {'events':>9} {'window':>12} {'HTA s':>8} {'compat s':>8} {'×':>6} {'ours s':>8}"
        f" {'HTA path µs':>12} {'compat µs':>12} {'default µs':>12} same"
    )
    for name in args.folders:
        compare(name, args.traces / name, args.repeat, not args.no_hta)
    if args.big:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "big"
            command = [sys.executable, "-m", "fixtures.generate", "--scale", str(args.big), "--ranks", "1"]
            subprocess.run([*command, "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
            compare(f"generated --scale {args.big}", out, args.repeat, not args.no_hta, whole=True)


if __name__ == "__main__":
    main()
