"""Many ranks: ingest a job of N ranks made from one real trace, then browse it.

    python benchmarks/scale.py [--trace FILE] [--ranks 64] [--engines local,ray] [--workers 2]

Each rank is the same trace with its own `distributedInfo.rank` (plain JSON, so the ingest
measures parsing, not gunzip). Every figure comes from a fresh child process: wall time of the
call and peak RSS (of the child and of its own children: the process pool; Ray's workers are
children of its raylet and are counted only as far as the OS reports them). Prints:

* cold `ingest` time and peak RSS per engine;
* `report --view temporal` over the dataset of N ranks vs a dataset of 1 rank (load + compute,
  what the command does after its imports), and the ratio (target ≤ 4×).
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
from htatui.store.ingest import ingest
start = time.perf_counter()
report = ingest([Path(sys.argv[1])], Path(sys.argv[2]), engine=sys.argv[3], max_workers=int(sys.argv[4]), force=True)
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "ranks": report.ranks}))
"""

CHILD_TEMPORAL = """
import json, resource, sys, time
from pathlib import Path
from htatui.analysis import temporal
from htatui.trace import load_traces
start = time.perf_counter()
traces = load_traces([Path(sys.argv[1])])
table = temporal.compute(traces, temporal.TemporalOptions())
elapsed = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "rows": table.height}))
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
        many = min((child(CHILD_TEMPORAL, str(dataset)) for _ in range(2)), key=lambda r: r["seconds"])
        one = min((child(CHILD_TEMPORAL, str(work / "ds-one")) for _ in range(2)), key=lambda r: r["seconds"])
        print(
            f"report --view temporal: {args.ranks} ranks {many['seconds']:.2f} s ({many['rss_mb']:.0f} MB), "
            f"1 rank {one['seconds']:.2f} s ({one['rss_mb']:.0f} MB): {many['seconds'] / one['seconds']:.1f}× "
            f"(target ≤ 4×); load average now {os.getloadavg()[0]:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
