"""Breakpoint classes set on a screen before it mounts."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen


def preset_breakpoints(screen: Screen[Any]) -> None:
    """Give a new screen the breakpoint classes its first resize would give it (as Textual picks
    them: the largest threshold the terminal reaches), so that resize changes no class and does
    not restyle every widget just mounted."""
    try:
        app = screen.app
    except RuntimeError:  # NoActiveAppError: made outside an app, it gets its classes on its first resize
        return
    width, height = app.size
    for size, breakpoints in (
        (width, app.HORIZONTAL_BREAKPOINTS if screen.HORIZONTAL_BREAKPOINTS is None else screen.HORIZONTAL_BREAKPOINTS),
        (height, app.VERTICAL_BREAKPOINTS if screen.VERTICAL_BREAKPOINTS is None else screen.VERTICAL_BREAKPOINTS),
    ):
        reached = [name for threshold, name in sorted(breakpoints or [], reverse=True) if size >= threshold]
        if reached:
            screen.add_class(reached[0], update=False)
