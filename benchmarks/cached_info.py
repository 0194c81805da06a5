"""Cached `htatui info`, whole process, two checkouts side by side in one run (issue 26).

    python benchmarks/cached_info.py --before /work/main --after . [--runs 5] INPUT...

Each (checkout, input) gets its own empty HTATUI_CACHE_DIR, filled by one first `info` run; then
the cached runs alternate between the checkouts, each under `/usr/bin/time -v`, and the median
wall time, CPU time (user + system: what a busy machine inflates least) and peak RSS of `--runs`
runs are printed as a Markdown table with the load average (this machine is shared). Both
checkouts run on this interpreter (`sys.executable`).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def timed(checkout: Path, target: str, cache: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s, peak RSS KiB, stdout) of one `python -m htatui info target` in `checkout`."""
    env = dict(os.environ, PYTHONPATH=str(checkout), HTATUI_CACHE_DIR=str(cache), COLUMNS="120")
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "htatui", "info", target],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = [float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr)]
    assert wall and rss and len(cpu) == 2, done.stderr
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return seconds, sum(cpu), int(rss.group(1)), done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    with tempfile.TemporaryDirectory(prefix="htatui-cached-info-") as scratch:
        caches = {
            (side, target): Path(scratch) / f"{side}-{n}" for n, target in enumerate(args.inputs) for side in sides
        }
        for (side, target), cache in caches.items():
            timed(sides[side], target, cache)  # the first run parses and fills this cache
        load_before = os.getloadavg()[0]
        figures: dict[tuple[str, str], list[tuple[float, float, int]]] = {key: [] for key in caches}
        outputs: dict[tuple[str, str], set[str]] = {key: set() for key in caches}
        for _ in range(args.runs):
            for target in args.inputs:
                for side in sides:
                    wall, cpu, rss, out = timed(sides[side], target, caches[(side, target)])
                    figures[(side, target)].append((wall, cpu, rss))
                    outputs[(side, target)].add(out)
        load_after = os.getloadavg()[0]
    print(f"load average (1 min) {load_before:.1f} before, {load_after:.1f} after; median of {args.runs}\n")
    print("| input | before: wall s, CPU s, MiB | after: wall s, CPU s, MiB | × (wall, CPU) | same output |")
    print("|---|---|---|---|---|")
    for target in args.inputs:
        cells = []
        for side in sides:
            runs = figures[(side, target)]
            cells.append([statistics.median(run[i] for run in runs) for i in range(3)])
        (b_wall, b_cpu, b_rss), (a_wall, a_cpu, a_rss) = cells
        same = outputs[("before", target)] == outputs[("after", target)] and len(outputs[("after", target)]) == 1
        before_cells = f"{b_wall:.2f}, {b_cpu:.2f}, {b_rss / 1024:.0f}"
        after_cells = f"{a_wall:.2f}, {a_cpu:.2f}, {a_rss / 1024:.0f}"
        ratios = f"{b_wall / a_wall:.1f}, {b_cpu / a_cpu:.1f}"
        print(f"| {target} | {before_cells} | {after_cells} | {ratios} | {same} |")


if __name__ == "__main__":
    main()
