"""Many ranks: ingest a job of N ranks made from one real trace, then report over the dataset.

    python benchmarks/scale.py                      # 8 ranks: about a minute on 2 busy cores
    python benchmarks/scale.py --ranks 256 --engines local
    python benchmarks/scale.py --ranks 1024 --engines local,ray --views all --app --workdir /tmp/s1024
    python benchmarks/scale.py --ranks 1024 --engines none --views ops --workdir /tmp/s1024   # kept job
    python benchmarks/scale.py --ranks 1024 --engines ray --ray-address auto   # a running cluster

Each rank is the same trace (default: ns_resolution_trace, 13 MB of JSON, 69 k events; the job of
issue 26's table) with its own `distributedInfo.rank` (plain JSON, so the ingest measures parsing,
not gunzip). Every figure comes from a fresh child process: wall time and peak RSS (of the child
and of its own children: the process pool; Ray's workers are children of its raylet and are
counted only as far as the OS reports them). A child is stopped past `--timeout` seconds or
`--max-rss-gb` resident (the machine is shared), and the line says so. Prints:

* cold `ingest` time and peak RSS per engine (`ray` only when it can be imported: else the
  reason it is skipped), with the engine's start (a local Ray's, or connecting to a cluster)
  apart from the work;
* for each view (`--views`: a list, or `all` for the registry's; default temporal, kernels,
  idle, stragglers, rank-steps, collectives) the whole `report --view X --format json` command
  over the N-rank dataset (imports included, output thrown away) and over a 1-rank dataset:
  seconds, peak RSS, and the ratio (issue 26: ≤ 2 GB every view, stragglers ≤ 3 s);
* with `--app`, the app on the N-rank dataset, headless at 80x24: each page (in key order, then
  a rank's timeline) in an app of its own, the first screen then that page: seconds to settle,
  resident and peak MB after it, the ranks read by then; with `--app-together`, every page one
  after the other in one app (what a session that visits them all holds).

With `--folder`, the trace folder itself too (no dataset; issue 40's 256-rank row): `info` parses
the job, and one rank alone, each into a parse cache of its own (`HTATUI_CACHE_DIR`, workers
`--workers`), then each view's first `report` after it, each run from a fresh copy of that
cache (what the first report finds: the entries `info` wrote, no table kept yet).

`--workdir DIR` keeps the job (`DIR/job`, reused when it holds N ranks), the datasets
(`DIR/ds-ENGINE`) and the folder's caches (`DIR/cache-job`, `DIR/cache-one`) instead of a temp
folder; `--engines none` then times the views on them again.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "ns_resolution_trace"
VIEWS = "temporal,kernels,idle,stragglers,rank-steps,collectives"
RANK_MARK = 987654321

CHILD_INGEST = """
import json, resource, sys, time
from pathlib import Path
from htatui.jobs.ingest import ingest
start = time.perf_counter()
report = ingest(
    [Path(sys.argv[1])], Path(sys.argv[2]), engine=sys.argv[3], max_workers=int(sys.argv[4]), force=True,
    ray_address=sys.argv[5] or None,
)
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "ranks": report.ranks, "start_s": report.engine_start_s}))
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

CHILD_INFO = """
import contextlib, json, os, resource, sys, time
start = time.perf_counter()
from htatui.cli.main import main
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    code = main(["info", sys.argv[1], "--jobs", sys.argv[2]])
elapsed = time.perf_counter() - start
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": elapsed, "rss_mb": rss / 1024, "code": code}))
"""

CHILD_APP = """
import json, sys, time
from pathlib import Path
from htatui.tui.app import HtaTuiApp, Settings
from htatui.tui.run import settle, wait_until_loaded

def status_mb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0

pages = []
app = HtaTuiApp(Settings(paths=(Path(sys.argv[1]),)))

def record(page, started):
    read = sum(r.loaded for r in app.traces.ranks.values()) if app.traces is not None else 0
    pages.append([page, time.perf_counter() - started, status_mb("VmRSS"), status_mb("VmHWM"), read])
    print(json.dumps(pages[-1]), file=sys.stderr, flush=True)

async def drive(pilot):
    # argv[2]: "list" (the pages' names), "all" (every page in key order, then the timeline), or one page.
    started = time.perf_counter()
    if not await wait_until_loaded(pilot, timeout=1800):
        app.exit()
        return
    await settle(pilot)
    record("first screen", started)
    order = [mode for mode, _ in app.view_order()]
    if sys.argv[2] == "list":
        pages.extend(order + ["timeline"])
        app.exit()
        return
    for mode in order + ["timeline"] if sys.argv[2] == "all" else [sys.argv[2]]:
        started = time.perf_counter()
        if mode == "timeline":
            app.open_timeline()
        else:
            await app.action_view(mode)
        await settle(pilot)
        record(mode, started)
    app.exit()

app.run(headless=True, size=(80, 24), auto_pilot=drive)
print(json.dumps({"pages": pages[1:] if sys.argv[2] == "list" else pages}))
"""


CHECKOUT = ROOT
"""Whose htatui the children run (`--checkout`: another worktree, for a before/after on one job)."""


class ChildFailed(RuntimeError):
    """A child that failed or was stopped; `stderr` is what it had written there."""

    def __init__(self, reason: str, stderr: str) -> None:
        super().__init__(reason)
        self.stderr = stderr


MAX_RSS_MB = 8192.0
"""A child whose resident memory passes this is stopped (`--max-rss-gb`): the machine is shared."""


def child(code: str, *args: str, timeout: float | None = None, cache: Path | None = None) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; its last stdout line is its JSON figures.

    `cache`: the parse cache it uses (HTATUI_CACHE_DIR). Raises RuntimeError with the child's last
    error line, or when it ran past `timeout` seconds or its resident memory passed MAX_RSS_MB
    (checked twice a second; it is then stopped).
    """
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT))
    if cache is not None:
        env["HTATUI_CACHE_DIR"] = str(cache)
    # cwd too: `python -c` puts the working folder first on sys.path.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        # The child dies with this script: a child left behind would outlive its memory cap.
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=out,
            stderr=err,
            text=True,
            env=env,
            cwd=CHECKOUT,
            preexec_fn=die_with_parent,
        )
        started = time.monotonic()
        stopped = None
        while proc.poll() is None:
            if timeout is not None and time.monotonic() - started > timeout:
                stopped = f"stopped after {timeout:.0f} s"
            elif resident_mb(proc.pid) > MAX_RSS_MB:
                stopped = f"stopped at {MAX_RSS_MB:.0f} MB resident after {time.monotonic() - started:.0f} s"
            if stopped is not None:
                proc.kill()
                proc.wait()
                err.seek(0)
                raise ChildFailed(stopped, err.read())
            time.sleep(0.5)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise ChildFailed(
            stderr.strip().splitlines()[-1] if stderr.strip() else f"child failed ({proc.returncode})", stderr
        )
    return json.loads(stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def die_with_parent() -> None:
    """In the child before exec: the kernel kills it when this script ends (Linux's PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass


def resident_mb(pid: int) -> float:
    """The process's resident memory now (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


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
    parser.add_argument("--engines", default="local,ray", help="engines to ingest with; 'none': the kept datasets")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--ray-address", default="", help="a running Ray cluster for --engine ray (default: local)")
    parser.add_argument("--views", default=VIEWS, help=f"report views to time, or 'all' (default {VIEWS})")
    parser.add_argument("--repeat", type=int, default=1, help="runs per view; the best is printed")
    parser.add_argument("--folder", action="store_true", help="also the trace folder: report after info, no dataset")
    parser.add_argument("--app", action="store_true", help="also the app: each page in an app of its own (slow)")
    parser.add_argument("--app-together", action="store_true", help="also the app: every page in one app (slow)")
    parser.add_argument("--pages", default="", help="with --app: only these pages (default: every page)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a command may take before it is stopped")
    parser.add_argument("--max-rss-gb", type=float, default=8.0, help="resident GB at which a command is stopped")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the job and its datasets here (and reuse them) instead of a temp folder",
    )
    parser.add_argument("--checkout", type=Path, default=ROOT, help="run this checkout's htatui (default: this one)")
    args = parser.parse_args()
    global CHECKOUT, MAX_RSS_MB
    CHECKOUT = args.checkout.resolve()
    MAX_RSS_MB = args.max_rss_gb * 1024
    if args.views == "all":
        from htatui.analysis.registry import VIEWS as REGISTERED

        args.views = ",".join(view.id for view in REGISTERED)
    trace = args.trace or next(p for p in sorted(DEFAULT_TRACE.iterdir()) if p.name.endswith((".json", ".json.gz")))
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return run(args, trace, args.workdir)
    with tempfile.TemporaryDirectory(prefix="htatui-scale-") as tmp:
        return run(args, trace, Path(tmp))


def kept_job(folder: Path, ranks: int) -> int | None:
    """The bytes of one copy when `folder` already holds a job of `ranks` copies (`--workdir`), else None."""
    files = sorted(folder.glob("rank-*.json")) if folder.is_dir() else []
    return files[0].stat().st_size if len(files) == ranks else None


def run(args: argparse.Namespace, trace: Path, work: Path) -> int:
    size = kept_job(work / "job", args.ranks) or make_job(trace, args.ranks, work / "job")
    if kept_job(work / "one", 1) is None:
        make_job(trace, 1, work / "one")
    total_mb = size * args.ranks / 1e6
    say(
        f"job: {args.ranks} ranks × {size / 1e6:.1f} MB = {total_mb:.0f} MB of JSON ({trace.name}); "
        f"workers {args.workers}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
        f"htatui of {CHECKOUT}"
    )
    engines = [e for e in args.engines.split(",") if e and e != "none"]
    for engine in engines:
        reason = ray_missing() if engine == "ray" else None
        if reason is not None:
            say(f"ingest --engine ray  : skipped: {reason}")
            continue
        ingest_args = [str(work / "job"), str(work / f"ds-{engine}"), engine, str(args.workers), args.ray_address]
        try:
            done = child(CHILD_INGEST, *ingest_args, timeout=args.timeout)
        except RuntimeError as exc:
            say(f"ingest --engine {engine}: failed: {exc}; load average now {os.getloadavg()[0]:.1f}")
            continue
        stored_mb = sum(f.stat().st_size for f in (work / f"ds-{engine}").rglob("*") if f.is_file()) / 1e6
        tables_mb = sum(f.stat().st_size for f in (work / f"ds-{engine}").rglob("tables/**/*.arrow")) / 1e6
        work_s = done["seconds"] - done["start_s"]
        say(
            f"ingest --engine {engine:5}: {done['seconds']:7.1f} s  {total_mb / done['seconds']:6.1f} MB/s  "
            f"peak RSS {done['rss_mb']:6.0f} MB  ({done['ranks']:.0f} ranks; dataset {stored_mb:.0f} MB on disk, "
            f"cross-rank tables {tables_mb:.1f} MB); {engine} start {done['start_s']:.1f} s, work {work_s:.1f} s "
            f"({total_mb / work_s:.1f} MB/s); load average now {os.getloadavg()[0]:.1f}"
        )
    if args.folder:
        folder_views(args, work)
    if not engines and not any((work / f"ds-{e}").exists() for e in ("local", "ray")):
        return 0  # the folder alone (`--engines none --folder` on a new workdir)
    if not (work / "ds-one").exists():
        child(CHILD_INGEST, str(work / "one"), str(work / "ds-one"), "local", "1", "")
    written = [e for e in ("local", "ray") if (work / f"ds-{e}" / "htatui-dataset.json").exists()]
    if not written:
        return 1
    dataset = work / f"ds-{written[0]}"
    say(f"views over {dataset}")
    for view in [v for v in args.views.split(",") if v]:
        try:
            many = min(
                (child(CHILD_REPORT, str(dataset), view, timeout=args.timeout) for _ in range(args.repeat)), key=seconds
            )
            one = min(
                (child(CHILD_REPORT, str(work / "ds-one"), view, timeout=args.timeout) for _ in range(args.repeat)),
                key=seconds,
            )
        except RuntimeError as exc:
            say(f"report --view {view:14}: failed: {exc}; load average now {os.getloadavg()[0]:.1f}")
            continue
        say(
            f"report --view {view:14}: {args.ranks} ranks {many['seconds']:7.2f} s {many['rss_mb']:6.0f} MB;  "
            f"1 rank {one['seconds']:5.2f} s {one['rss_mb']:4.0f} MB;  {many['seconds'] / one['seconds']:5.1f}× "
            f"the time (exit {many['code']:.0f}); load average now {os.getloadavg()[0]:.1f}"
        )
    if args.app:
        pages = [p for p in args.pages.split(",") if p] or child(CHILD_APP, str(dataset), "list", timeout=args.timeout)[
            "pages"
        ]
        say(f"app at 80x24 on {args.ranks} ranks, each page in an app of its own (the first screen, then the page):")
        say(f"{'page':<16}{'first s':>8}{'page s':>8}{'RSS MB':>8}{'peak MB':>9}{'ranks read':>11}")
        for page in pages:
            try:
                first, shown = child(CHILD_APP, str(dataset), page, timeout=args.timeout)["pages"]
            except ChildFailed as exc:
                say(f"{page:<16}  failed: {exc}; load average now {os.getloadavg()[0]:.1f}")
                continue
            say(f"{page:<16}{first[1]:>8.2f}{shown[1]:>8.2f}{shown[2]:>8.0f}{shown[3]:>9.0f}{shown[4]:>11.0f}")
        say(f"load average now {os.getloadavg()[0]:.1f}")
    if args.app_together:
        failed = None
        try:
            pages = child(CHILD_APP, str(dataset), "all", timeout=args.timeout)["pages"]
        except ChildFailed as exc:
            # The pages it finished (each written to stderr as it settled), then why it stopped.
            pages = [json.loads(line) for line in exc.stderr.splitlines() if line.startswith('["')]
            failed = str(exc)
        say(f"app at 80x24 on {args.ranks} ranks, every page in one app in key order, then a rank's timeline:")
        say(f"{'page':<16}{'s':>8}{'RSS MB':>8}{'peak MB':>9}{'ranks read':>11}")
        for page, page_s, rss, peak, read in pages:
            say(f"{page:<16}{page_s:>8.2f}{rss:>8.0f}{peak:>9.0f}{read:>11.0f}")
        if failed is not None:
            say(f"the next page: {failed}")
        say(f"load average now {os.getloadavg()[0]:.1f}")
    return 0


def folder_views(args: argparse.Namespace, work: Path) -> None:
    """Each view's first `report` on the trace folder after `info` parsed it, N ranks and one."""
    for name in ("job", "one"):
        made = work / f"cache-{name}" / ".info-done"
        if made.exists():
            continue
        shutil.rmtree(made.parent, ignore_errors=True)
        done = child(CHILD_INFO, str(work / name), str(args.workers), timeout=args.timeout, cache=made.parent)
        made.write_text(json.dumps(done))
        say(
            f"info {name:3} (parses into its cache): {done['seconds']:7.1f} s  peak RSS {done['rss_mb']:6.0f} MB; "
            f"load average now {os.getloadavg()[0]:.1f}"
        )
    say(f"views over the trace folder {work / 'job'}, each the first report after info")
    for view in [v for v in args.views.split(",") if v]:
        try:
            many = min((first_report(args, work, "job", view) for _ in range(args.repeat)), key=seconds)
            one = min((first_report(args, work, "one", view) for _ in range(args.repeat)), key=seconds)
        except RuntimeError as exc:
            say(f"folder report --view {view:14}: failed: {exc}; load average now {os.getloadavg()[0]:.1f}")
            continue
        say(
            f"folder report --view {view:14}: {args.ranks} ranks {many['seconds']:7.2f} s {many['rss_mb']:6.0f} MB;  "
            f"1 rank {one['seconds']:5.2f} s {one['rss_mb']:4.0f} MB;  {many['seconds'] / one['seconds']:5.1f}× "
            f"the time (exit {many['code']:.0f}); load average now {os.getloadavg()[0]:.1f}"
        )


def first_report(args: argparse.Namespace, work: Path, name: str, view: str) -> dict[str, Any]:
    """`report --view` on `work/name` from a fresh copy of the cache `info` left (nothing kept since)."""
    fresh = work / "cache-run"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(work / f"cache-{name}", fresh, symlinks=True)
    try:
        return child(CHILD_REPORT, str(work / name), view, timeout=args.timeout, cache=fresh)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def say(line: str) -> None:
    print(line, flush=True)


def seconds(figures: dict[str, float]) -> float:
    return figures["seconds"]


if __name__ == "__main__":
    raise SystemExit(main())
