"""An iterator's items made ahead in a thread: gunzip (zlib lets go of the GIL) overlaps decoding."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import TypeVar

T = TypeVar("T")
_POLL_S = 0.05
"""How often a producer blocked on a full queue looks whether it was told to stop."""


def prefetched(items: Iterator[T], depth: int) -> Generator[T, None, None]:
    """`items` in order, made by a thread up to `depth` items ahead; an exception it raises is
    raised here, where its item would have come. Closing the generator (or its end) stops the
    thread and waits for it, so that whatever `items` reads is no longer read afterwards."""
    made: queue.Queue[tuple[str, object]] = queue.Queue(depth)
    stop = threading.Event()

    def put(kind: str, value: object) -> bool:
        while not stop.is_set():
            try:
                made.put((kind, value), timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put("item", item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put("error", exc)
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # a generator's own clean-up, in the thread that ran it
        put("end", None)

    thread = threading.Thread(target=produce, name="htatui-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = made.get()
            if kind == "end":
                return
            if kind == "error":
                assert isinstance(value, BaseException)
                raise value
            yield value  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
