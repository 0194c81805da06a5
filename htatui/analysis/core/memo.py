"""Derived frames kept on the loaded job and reused by later views, and GC paused for loops that build many objects."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import polars as pl

from htatui.analysis.core import cancel, kept
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import chosen_ranks, scope_key
from htatui.trace.model import TraceSet

_T = TypeVar("_T")


def selection_key(traces: TraceSet, options: CommonOptions, *fields: str) -> tuple[Any, ...]:
    """What a derived frame depends on: the chosen ranks, the mode, the step filter, the rules
    (`Scope.rules`) and the named options.

    Used in `memoised` keys, so two calls share a frame only when every option it reads is equal.
    The ranks are those `prepare` reads, in its order: "all ranks" and the same ranks named one by
    one share a frame (on a one-rank job the Ops and Patterns screens kept two copies of the op tree).
    """
    chosen = chosen_ranks(traces, options)
    extra = tuple((name, getattr(options, name)) for name in fields)
    return (tuple(chosen), *scope_key(options.scope), options.scope.rules, *extra)


def memoised(traces: TraceSet, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
    """`compute()`, kept on the loaded job (`TraceSet.derived`) under `key` and reused by later calls.

    The views' tables of one screen share one derived frame (idle's gaps, launch's pairs, queue's
    series), and it lives and dies with the TraceSet, so another job or a per-rank TraceSet made
    by `rank_by_rank` starts empty. Keys start with the deriving function's name and hold the
    rules of what depends on them (`selection_key` holds the scope's); the code digest
    (`kept.code_digest`) is added, as on disk.
    """
    full = (*key, kept.code_digest())
    found = traces.derived.get(full, _MISSING)
    if found is _MISSING:
        cancel.check()
        found = compute()
        traces.derived[full] = found
    return found  # type: ignore[no-any-return]


def held(traces: TraceSet, key: tuple[Any, ...]) -> Any:
    """What `memoised` keeps under `key` if the job holds it now, else None (nothing is made)."""
    return traces.derived.get((*key, kept.code_digest()))


def remember(traces: TraceSet, key: tuple[Any, ...], value: Any) -> None:
    """Keep `value`, made elsewhere, as `memoised` would have kept it under `key`."""
    traces.derived[(*key, kept.code_digest())] = value


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


def derived_keys(traces: TraceSet) -> list[Any]:
    """The keys of what the job holds derived now (a snapshot: `list` of a dict takes it in one step,
    while an analysis on another thread may be adding to it)."""
    return list(traces.derived)


def derived_bytes(value: Any) -> int:
    """About how many bytes a derived value holds: its frames, series and arrays, through the
    tuples, lists, dicts and dataclasses around them (a long list of numbers or texts at 36 bytes an item)."""
    return _bytes(value, set())


def _bytes(value: Any, seen: set[int]) -> int:
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, (pl.DataFrame, pl.Series)):
        return int(value.estimated_size())
    nbytes = getattr(value, "nbytes", None)  # a numpy array (not imported here: start-up time)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, (list, tuple)):
        if len(value) > _LONG and isinstance(value[0], (int, float, str, type(None))):
            return sys.getsizeof(value) + 28 * len(value)
        return sys.getsizeof(value) + sum(_bytes(item, seen) for item in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_bytes(item, seen) for item in value.values())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_bytes(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return sys.getsizeof(value) + sum(_bytes(item, seen) for item in vars(value).values())
    return sys.getsizeof(value)


_LONG = 1000


def forget_large(traces: TraceSet, keys: Iterable[Any], over_bytes: int) -> int:
    """Drop the derived values under `keys` that hold more than `over_bytes`; the bytes dropped.

    What a page derived is reused while it shows; once it is left, a later call makes the large
    values again (`memoised` and `prepare` make what is missing) rather than the job keeping them.
    """
    dropped = 0
    for key in keys:
        value = traces.derived.get(key, _MISSING)
        if value is _MISSING:
            continue
        size = derived_bytes(value)
        if size > over_bytes:
            traces.derived.pop(key, None)
            dropped += size
    return dropped
