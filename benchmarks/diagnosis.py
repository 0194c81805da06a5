"""The Diagnosis: how long its rules and the step model's replays take on each job, once loaded.

    python benchmarks/diagnosis.py [--traces ../shared/traces] [--repeat 2]

For each job the traces load once (not timed); then, best of ``--repeat`` with the job's derived
frames emptied before each run (cold, as the app's first page): the whole diagnosis (every rule
and one replay per modelled finding), its rules alone (the step model's calls answered by no
graph), and the step line's summary. The first finding and its saving are printed beside them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from htatui.analysis import diagnosis  # noqa: E402
from htatui.analysis.diagnosis import DiagnosisOptions, saving  # noqa: E402
from htatui.analysis.registry import BY_ID, frame_of, make_table  # noqa: E402
from htatui.jobs.load import load_traces  # noqa: E402
from htatui.trace import TraceSet  # noqa: E402

JOBS = ["h100_resnet_eager", "h100_gpt_compile", "h100_ddp_gloo_2rank", "h100_resnet_memory_profile"]


def best(repeat: int, traces: TraceSet, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        traces.derived.clear()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
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
