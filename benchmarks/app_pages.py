"""The app's memory on one trace after each page: headless, every page in the tab order, then the timeline.

    python benchmarks/app_pages.py /tmp/big556              # the cache as it is (the second run: cached)
    python benchmarks/app_pages.py /tmp/big556 --no-cache   # parse again
    python benchmarks/app_pages.py /tmp/big556 --no-cache --first-screen   # stop at the first screen

Prints, after the first screen and after each page, the process's resident memory now (VmRSS) and
its peak so far (VmHWM), both from /proc/self/status, and the peak while that page was made
(VmHWM reset before it through /proc/self/clear_refs where the kernel allows), with the seconds
that page took to settle
(and once more after the timeline has been idle 11 s: what the app holds, not the freed pages
polars' allocator keeps for a while, and once back on the first page, every page left);
then the JSON bytes of the trace files and the peak over them (issue 26's goal: ≤ 1.0× the JSON).
The app runs in this process, so the figures are the whole app's (Textual, polars, the loaded job).
"""

from __future__ import annotations

import argparse
import struct
import time
from pathlib import Path

IDLE_S = 11.0
"""The last row: the timeline left idle this long (longer than jemalloc's 10 s dirty-page decay)."""


def status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak() -> bool:
    """Start VmHWM again from the memory in use now (Linux: "5" into clear_refs); False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def json_bytes(path: Path) -> int:
    """A trace file's JSON bytes (a gzip file's ISIZE: one member under 4 GB), or a folder's sum."""
    if path.is_dir():
        return sum(json_bytes(p) for p in sorted(path.rglob("*.json*")) if p.is_file())
    if path.name.endswith(".gz"):
        with path.open("rb") as file:
            if file.read(2) != b"\x1f\x8b":
                return path.stat().st_size
            file.seek(-4, 2)
            return int(struct.unpack("<I", file.read(4))[0])
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--first-screen", action="store_true", help="stop once the first screen has settled")
    args = parser.parse_args()

    from htatui.tui.app import HtaTuiApp, Settings
    from htatui.tui.run import settle, wait_until_loaded

    app = HtaTuiApp(Settings(paths=(args.path,), use_cache=not args.no_cache))
    rows: list[tuple[str, float, float, float, float | None]] = []
    overall = [0.0]  # the peak over every page so far: VmHWM restarts at each one

    def record(page: str, started: float) -> None:
        page_peak = status_mib("VmHWM")
        overall[0] = max(overall[0], page_peak)
        resets = reset_peak()
        rows.append(
            (page, time.perf_counter() - started, status_mib("VmRSS"), overall[0], page_peak if resets else None)
        )

    async def drive(pilot):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        if not await wait_until_loaded(pilot, timeout=1800):
            app.exit()
            return
        await settle(pilot)
        record("first screen", started)
        if args.first_screen:
            app.exit()
            return
        for mode, _title in app.view_order():
            started = time.perf_counter()
            await app.action_view(mode)
            await settle(pilot)
            record(mode, started)
        started = time.perf_counter()
        app.open_timeline()
        await settle(pilot)
        record("timeline", started)
        # What the app holds once idle: the allocator hands freed pages back after its decay (10 s).
        started = time.perf_counter()
        await pilot.pause(IDLE_S)
        record(f"+{IDLE_S:.0f} s idle", started)
        # Back on the first page: what the app holds once every page has been visited and left.
        started = time.perf_counter()
        await pilot.press("escape")  # the timeline is pushed over the last page
        await app.action_view(app.view_order()[0][0])
        await settle(pilot)
        await pilot.pause(1.0)
        record("back to first", started)
        app.exit()

    app.run(headless=True, size=(120, 40), auto_pilot=drive)
    size = json_bytes(args.path)
    print(f"{args.path}: {size / 1e6:.0f} MB of JSON; cache {'off' if args.no_cache else 'on'}")
    print(f"{'page':<16}{'s':>8}{'RSS MiB':>9}{'peak MiB':>9}{'page peak':>10}")
    for page, seconds, rss, peak, page_peak in rows:
        during = f"{page_peak:>10.0f}" if page_peak is not None else f"{'-':>10}"
        print(f"{page:<16}{seconds:>8.2f}{rss:>9.0f}{peak:>9.0f}{during}")
    if rows:
        peak = max(row[3] for row in rows) * 1024 * 1024
        print(f"peak after every page: {peak / 1e6:.0f} MB = {peak / size:.2f}x the JSON")
    else:
        print("the trace did not load")


if __name__ == "__main__":
    main()
