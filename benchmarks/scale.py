"""Many ranks: ingest a job of N ranks made from one real trace, then report over the dataset.

    python benchmarks/scale.py                      # 8 ranks: about a minute on 2 busy cores
    python benchmarks/scale.py --ranks 256 --engines local
    python benchmarks/scale.py --ranks 1024 --engines local,ray --workers 16   # a node's worth
    python benchmarks/scale.py --ranks 64 --app    # and the app on every page (slow)

Each rank is the same trace (default: ns_resolution_trace, 13 MB of JSON, 69 k events; the job of
issue 26's table) with its own `distributedInfo.rank` (plain JSON, so the ingest measures parsing,
not gunzip). Every figure comes from a fresh child process: wall time and peak RSS (of the child
and of its own children: the process pool; Ray's workers are children of its raylet and are
counted only as far as the OS reports them). Prints:

* cold `ingest` time and peak RSS per engine (`ray` only when it can be imported: else the
  reason it is skipped);
* for each view (`--views`, default temporal, kernels, idle, stragglers, rank-steps,
  collectives) the whole `report --view X --format json` command over the N-rank dataset
  (imports included, output thrown away) and over a 1-rank dataset: seconds, peak RSS, and
  the ratio (issue 26: ≤ 2 GB every view, stragglers ≤ 3 s at 256 ranks);
* with `--app`, the app on the N-rank dataset, headless at 80x24: seconds to the first screen,
  ranks read by then, and peak RSS after the first screen, after Kernels and after every view.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "ns_resolution_trace"
VIEWS = "temporal,kernels,idle,stragglers,rank-steps,collectives"
RANK_MARK = 987654321

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

CHILD_REPORT = """
import contextlib, json, os, resource, sys, time
start = time.perf_counter()
from htatui.cli.main import main
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
    code = main(["report", sys.argv[1], "--view", sys.argv[2], "--format", "json"])
elapsed = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "code": code}))
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


CHECKOUT = ROOT
"""Whose htatui the children run (`--checkout`: another worktree, for a before/after on one job)."""


def child(code: str, *args: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT))
    # cwd too: `python -c` puts the working folder first on sys.path.
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=CHECKOUT, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "child failed")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def make_job(trace: Path, ranks: int, folder: Path) -> int:
    """`ranks` copies of the trace, each claiming its own rank; returns the bytes of one copy."""
    raw = trace.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    folder.mkdir(parents=True, exist_ok=True)
    # Serialised once with a mark where the rank goes (json.dumps of a 13 MB trace 1,024 times
    # would take longer than the ingest).
    doc["distributedInfo"] = dict(doc.get("distributedInfo") or {}, rank=RANK_MARK, world_size=ranks)
    data = json.dumps(doc).encode()
    mark = f'"rank": {RANK_MARK}'.encode()
    assert data.count(mark) == 1
    size = 0
    for rank in range(ranks):
        copy = data.replace(mark, f'"rank": {rank}'.encode())
        (folder / f"rank-{rank}.json").write_bytes(copy)
        size = len(copy)
    return size


def ray_missing() -> str | None:
    """Why `--engine ray` cannot run here, or None."""
    if importlib.util.find_spec("ray") is None:
        return f"ray is not importable by {sys.executable} (pip install 'htatui[cluster]')"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, default=None, help="one trace file (default: ns_resolution_trace)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--engines", default="local,ray")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--views", default=VIEWS, help=f"report views to time (default {VIEWS})")
    parser.add_argument("--repeat", type=int, default=1, help="runs per view; the best is printed")
    parser.add_argument("--app", action="store_true", help="also the app on every page (slow)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="run this checkout's htatui (default: this one)")
    args = parser.parse_args()
    global CHECKOUT
    CHECKOUT = args.checkout.resolve()
    trace = args.trace or next(p for p in sorted(DEFAULT_TRACE.iterdir()) if p.name.endswith((".json", ".json.gz")))
    with tempfile.TemporaryDirectory(prefix="htatui-scale-") as tmp:
        work = Path(tmp)
        size = make_job(trace, args.ranks, work / "job")
        make_job(trace, 1, work / "one")
        total_mb = size * args.ranks / 1e6
        print(
            f"job: {args.ranks} ranks × {size / 1e6:.1f} MB = {total_mb:.0f} MB of JSON ({trace.name}); "
            f"workers {args.workers}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
            f"htatui of {CHECKOUT}"
        )
        for engine in args.engines.split(","):
            reason = ray_missing() if engine == "ray" else None
            if reason is not None:
                print(f"ingest --engine ray  : skipped: {reason}")
                continue
            try:
                run = child(CHILD_INGEST, str(work / "job"), str(work / f"ds-{engine}"), engine, str(args.workers))
            except RuntimeError as exc:
                print(f"ingest --engine {engine}: failed: {exc}")
                continue
            stored_mb = sum(f.stat().st_size for f in (work / f"ds-{engine}").rglob("*") if f.is_file()) / 1e6
            tables_mb = sum(f.stat().st_size for f in (work / f"ds-{engine}").rglob("tables/**/*.arrow")) / 1e6
            print(
                f"ingest --engine {engine:5}: {run['seconds']:7.1f} s  {total_mb / run['seconds']:6.1f} MB/s  "
                f"peak RSS {run['rss_mb']:6.0f} MB  ({run['ranks']:.0f} ranks; dataset {stored_mb:.0f} MB on disk, "
                f"cross-rank tables {tables_mb:.1f} MB); load average now {os.getloadavg()[0]:.1f}"
            )
        child(CHILD_INGEST, str(work / "one"), str(work / "ds-one"), "local", "1")
        written = [e for e in args.engines.split(",") if (work / f"ds-{e}").exists()]
        if not written:
            return 1
        dataset = work / f"ds-{written[0]}"
        for view in args.views.split(","):
            many = min((child(CHILD_REPORT, str(dataset), view) for _ in range(args.repeat)), key=seconds)
            one = min((child(CHILD_REPORT, str(work / "ds-one"), view) for _ in range(args.repeat)), key=seconds)
            print(
                f"report --view {view:11}: {args.ranks} ranks {many['seconds']:6.2f} s {many['rss_mb']:6.0f} MB;  "
                f"1 rank {one['seconds']:5.2f} s {one['rss_mb']:4.0f} MB;  {many['seconds'] / one['seconds']:5.1f}× "
                f"the time (exit {many['code']:.0f}); load average now {os.getloadavg()[0]:.1f}"
            )
        if args.app:
            app = child(CHILD_APP, str(dataset))
            print(
                f"app at 80x24 on {args.ranks} ranks: first screen {app['first_s']:.2f} s with "
                f"{app['read_first']:.0f} rank(s) read, peak RSS {app['first_mb']:.0f} MB; after Kernels "
                f"({app['read_kernels']:.0f} ranks read) {app['kernels_mb']:.0f} MB; after every view "
                f"{app['all_mb']:.0f} MB (target ≤ 2048 MB)"
            )
    return 0


def seconds(figures: dict[str, float]) -> float:
    return figures["seconds"]


if __name__ == "__main__":
    raise SystemExit(main())
