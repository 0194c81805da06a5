"""Entry point the CLI calls (after it has set TEXTUAL_COLOR_SYSTEM): run the app or take screenshots."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Steps
from htatui.sources import SourcePath
from htatui.tui.app import HtaTuiApp, Settings
from htatui.tui.screens.loading import LoadingScreen

SCREENSHOT_SIZE = (120, 40)
LOAD_TIMEOUT_S = 600.0


def run_app(
    paths: Sequence[SourcePath],
    *,
    theme: str | None = None,
    use_cache: bool = True,
    hta_compat: bool = False,
    steps: Steps | None = None,
    rules: Rules = SHIPPED_RULES,
    screenshot_dir: Path | None = None,
) -> int:
    """Open the TUI over the traces in `paths`; return the process exit code.

    0 after `q`; 2 when nothing could be loaded (or a screenshot failed); 130 when the user
    cancelled the load with esc. With `screenshot_dir`, run headless at 120x40, save one SVG per
    view there, and exit.
    """
    settings = Settings(
        paths=tuple(paths), use_cache=use_cache, hta_compat=hta_compat, steps=steps or Steps(), rules=rules
    )
    app = HtaTuiApp(settings, theme=theme)
    if screenshot_dir is not None:
        return save_screenshots(app, screenshot_dir)
    result = app.run(mouse=False)
    if app.return_code is not None:
        return app.return_code
    return int(result or 0)


def save_screenshots(app: HtaTuiApp, out_dir: Path, size: tuple[int, int] = SCREENSHOT_SIZE) -> int:
    """Run `app` headless and save `NN-<view>.svg` for every view into `out_dir` (00: Diagnosis)."""
    written: list[Path] = []
    problems: list[str] = []

    async def drive(pilot: Pilot[object]) -> None:
        try:
            written.extend(await capture_views(pilot, out_dir))
            screen = pilot.app.screen
            if isinstance(screen, LoadingScreen) and screen.error_message:
                problems.append(screen.error_message)
        finally:
            pilot.app.exit(return_code=0 if written else 2)

    app.run(headless=True, size=size, auto_pilot=drive)
    for path in written:
        print(path)
    if not written:
        reason = problems[0] if problems else "the traces did not load in time"
        print(f"htatui: no screenshot was written: {reason}", file=sys.stderr)
    return app.return_code or 0


async def wait_until_loaded(pilot: Pilot[Any], timeout: float = LOAD_TIMEOUT_S) -> bool:
    """True once the first view shows; False when loading failed or took too long."""
    app = pilot.app
    assert isinstance(app, HtaTuiApp)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.traces is None or isinstance(app.screen, LoadingScreen):
        screen = app.screen
        if isinstance(screen, LoadingScreen) and screen.failed:
            return False
        if loop.time() > deadline:
            return False
        await pilot.pause(0.05)
    return True


async def settle(pilot: Pilot[Any]) -> None:
    """Wait for every analysis worker, then for the screen to draw their results."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def capture_views(pilot: Pilot[Any], out_dir: Path) -> list[Path]:
    app = pilot.app
    assert isinstance(app, HtaTuiApp)
    if not await wait_until_loaded(pilot):
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    views = app.view_order()
    # The Diagnosis page the app opens on is 00: the numbered pages keep their files' names.
    first = 0 if views and views[0][0] == "diagnosis" else 1
    for number, (mode, _title) in enumerate(views, start=first):
        await app.action_view(mode)
        await settle(pilot)
        written.append(Path(app.save_screenshot(f"{number:02d}-{mode}.svg", str(out_dir))))
    # The timeline is opened from a view rather than by number; it gets the next number.
    app.open_timeline()
    await settle(pilot)
    written.append(Path(app.save_screenshot(f"{first + len(views):02d}-timeline.svg", str(out_dir))))
    # `:query` with its example query run: the last picture.
    app.pop_screen()
    app.action_query()
    await settle(pilot)
    await pilot.press("enter")
    await settle(pilot)
    written.append(Path(app.save_screenshot(f"{first + len(views) + 1:02d}-query.svg", str(out_dir))))
    return written
