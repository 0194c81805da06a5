"""The app's CPU cost per user action: start, each page, help, palette, modals, the timeline, the diff.

    python benchmarks/app_actions.py                 # the generated "small" traces, 80x24
    python benchmarks/app_actions.py --size 120x40 --passes 3

Runs the app headless (Textual's Pilot, as the tests do) over the generated `small` scenario
(fixtures/generate.py, 2 ranks) and, for each action a user takes, prints the CPU-seconds the
process spent (time.process_time: every thread, so a page's analysis worker counts) until the
screen has settled (`htatui.tui.run.settle`), the DOM nodes the action created, and Textual's
stylesheet applies it made (the CSS matching, most of what a new widget costs). Then the diff
screen over the generated `diff` scenario (`htatui diff base test`), start to drawn.

The first pass warms the process (imports, CSS parsing, the analyses' memo); the figures are the
best of the later passes, each a fresh app in the same process, as a test or a second window pays.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Row = tuple[str, float, int, int]
"""(action, CPU-s, nodes created, stylesheet applies)."""


class Counters:
    """DOM nodes created and stylesheet applies, counted by wrapping Textual's two entry points."""

    def __init__(self) -> None:
        from textual.css.stylesheet import Stylesheet
        from textual.dom import DOMNode

        self.nodes = 0
        self.applies = 0
        node_init = DOMNode.__init__
        apply = Stylesheet.apply

        def counted_init(node: Any, *args: Any, **kwargs: Any) -> None:
            self.nodes += 1
            node_init(node, *args, **kwargs)

        def counted_apply(sheet: Any, *args: Any, **kwargs: Any) -> Any:
            self.applies += 1
            return apply(sheet, *args, **kwargs)

        DOMNode.__init__ = counted_init  # type: ignore[method-assign]
        Stylesheet.apply = counted_apply  # type: ignore[method-assign]

    def mark(self) -> tuple[float, int, int]:
        return time.process_time(), self.nodes, self.applies

    def since(self, action: str, start: tuple[float, int, int]) -> Row:
        cpu, nodes, applies = start
        return action, time.process_time() - cpu, self.nodes - nodes, self.applies - applies


async def app_pass(traces: Any, size: tuple[int, int], counters: Counters) -> list[Row]:
    from htatui.tui.app import HtaTuiApp, Settings
    from htatui.tui.run import settle, wait_until_loaded

    rows: list[Row] = []
    app = HtaTuiApp(Settings(paths=(Path("small"),), use_cache=False, max_workers=1), traces=traces)
    start = counters.mark()
    async with app.run_test(size=size) as pilot:
        assert await wait_until_loaded(pilot, timeout=60)
        await settle(pilot)
        rows.append(counters.since("start (first page drawn)", start))

        async def measure(action: str, act: Callable[[], Awaitable[None]]) -> None:
            start = counters.mark()
            await act()
            await settle(pilot)
            rows.append(counters.since(action, start))

        def keys(*names: str) -> Callable[[], Awaitable[None]]:
            return lambda: pilot.press(*names)

        order = [mode for mode, _title in app.view_order()]
        for mode in order[1:]:
            await measure(f"page {mode} (first visit)", lambda mode=mode: app.action_view(mode))
        await measure(f"page {order[0]} (again)", lambda: app.action_view(order[0]))
        await measure(f"page {order[1]} (again)", lambda: app.action_view(order[1]))
        # Each one opened, then closed with escape.
        openers: tuple[tuple[str, str, Callable[[], Awaitable[None]]], ...] = (
            ("help", "?", keys("question_mark")),
            ("palette", "ctrl+p", keys("ctrl+p")),
            ("rank picker", "p", keys("p")),
            ("notes", "N", keys("N")),
            ("diff prompt", "d", keys("d")),
            ("export", "modal", lambda: _sync(app.action_export_counters)),
            ("filter", "/", keys("slash")),
            ("timeline", "t", keys("t")),
            ("query", ":query", lambda: _sync(app.action_query)),
        )
        for name, how, opener in openers:
            await measure(f"{name} {how}", opener)
            await measure(f"{name} escape", keys("escape"))
        start = counters.mark()
    rows.append(counters.since("quit", start))
    return rows


async def _sync(action: Callable[[], object]) -> None:
    action()


async def diff_pass(root: Path, size: tuple[int, int], counters: Counters) -> list[Row]:
    from htatui.tui.diff_app import DiffApp
    from htatui.tui.screens.diff import DiffScreen

    app = DiffApp(root / "base", root / "test", use_cache=False, max_workers=1)
    start = counters.mark()
    async with app.run_test(size=size) as pilot:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            screen = app.screen
            if isinstance(screen, DiffScreen) and (screen.has_class("-ready") or screen.failed):
                break
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause()
        row = counters.since("diff screen (both jobs parsed, drawn)", start)
    return [row]


def best(passes: list[list[Row]]) -> list[Row]:
    """Per action, the pass with the least CPU (its nodes and applies are the same every pass)."""
    by_action: dict[str, Row] = collections.OrderedDict()
    for rows in passes:
        for row in rows:
            if row[0] not in by_action or row[1] < by_action[row[0]][1]:
                by_action[row[0]] = row
    return list(by_action.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="80x24", help="terminal size, WxH")
    parser.add_argument("--passes", type=int, default=2, help="measured passes after the warm-up")
    args = parser.parse_args()
    width, height = (int(part) for part in args.size.split("x"))
    size = (width, height)

    from textual.widgets import Input

    from fixtures.generate import write_scenario
    from htatui.jobs.load import load_traces

    Input._toggle_cursor = lambda self: None  # type: ignore[method-assign]  # a blink is timing noise
    root = Path(tempfile.mkdtemp(prefix="app-actions-"))
    write_scenario("small", root / "small")
    write_scenario("diff", root / "diff")
    traces = load_traces([root / "small"], use_cache=False, max_workers=1)
    counters = Counters()
    asyncio.run(app_pass(traces, size, counters))  # warm-up
    asyncio.run(diff_pass(root / "diff", size, counters))
    app_rows = best([asyncio.run(app_pass(traces, size, counters)) for _ in range(args.passes)])
    diff_rows = best([asyncio.run(diff_pass(root / "diff", size, counters)) for _ in range(args.passes)])
    print(f"{'action':<38}{'CPU s':>8}{'nodes':>7}{'applies':>9}")
    for action, cpu, nodes, applies in app_rows + diff_rows:
        print(f"{action:<38}{cpu:>8.3f}{nodes:>7}{applies:>9}")
    keystrokes = [row for row in app_rows if not row[0].startswith(("start", "quit"))]
    print(f"{'sum over the keystrokes above':<38}{sum(row[1] for row in keystrokes):>8.2f}")


if __name__ == "__main__":
    main()
