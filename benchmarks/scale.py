"""Many ranks: ingest a job of N ranks made from one real trace, then browse it.

    python benchmarks/scale.py [--trace FILE] [--ranks 64] [--engines local,ray] [--workers 2]

Each rank is the same trace with its own `distributedInfo.rank` (plain JSON, so the ingest
measures parsing, not gunzip). Every figure comes from a fresh child process: wall time of the
call and peak RSS (of the child and of its own children: the process pool; Ray's workers are
children of its raylet and are counted only as far as the OS reports them). Prints:

* cold `ingest` time and peak RSS per engine;
* `report --view temporal` over the dataset of N ranks vs a dataset of 1 rank (load + compute,
  what the command does after its imports), and the ratio (target ≤ 4×); the same for
  `--view kernels`, which has no stored answer and reads every rank;
* the app on the N-rank dataset, headless at 80x24: seconds to the first screen, ranks read by
  then, and peak RSS after the first screen, after the Kernels view (every rank read) and after
  every view (target ≤ 2 GB).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "h100_resnet_eager"

CHILD_INGEST = """
import json, resource, sys, time
from pathlib import Path
from htatui.jobs.ingest import ingest
start = time.perf_counter()
report = ingest([Path(sys.argv[1])], Path(sys.argv[2]), engine=sys.argv[3], max_workers=int(sys.argv[4]), force=True)
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "ranks": report.ranks}))
"""

CHILD_VIEW = """
import json, resource, sys, time
from pathlib import Path
from htatui.analysis.registry import BY_ID
from htatui.trace import load_traces
view = BY_ID[sys.argv[2]]
start = time.perf_counter()
traces = load_traces([Path(sys.argv[1])])
table = view.main.compute(traces, view.options())
elapsed = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "rows": table.height}))
"""

CHILD_APP = """
import json, sys, time
from pathlib import Path
from htatui.tui.app import HtaTuiApp, Settings
from htatui.tui.run import settle, wait_until_loaded

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0

figures = {}
app = HtaTuiApp(Settings(paths=(Path(sys.argv[1]),)))

async def drive(pilot):
    start = time.perf_counter()
    await wait_until_loaded(pilot)
    await settle(pilot)
    figures["first_s"] = time.perf_counter() - start
    figures["read_first"] = sum(r.loaded for r in app.traces.ranks.values())
    figures["first_mb"] = peak_mb()
    await app.action_view("kernels")
    await settle(pilot)
    figures["kernels_mb"] = peak_mb()
    figures["read_kernels"] = sum(r.loaded for r in app.traces.ranks.values())
    for mode, _ in app.view_order():
        await app.action_view(mode)
        await settle(pilot)
    figures["all_mb"] = peak_mb()
    app.exit()

app.run(headless=True, size=(80, 24), auto_pilot=drive)
print(json.dumps(figures))
"""


def child(code: str, *args: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "child failed")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def make_job(trace: Path, ranks: int, folder: Path) -> int:
    """`ranks` copies of the trace, each claiming its own rank; returns the bytes of one copy."""
    raw = trace.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    folder.mkdir(parents=True, exist_ok=True)
    size = 0
    for rank in range(ranks):
        doc["distributedInfo"] = dict(doc.get("distributedInfo") or {}, rank=rank, world_size=ranks)
        data = json.dumps(doc).encode()
        (folder / f"rank-{rank}.json").write_bytes(data)
        size = len(data)
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=None, help="one trace file (default: h100_resnet_eager)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--engines", default="local,ray")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    trace = args.trace or next(p for p in sorted(DEFAULT_TRACE.iterdir()) if p.name.endswith((".json", ".json.gz")))
    with tempfile.TemporaryDirectory(prefix="htatui-scale-") as tmp:
        work = Path(tmp)
        size = make_job(trace, args.ranks, work / "job")
        make_job(trace, 1, work / "one")
        total_mb = size * args.ranks / 1e6
        print(
            f"job: {args.ranks} ranks × {size / 1e6:.1f} MB = {total_mb:.0f} MB of JSON ({trace.name}); "
            f"workers {args.workers}; load average {os.getloadavg()[0]:.1f}"
        )
        for engine in args.engines.split(","):
            try:
                run = child(CHILD_INGEST, str(work / "job"), str(work / f"ds-{engine}"), engine, str(args.workers))
            except RuntimeError as exc:
                print(f"ingest --engine {engine}: failed: {exc}")
                continue
            stored_mb = sum(f.stat().st_size for f in (work / f"ds-{engine}").rglob("*") if f.is_file()) / 1e6
            print(
                f"ingest --engine {engine:5}: {run['seconds']:7.1f} s  {total_mb / run['seconds']:6.1f} MB/s  "
                f"peak RSS {run['rss_mb']:6.0f} MB  ({run['ranks']:.0f} ranks; dataset {stored_mb:.0f} MB on disk)"
            )
        child(CHILD_INGEST, str(work / "one"), str(work / "ds-one"), "local", "1")
        dataset = work / "ds-local" if (work / "ds-local").exists() else work / f"ds-{args.engines.split(',')[0]}"
        for view in ("temporal", "kernels"):
            many = min((child(CHILD_VIEW, str(dataset), view) for _ in range(2)), key=lambda r: r["seconds"])
            one = min((child(CHILD_VIEW, str(work / "ds-one"), view) for _ in range(2)), key=lambda r: r["seconds"])
            print(
                f"report --view {view:8}: {args.ranks} ranks {many['seconds']:.2f} s ({many['rss_mb']:.0f} MB), "
                f"1 rank {one['seconds']:.2f} s ({one['rss_mb']:.0f} MB): {many['seconds'] / one['seconds']:.1f}× "
                f"(target ≤ 4×); load average now {os.getloadavg()[0]:.1f}"
            )
        app = child(CHILD_APP, str(dataset))
        print(
            f"app at 80x24 on {args.ranks} ranks: first screen {app['first_s']:.2f} s with "
            f"{app['read_first']:.0f} rank(s) read, peak RSS {app['first_mb']:.0f} MB; after Kernels "
            f"({app['read_kernels']:.0f} ranks read) {app['kernels_mb']:.0f} MB; after every view "
            f"{app['all_mb']:.0f} MB (target ≤ 2048 MB)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
