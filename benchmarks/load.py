"""Load speed and memory: htatui vs HTA 0.6.1, side by side, each measurement in a fresh child.

    python benchmarks/load.py [--traces ../shared/traces] [--hta-python PATH] [--min-mb 5] [--repeat 3]

HTA needs `pip install traceinsight==0.6.1 'pandas<3'` (it imports as `hta`) in the interpreter
given by --hta-python (default: this one). Every figure comes from a child process of this
script: wall time of the load call only (imports excluded), peak RSS of that child (and of its
own children, for multi-process loads). Prints one table and the ratios against the targets:
cold ≥ 10× faster, peak RSS ≤ 50 %, cached ≥ 100× faster. Also prints the decode floor: gunzip
plus the fastest plain JSON decode (orjson or msgspec) of the same bytes, nothing else.
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

CHILD_HTATUI = """
import json, resource, sys, time
from pathlib import Path
from htatui.trace import load_traces
folder, use_cache = Path(sys.argv[1]), sys.argv[2] == "1"
start = time.perf_counter()
traces = load_traces([folder], use_cache=use_cache)
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
events = sum(r.events.height for r in traces.ranks.values())
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "events": events}))
"""

CHILD_HTA = """
import json, logging, resource, sys, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
start = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[1])
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024}))
"""

CHILD_FLOOR = """
import gc, gzip, json, sys, time
from pathlib import Path
import msgspec, orjson
gc.disable()
files = [p for p in sorted(Path(sys.argv[1]).iterdir()) if p.name.endswith((".json", ".json.gz"))]
def timed(fn):
    start = time.perf_counter(); fn(); return time.perf_counter() - start
unzip = 0.0; orj = 0.0; msg = 0.0
for path in files:
    data = path.read_bytes()
    raw = None
    def unpack():
        global raw
        raw = gzip.decompress(data) if data[:2] == b"\\x1f\\x8b" else data
    unzip += timed(unpack)
    orj += timed(lambda: orjson.loads(raw))
    msg += timed(lambda: msgspec.json.decode(raw))
print(json.dumps({"gunzip": unzip, "orjson": orj, "msgspec": msg}))
"""


def child(python: str, code: str, *args: str, env: dict[str, str] | None = None) -> dict[str, float]:
    result = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, env=env, check=False, timeout=900
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "child failed")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def uncompressed_mb(folder: Path) -> float:
    total = 0
    for path in folder.iterdir():
        if path.name.endswith(".json.gz"):
            with gzip.open(path) as handle:
                while chunk := handle.read(1 << 24):
                    total += len(chunk)
        elif path.name.endswith(".json"):
            total += path.stat().st_size
    return total / 1e6


def job_folders(root: Path) -> list[Path]:
    jobs = []
    for folder in sorted(p for p in root.rglob("*") if p.is_dir()):
        if any(f.name.endswith((".json", ".json.gz")) for f in folder.iterdir() if f.is_file()):
            jobs.append(folder)
    return jobs


def best(python: str, code: str, repeat: int, *args: str, env: dict[str, str] | None = None) -> dict[str, float]:
    runs = [child(python, code, *args, env=env) for _ in range(repeat)]
    return min(runs, key=lambda r: r["seconds"])


def ours_only(folders: list[Path], repeat: int, env: dict[str, str]) -> int:
    """Cold load speed (MB of JSON per second, one process) and peak RSS as a multiple of the JSON."""
    print(f"{'folder':38} {'MB':>7} {'cold s':>7} {'MB/s':>6} {'RSS MB':>7} {'RSS/JSON':>8}  load avg")
    for folder in folders:
        size = uncompressed_mb(folder)
        with tempfile.TemporaryDirectory() as cache:
            ours = best(sys.executable, CHILD_HTATUI, repeat, str(folder), "0", env=dict(env, HTATUI_CACHE_DIR=cache))
        print(
            f"{folder.name:38} {size:7.1f} {ours['seconds']:7.2f} {size / ours['seconds']:6.1f} {ours['rss_mb']:7.0f}"
            f" {ours['rss_mb'] / size:8.2f}  {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--hta-python", default=sys.executable)
    parser.add_argument("--min-mb", type=float, default=5.0, help="only folders bigger than this (uncompressed)")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per figure")
    parser.add_argument("--folder", type=Path, action="append", help="extra job folders (e.g. generated)")
    parser.add_argument("--only", action="append", help="only folders whose name contains this (repeatable)")
    parser.add_argument("--skip-hta", action="store_true", help="htatui only: MB/s and peak RSS vs the JSON size")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    folders = [f for f in job_folders(args.traces) if uncompressed_mb(f) > args.min_mb]
    if args.only:
        folders = [f for f in folders if any(word in str(f) for word in args.only)]
    folders += args.folder or []
    if args.skip_hta:
        return ours_only(folders, args.repeat, env)
    header = (
        f"{'folder':38} {'MB':>6} {'HTA s':>7} {'ours s':>7} {'×':>6} {'HTA MB':>7} {'ours MB':>7} {'RSS %':>6}"
        f" {'cached s':>8} {'×':>7} {'floor s':>7} {'orjson':>7} {'msgspec':>7}"
    )
    print(header)
    print("-" * len(header))
    misses: list[str] = []
    for folder in folders:
        size = uncompressed_mb(folder)
        with tempfile.TemporaryDirectory() as cache:
            run_env = dict(env, HTATUI_CACHE_DIR=cache)
            hta = best(args.hta_python, CHILD_HTA, args.repeat, str(folder), env=run_env)
            ours = best(sys.executable, CHILD_HTATUI, args.repeat, str(folder), "0", env=run_env)
            child(sys.executable, CHILD_HTATUI, str(folder), "1", env=run_env)  # fill the cache
            cached = best(sys.executable, CHILD_HTATUI, args.repeat, str(folder), "1", env=run_env)
        floor = child(sys.executable, CHILD_FLOOR, str(folder), env=env)
        floor_s = floor["gunzip"] + min(floor["orjson"], floor["msgspec"])
        cold_x = hta["seconds"] / ours["seconds"]
        rss_pct = 100 * ours["rss_mb"] / hta["rss_mb"]
        cached_x = hta["seconds"] / cached["seconds"]
        name = str(folder.relative_to(args.traces)) if folder.is_relative_to(args.traces) else folder.name
        print(
            f"{name:38} {size:6.1f} {hta['seconds']:7.2f} {ours['seconds']:7.3f} {cold_x:6.1f} {hta['rss_mb']:7.0f}"
            f" {ours['rss_mb']:7.0f} {rss_pct:6.0f} {cached['seconds']:8.4f} {cached_x:7.0f} {floor_s:7.3f}"
            f" {floor['orjson']:7.3f} {floor['msgspec']:7.3f}",
            flush=True,
        )
        if cold_x < 10:
            misses.append(f"{name}: cold load {cold_x:.1f}× (target 10×)")
        if rss_pct > 50:
            misses.append(f"{name}: peak RSS {rss_pct:.0f}% of HTA (target ≤ 50%)")
        if cached_x < 100:
            misses.append(f"{name}: cached load {cached_x:.0f}× (target 100×)")
    print()
    print("targets: cold ≥ 10×, peak RSS ≤ 50 %, cached ≥ 100× (HTA ÷ htatui); floor = gunzip + fastest decode")
    print("all targets met" if not misses else "missed:\n  " + "\n  ".join(misses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
