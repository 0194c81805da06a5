"""The single-file loader's speed and memory: MB of JSON per CPU-second, and peak RSS per JSON byte.

    python benchmarks/decode.py --trace ../shared/traces/df_index_resolver/df_index_resolver.json.gz
    python benchmarks/decode.py --scale 1000000         # a trace from `python -m fixtures.generate --scale N`
    python benchmarks/decode.py --target-mb 300         # ... of about 300 MB of JSON
    python benchmarks/decode.py --trace T --checkout ../main   # the same figures for another checkout

Every figure comes from a fresh child process. Speed: CPU seconds (process_time: every thread
of the process, so MB/s "per core") of `decode_columns` (bytes → piece columns, streamed from the
file) and of `parse_file` (the whole single-file load: read, gunzip, decode, frame, checks), best
of --repeat runs after a warm-up. Memory: ru_maxrss of a child that imports htatui and runs one
`parse_file`, as a multiple of the trace's uncompressed JSON bytes (the interpreter and polars,
~50 MB, included). Targets (issue 11): ≥ 150 MB/s per core; peak RSS ≤ 1.0× the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD_SPEED = """
import json, sys, time
from pathlib import Path
from htatui.trace.columns import decode_columns
from htatui.trace.loader import parse_file
from htatui.trace import read
path, repeat = Path(sys.argv[1]), int(sys.argv[2])
def decode():
    if not hasattr(read, "open_trace"):  # a checkout from before streaming: the whole buffer
        return decode_columns(read.read_trace_bytes(path)[0], [])
    with read.open_trace(path) as source:
        decode_columns(source, [])
def best(run):
    run()  # warm-up: imports, polars' thread pool, first allocations
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)
import htatui
figures = {"decode_columns": best(decode), "parse_file": best(lambda: parse_file(path))}
print(json.dumps(figures | {"code": htatui.__file__}))
"""

CHILD_PEAK = """
import json, resource, sys
from pathlib import Path
from htatui.trace.loader import parse_file
events = parse_file(Path(sys.argv[1])).events.height
print(json.dumps({"rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "events": events}))
"""


def child(code: str, checkout: Path, *args: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
        env=env,
        cwd=checkout,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "child failed")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def json_bytes(path: Path) -> int:
    """The trace's uncompressed JSON bytes, counted as streamed (never held whole)."""
    sys.path.insert(0, str(ROOT))
    from htatui.trace.read import open_trace

    with open_trace(path) as source:
        return sum(map(len, source.blocks()))


def generated(folder: Path, scale: int | None, target_mb: int | None) -> Path:
    command = [sys.executable, "-m", "fixtures.generate", "--out", str(folder), "--ranks", "1", "--scale"]
    command += [str(scale)] if scale else []
    command += ["--target-mb", str(target_mb)] if target_mb else []
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
    return next(folder.glob("*.json*"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, help="a trace file (.json or .json.gz)")
    parser.add_argument("--scale", type=int, help="generate a trace of N events instead")
    parser.add_argument("--target-mb", type=int, help="generate a trace of about N MB of JSON instead")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="measure another checkout's htatui (e.g. main)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="htatui-decode-") as tmp:
        path = args.trace or generated(Path(tmp), args.scale, args.target_mb)
        size = json_bytes(path)
        speed = child(CHILD_SPEED, args.checkout, str(path), str(args.repeat))
        peak = child(CHILD_PEAK, args.checkout, str(path))
    mb = size / 1e6
    print(f"htatui at {Path(str(speed['code'])).parent.parent}")
    print(f"{path.name}: {mb:.1f} MB of JSON ({path.stat().st_size / 1e6:.1f} MB file), {peak['events']:,.0f} events")
    for name in ("decode_columns", "parse_file"):
        seconds = speed[name]
        print(f"  {name:15s} {seconds:6.3f} CPU s  {mb / seconds:6.1f} MB/s per core   (target ≥ 150)")
    ratio = peak["rss_bytes"] / size
    print(f"  peak RSS        {peak['rss_bytes'] / 1e6:6.0f} MB  {ratio:6.2f}× the JSON        (target ≤ 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
