"""`htatui ingest PATH… -o DATASET [--engine local|ray]`: trace files → a job dataset (docs/scale.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from htatui.cli.errors import fail


def add_ingest_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "ingest",
        help="parse trace files once into a dataset folder that every command opens fast",
        description="Parse every rank file into a dataset (one Arrow file per rank + a per-rank summary). "
        "Every command accepts the dataset wherever it accepts a trace folder, with the same numbers.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="trace folder(s) or file(s)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DATASET", help="dataset folder to write")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help="local process pool or Ray tasks")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="parallel tasks (default: HTATUI_JOBS, else the cores this process may use)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="Ray cluster to run on ('auto': the one `ray start` made here; default: RAY_ADDRESS, else a local Ray)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing dataset")
    parser.set_defaults(run=run_ingest)


def run_ingest(args: argparse.Namespace) -> int:
    from htatui.jobs.ingest import ingest
    from htatui.store.dataset import DatasetError
    from htatui.trace import LoadError

    def progress(done: int, total: int, source: Path) -> None:
        if sys.stderr.isatty():
            print(f"\rhtatui: ingested {done}/{total} {source.name[:60]:60}", end="", file=sys.stderr, flush=True)

    try:
        report = ingest(
            args.paths,
            args.output,
            engine=args.engine,
            force=args.force,
            max_workers=args.workers,
            ray_address=args.ray_address,
            progress=progress,
        )
    except (LoadError, DatasetError) as exc:
        if sys.stderr.isatty():
            print(file=sys.stderr)  # below the progress line
        return fail(exc)
    except OSError as exc:  # the dataset folder cannot be written (no space, no permission)
        return fail(f"{args.output}: cannot write the dataset ({exc.strerror or exc})")
    if sys.stderr.isatty():
        print(file=sys.stderr)
    for stale in report.cleaned:
        print(f"htatui: removed {stale}, left by an ingest that died", file=sys.stderr)
    if report.removed:
        shown = ", ".join(report.removed[:10]) + (
            f" and {len(report.removed) - 10} more" if len(report.removed) > 10 else ""
        )
        print(
            f"htatui: {report.folder}: replaced; it also held {len(report.removed)} file(s) that ingest had not "
            f"written, removed with it: {shown}",
            file=sys.stderr,
        )
    for problem in report.problems:
        print(f"htatui: skipped {problem.source}: {problem.message}", file=sys.stderr)
    if args.engine == "ray":
        # Apart from the work: on a busy machine a local Ray's own start can take half a minute.
        print(f"htatui: Ray was ready after {report.engine_start_s:.1f} s", file=sys.stderr)
    print(f"{report.folder}: {report.ranks} rank(s) ingested")
    return 0
