"""The Textual face of htatui. `run_app` is the entry point; importing this package loads no Textual."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from htatui.tui.run import run_app

__all__ = ["run_app"]


def __getattr__(name: str) -> Any:
    if name == "run_app":
        from htatui.tui.run import run_app

        return run_app
    raise AttributeError(name)
