"""Issue 40's goals, measured in one run, side by side with HTA 0.6.1: the table benchmarks/README.md begins with.

    python benchmarks/goals.py --big /tmp/big556/rank-0.json.gz > /tmp/goals.md
    python benchmarks/goals.py --big … --skip-hta --rows big,scaling      # some rows only

Every figure is a fresh child process (`benchmarks/measure.py`'s wait4: wall, CPU seconds of the
process and its workers, peak RSS of the largest), with a private empty cache. Rows:

- `traces`: `info --no-cache` of each ~50 MB shared trace against HTA's `TraceAnalysis(trace_dir=…)`
  (imports included on both sides: a user's wall). Goal ≥ 10× HTA.
- `big`: `info --no-cache --jobs 1` of the big trace: MB of JSON per CPU-second (≥ 200) and peak
  over the JSON (≤ 1.0); HTA on it only with --hta-big (HTA holds several GB for 556 MB).
- `scaling`: the same with `--jobs 2`; wall of 1 over wall of 2 (≥ 1.6×).
- `app`: the app's first screen on the big trace, cold (`app_pages.py --no-cache --first-screen`): < 3 s.

The machine's load average (1 minute) is printed with each row: on a shared machine the walls move
with it, CPU seconds and ratios less.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
TRACES = ["df_index_resolver", "trace_diff/control", "trace_diff/test"]

HTA = "import sys; from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])"


def load() -> float:
    return os.getloadavg()[0]


def run(command: list[str], cache: Path) -> dict[str, float]:
    """One run of `command` in a child: wall, CPU seconds (with its children) and peak RSS (MiB)."""
    env = dict(os.environ, HTATUI_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[2:]} failed: {process.stderr.read().decode()[-300:] if process.stderr else ''}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024, "load": load()}


def best(command: list[str], repeat: int) -> dict[str, float]:
    """The run of least wall of `repeat`, each with a fresh empty cache."""
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="htatui-goals-") as cache:
            runs.append(run(command, Path(cache)))
    return min(runs, key=lambda r: r["wall"])


def json_mb(path: Path) -> float:
    sys.path.insert(0, str(ROOT))
    from htatui.trace.read import open_trace

    with open_trace(path) as source:
        return sum(map(len, source.blocks())) / 1e6


def info(path: Path, jobs: int) -> list[str]:
    return [sys.executable, "-m", "htatui", "info", "--no-cache", "--jobs", str(jobs), str(path)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big", type=Path, help="the big trace (python -m fixtures.generate --scale --target-mb 556)")
    parser.add_argument("--rows", default="traces,big,scaling,app")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--hta-big", action="store_true", help="run HTA on the big trace too (several GB)")
    parser.add_argument("--hta-python", default=sys.executable)
    args = parser.parse_args(argv)
    rows = set(args.rows.split(","))
    lines = ["| goal | measured | met? | load avg |", "|---|---|---|---|"]

    def line(goal: str, measured: str, met: bool | None, at: float) -> None:
        lines.append(f"| {goal} | {measured} | {'—' if met is None else 'yes' if met else '**no**'} | {at:.1f} |")
        print(lines[-1], file=sys.stderr, flush=True)

    if "traces" in rows:
        for name in TRACES:
            folder = SHARED / name
            ours = best(info(folder, 1), args.repeat)
            if args.skip_hta:
                line(f"{name} cold ≥ 10× HTA", f"{ours['wall']:.2f} s, {ours['cpu']:.2f} CPU-s", None, ours["load"])
                continue
            hta = best([args.hta_python, "-c", HTA, str(folder)], args.repeat)
            ratio = hta["wall"] / ours["wall"]
            measured = (
                f"{ours['wall']:.2f} s vs HTA {hta['wall']:.2f} s = **{ratio:.1f}×** (CPU-s "
                f"{ours['cpu']:.2f} vs {hta['cpu']:.2f} = {hta['cpu'] / ours['cpu']:.1f}×)"
            )
            line(f"{name} cold ≥ 10× HTA", measured, ratio >= 10, max(ours["load"], hta["load"]))
    if args.big is not None and rows & {"big", "scaling", "app"}:
        mb = json_mb(args.big)
        one = best(info(args.big, 1), args.repeat) if rows & {"big", "scaling"} else None
        if one is not None and "big" in rows:
            rate, peak = mb / one["cpu"], one["peak_mib"] * 1.048576 / mb
            measured = f"{one['wall']:.2f} s, {one['cpu']:.2f} CPU-s = **{rate:.0f} MB per CPU-s**"
            line(f"{mb:.0f} MB trace cold ≥ 200 MB per CPU-s", measured, rate >= 200, one["load"])
            line(
                f"{mb:.0f} MB trace cold peak ≤ 1.0× the JSON",
                f"{one['peak_mib']:.0f} MiB = {peak:.2f}×",
                peak <= 1.0,
                one["load"],
            )
            if args.hta_big and not args.skip_hta:
                hta = best([args.hta_python, "-c", HTA, str(args.big.parent)], 1)
                ratio = hta["wall"] / one["wall"]
                line(
                    f"{mb:.0f} MB trace cold ≥ 50× HTA",
                    f"HTA {hta['wall']:.1f} s = **{ratio:.1f}×**",
                    ratio >= 50,
                    hta["load"],
                )
        if one is not None and "scaling" in rows:
            two = best(info(args.big, 2), args.repeat)
            ratio = one["wall"] / two["wall"]
            walls = f"{one['wall']:.2f} → {two['wall']:.2f} s = **{ratio:.2f}×**"
            measured = f"{walls} ({two['cpu']:.2f} CPU-s, {two['peak_mib']:.0f} MiB)"
            line("decode 1 → 2 workers ≥ 1.6×", measured, ratio >= 1.6, two["load"])
        if "app" in rows:
            with tempfile.TemporaryDirectory(prefix="htatui-goals-") as cache:
                env = dict(os.environ, HTATUI_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
                command = [
                    sys.executable,
                    "benchmarks/app_pages.py",
                    str(args.big.parent),
                    "--no-cache",
                    "--first-screen",
                ]
                out = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
            match = re.search(r"^first screen\s+([\d.]+)", out, re.M)
            seconds = float(match.group(1)) if match else float("nan")
            line("the app's first screen on the big trace, cold, < 3 s", f"**{seconds:.2f} s**", seconds < 3, load())
    print("\n".join(lines))
    print(json.dumps({"command": " ".join(sys.argv), "cores": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
