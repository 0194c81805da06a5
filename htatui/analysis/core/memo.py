"""Derived frames kept on the loaded job and reused by later views, and GC paused for loops that build many objects."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from htatui.analysis.core import cancel
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, scope_key
from htatui.trace.model import TraceSet

_T = TypeVar("_T")


def selection_key(traces: TraceSet, options: CommonOptions, *fields: str) -> tuple[Any, ...]:
    """What a derived frame depends on: the chosen ranks, the mode, the step filter, and the named options.

    Used in `memoised` keys, so two calls share a frame only when every option it reads is equal.
    The ranks are those `prepare` reads, in its order: "all ranks" and the same ranks named one by
    one share a frame (on a one-rank job the Ops and Patterns screens kept two copies of the op tree).
    """
    chosen = chosen_ranks(traces, options)
    extra = tuple((name, getattr(options, name)) for name in fields)
    return (tuple(chosen), *scope_key(options.scope), *extra)


def memoised(traces: TraceSet, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
    """`compute()`, kept on the loaded job (`TraceSet.derived`) under `key` and reused by later calls.

    The views' tables of one screen share one derived frame (idle's gaps, launch's pairs, queue's
    series), and it lives and dies with the TraceSet, so another job or a per-rank TraceSet made
    by `rank_by_rank` starts empty. Keys start with the deriving function's name.
    """
    found = traces.derived.get(key, _MISSING)
    if found is _MISSING:
        cancel.check()
        found = compute()
        traces.derived[key] = found
    return found  # type: ignore[no-any-return]


_MISSING = object()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: loops that make millions of small lists and tuples
    (the op tree) otherwise trigger a full collection many times over."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
