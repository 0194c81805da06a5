"""The Diagnosis: how long its rules and the step model's replays take on each job, once loaded.

    python benchmarks/diagnosis.py [--traces ../shared/traces] [--repeat 2]
    python benchmarks/diagnosis.py --big /tmp/big556 [--repeat 1]   # one job, each rule's seconds

For each job the traces load once (not timed); then, best of ``--repeat`` with the job's derived
frames emptied before each run (cold, as the app's first page): the whole diagnosis (every rule
and one replay per modelled finding), its rules alone (the step model's calls answered by no
graph), and the step line's summary. The first finding and its saving are printed beside them.

With `--big PATH` (a job already parsed into the cache: run `htatui info PATH` first), that job
alone: the load from the cache, then each rule's seconds in the order they run, the replays of
the findings' what-ifs and the step line, with the files' re-reads emptied too (as the app's first
screen finds them). A table the rules share is made by the first rule that reads it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from htatui.analysis import diagnosis  # noqa: E402
from htatui.analysis.diagnosis import DiagnosisOptions, saving  # noqa: E402
from htatui.analysis.diagnosis import rules as diagnosis_rules  # noqa: E402
from htatui.analysis.registry import BY_ID, frame_of, make_table  # noqa: E402
from htatui.jobs.load import load_traces  # noqa: E402
from htatui.trace import TraceSet  # noqa: E402
from htatui.trace.reread import REREAD  # noqa: E402

JOBS = ["h100_resnet_eager", "h100_gpt_compile", "h100_ddp_gloo_2rank", "h100_resnet_memory_profile"]


def best(repeat: int, traces: TraceSet, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        traces.derived.clear()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def timed(spent: dict[str, tuple[float, float]], name: str, run: Callable[..., object]) -> Callable[..., object]:
    """`run`, adding its wall and CPU seconds to `spent[name]`."""

    def wrapper(*args: object) -> object:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return run(*args)
        finally:
            before = spent.get(name, (0.0, 0.0))
            spent[name] = (before[0] + time.perf_counter() - wall, before[1] + time.process_time() - cpu)

    return wrapper


def per_rule(path: Path, repeat: int) -> int:
    """One job: each rule's seconds and the replays', best total of `repeat` (wall and CPU: on a
    shared machine the CPU seconds say more)."""
    traces = load_traces([path], use_cache=True, max_workers=1)
    view = BY_ID["diagnosis"]
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        traces.derived.clear()
        REREAD.clear()
        spent: dict[str, tuple[float, float]] = {}
        rules = {rule: timed(spent, rule, find) for rule, find in diagnosis_rules.RULES.items()}
        with (
            mock.patch.dict(diagnosis_rules.RULES, rules),
            mock.patch.object(diagnosis, "predicted_savings", timed(spent, "what-ifs", saving.predicted_savings)),
            mock.patch.object(diagnosis, "step_bounds", timed(spent, "step line", saving.step_bounds)),
        ):
            timed(spent, "diagnosis", lambda: make_table(view.main, traces, DiagnosisOptions()))()
        if not best or spent["diagnosis"][0] < best["diagnosis"][0]:
            best = spent
    whole = best.pop("diagnosis")
    parts = (sum(wall for wall, _ in best.values()), sum(cpu for _, cpu in best.values()))
    rows = [*best.items(), ("the rest", (whole[0] - parts[0], whole[1] - parts[1])), ("diagnosis", whole)]
    print(f"{path} (load average {os.getloadavg()[0]:.1f}; the first rule reads the cache)")
    print(f"  {'':20s} {'wall s':>7s} {'CPU s':>7s}")
    for name, (wall, cpu) in rows:
        print(f"  {name:20s} {wall:7.2f} {cpu:7.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--big", type=Path, help="one job (parsed into the cache already): each rule's seconds")
    args = parser.parse_args()
    if args.big is not None:
        return per_rule(args.big, args.repeat)
    view = BY_ID["diagnosis"]
    jobs = [("fixtures/demo", ROOT / "fixtures" / "demo")] + [(name, args.traces / name) for name in JOBS]
    print(f"{'job':30s} {'all s':>7s} {'rules s':>8s} {'summary s':>10s}  first finding (saving)")
    for name, folder in jobs:
        if not folder.is_dir():
            continue
        traces = load_traces([folder], use_cache=True, max_workers=1)

        def diagnose(traces: TraceSet = traces) -> object:
            return make_table(view.main, traces, DiagnosisOptions())

        whole = best(args.repeat, traces, diagnose)
        with (
            mock.patch.object(diagnosis, "predicted_savings", lambda _t, _s, changes, _n: [None] * len(changes)),
            mock.patch.object(diagnosis, "step_bounds", lambda _t, _s: None),
        ):
            rules = best(args.repeat, traces, diagnose)
        summary = best(args.repeat, traces, lambda traces=traces: saving.step_bounds(traces, DiagnosisOptions().scope))
        found = frame_of(diagnose())[0]
        first = found.row(0, named=True) if found.height else None
        said = f"{first['rule']} ({first['saved_pct']:.2f} %)" if first and first["saved_pct"] is not None else "-"
        print(f"{name:30s} {whole:7.2f} {rules:8.2f} {summary:10.2f}  {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
