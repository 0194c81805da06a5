"""Stopping an analysis the user has cancelled, between its stages.

A face runs an analysis inside `cancellable(event)`; the analysis calls `check()` where it can
stop cleanly (before each rank, each derived frame, each table), and `check` raises `Cancelled`
once the event is set. The event travels in a context variable, so no function between the
face and the loops has to pass it along; each worker thread has its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from htatui.errors import Cancelled

__all__ = ["Cancelled", "cancellable", "check"]

_EVENT: ContextVar[threading.Event | None] = ContextVar("htatui_cancel", default=None)


@contextmanager
def cancellable(event: threading.Event | None) -> Iterator[None]:
    """Run the block with `event` as the cancel signal that `check` reads."""
    token = _EVENT.set(event)
    try:
        yield
    finally:
        _EVENT.reset(token)


def check() -> None:
    """Raise `Cancelled` if the running analysis was cancelled."""
    event = _EVENT.get()
    if event is not None and event.is_set():
        raise Cancelled
