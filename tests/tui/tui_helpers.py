"""Helpers shared by the TUI tests: an app factory and waits for the views."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from htatui.trace import TraceSet
from htatui.tui.app import HtaTuiApp, Settings
from htatui.tui.run import settle, wait_until_loaded


def make_app(traces: TraceSet, name: str = "small", theme: str | None = None) -> HtaTuiApp:
    """An app over loaded traces; the header shows `name` (never a temp path)."""
    return HtaTuiApp(Settings(paths=(Path(name),), use_cache=False, max_workers=1), theme=theme, traces=traces)


async def ready(pilot: Pilot[Any]) -> None:
    """Wait until the first view shows and its analysis is drawn."""
    assert await wait_until_loaded(pilot, timeout=60)
    await settle(pilot)


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press keys, then wait for any analysis they started to be drawn."""
    await pilot.press(*keys)
    await settle(pilot)
