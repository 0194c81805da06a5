"""What the load-time check for repeated complete events costs (`validate.drop_duplicate_events`).

    python benchmarks/duplicates.py --scale 1000000      # a trace from `python -m fixtures.generate --scale N`
    python benchmarks/duplicates.py --trace ../shared/traces/df_index_resolver/df_index_resolver.json.gz

Loads the trace's first rank once (no cache, one worker), then times the check on its events
frame (median of --repeat runs): as loaded (no repeats, the usual case) and with the first
1,000 rows appended again (repeats to find and drop). Prints the seconds and their share of the
load's wall time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _median_s(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", type=Path, help="a trace file or folder")
    source.add_argument("--scale", type=int, metavar="N", help="generate a one-rank trace of about N events")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import polars as pl

    from htatui.jobs.load import load_traces
    from htatui.trace.validate import drop_duplicate_events

    with tempfile.TemporaryDirectory() as scratch:
        path = args.trace
        if path is None:
            path = Path(scratch)
            generate = [sys.executable, "-m", "fixtures.generate", "--scale", str(args.scale), "--ranks", "1"]
            subprocess.run([*generate, "--out", str(path)], cwd=ROOT, check=True, capture_output=True)
        start = time.perf_counter()
        traces = load_traces([path], use_cache=False, max_workers=1)
        load_s = time.perf_counter() - start
        events = traces.ranks[traces.rank_ids[0]].events
        clean_s = _median_s(lambda: drop_duplicate_events(events), args.repeat)
        repeated = pl.concat([events, events.head(1000)])
        repeated_s = _median_s(lambda: drop_duplicate_events(repeated), args.repeat)
        _, warning = drop_duplicate_events(repeated)
    print(f"rows {events.height:,}  load {load_s:.2f} s (wall, one worker)")
    print(f"check, no repeats      {clean_s * 1000:7.1f} ms  ({100 * clean_s / load_s:.1f} % of the load)")
    print(f"check, 1,000 rows again {repeated_s * 1000:6.1f} ms  ({warning})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
