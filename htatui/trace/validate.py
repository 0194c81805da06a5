"""Values no profiler writes: dropped or ignored with one warning per file, never computed with.

A negative duration would make compute time negative; a timestamp of 2**70 µs would make a
span of 1e21 µs; a rank of 2**40 does not fit the rank column. HTA similarly drops events
longer than its maximum event duration.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from htatui.trace.model import TraceMeta, with_details

# A week: no profiling window is longer, so a longer event is corrupt (HTA caps durations too).
MAX_EVENT_DURATION_US = 7 * 24 * 3600 * 1e6
# About 3,000 years of µs: epoch-µs timestamps (1.7e15 in 2024) are far below.
MAX_ABS_TIMESTAMP_US = 1e17
# Ranks are stored as Int32.
MAX_RANK = 2**31 - 1
_MAX_BASE_TIME_NS = 2**63 - 1


def drop_impossible_events(events: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """Events without a negative, non-finite or absurd ts/dur, or a ts far from the rest (`FAR_FROM_REST`),
    and a warning counting the rest."""
    flags = events.select(bad_ts=_BAD_TS, bad_dur=_BAD_DUR, far=FAR_FROM_REST)
    is_bad = flags["bad_ts"] | flags["bad_dur"] | flags["far"]
    count = int(is_bad.sum())
    if not count:
        return events, None
    bad_durs, bad_ts_count, far = (int(flags[name].sum()) for name in ("bad_dur", "bad_ts", "far"))
    far_words = f", {far} more than a week from the trace's median time" if far else ""
    warning = (
        f"{count} event(s) with impossible times dropped ({bad_durs} with a negative or over-a-week dur, "
        f"{bad_ts_count} with a ts that is not finite or beyond {MAX_ABS_TIMESTAMP_US:g} µs{far_words})"
    )
    return events.filter(~is_bad), warning


_BAD_TS = pl.col("ts").is_not_null() & (pl.col("ts").is_nan() | (pl.col("ts").abs() > MAX_ABS_TIMESTAMP_US))
_BAD_DUR = pl.col("dur").is_not_null() & (
    pl.col("dur").is_nan() | (pl.col("dur") < 0) | (pl.col("dur") > MAX_EVENT_DURATION_US)
)
FAR_FROM_REST = ((pl.col("ts") - pl.col("ts").filter(~_BAD_TS).median()).abs() > MAX_EVENT_DURATION_US).fill_null(
    False
) & ~_BAD_TS
"""An event whose ts is more than a week (MAX_EVENT_DURATION_US) from the median of the rank's ts.

No profiling window is that long, so such an event was written wrong: a kernel at ts 0 or -1 in an
epoch-µs trace (1.7e15) would stretch the rank's span to 53 years and its idle time to 99.9999999 %.
The median stands for where the trace is, whatever a few wrong events say."""


def drop_duplicate_events(events: pl.DataFrame, details: pl.DataFrame | None = None) -> tuple[pl.DataFrame, str | None]:
    """Complete events that repeat another one exactly (every field but the file position) dropped,
    with a warning counting them: a trace written twice into one file would double every count
    and sum while the interval views (temporal, overlap) stay the same.

    Rows are compared by a hash first, so only the few rows whose hash repeats are compared whole,
    their detail columns (`details`, the events' detail table) included: kernels that differ only
    in their launch statistics are not repeats.
    """
    fields = events.drop("index")
    hashes = fields.hash_rows()
    # The hashes seen twice, found on a sorted copy: is_duplicated's hash table of every row cost a
    # load's peak ~0.35x the JSON (84 MB on a 237 MB trace); the sort costs a copy of the hashes.
    ordered = hashes.sort()
    twice = ordered.filter(ordered == ordered.shift(1)).unique()
    del ordered
    repeated = (events["ph"] == "X") & hashes.is_in(twice.implode())
    if not repeated.any():
        return events, None
    candidates = events.with_row_index("_row").filter(repeated)
    if details is not None:
        candidates = with_details(candidates, details)
    candidates = candidates.drop("index")
    first = candidates.select(pl.struct(pl.all().exclude("_row")).is_first_distinct())
    later = candidates.filter(~first.to_series())["_row"]
    if later.len() == 0:
        return events, None
    keep = ~pl.Series(range(events.height)).is_in(later.implode())
    warning = f"{later.len()} complete event(s) repeated exactly (every field but the position) dropped"
    return events.filter(keep), warning


def check_meta(meta: TraceMeta) -> tuple[TraceMeta, list[str]]:
    """The metadata with out-of-range values removed, and a warning for each."""
    warnings: list[str] = []
    meta, wide = _wide_integers_removed(meta)
    if wide:
        named = ", ".join(wide[:3]) + (f" and {len(wide) - 3} more" if len(wide) > 3 else "")
        warnings.append(f"{len(wide)} header integer(s) wider than 64 bits ignored ({named})")
    base = meta.base_time_ns
    if base is not None and not 0 <= base <= _MAX_BASE_TIME_NS:
        warnings.append(f"baseTimeNanoseconds {base} is out of range; ignored")
        meta = dataclasses.replace(meta, base_time_ns=None)
    bad_props = [p for p in meta.device_properties if not isinstance(p, dict)]
    if bad_props:
        warnings.append(f"{len(bad_props)} malformed deviceProperties item(s) ignored")
        kept = tuple(p for p in meta.device_properties if isinstance(p, dict))
        meta = dataclasses.replace(meta, device_properties=kept)
    note = rank_note(meta)
    if note:
        warnings.append(note)
    return meta, warnings


_INT64 = range(-(2**63), 2**63)
_GONE = object()


def _wide_integers_removed(meta: TraceMeta) -> tuple[TraceMeta, list[str]]:
    """The metadata without its header integers wider than 64 bits, and where each was.

    Such a number (a 400-digit `world_size`) fits no table column or float, and one of over 4,300
    digits cannot even be printed; no profiler writes one.
    """
    found: list[str] = []
    props = tuple(_without_wide(p, f"deviceProperties[{at}]", found) for at, p in enumerate(meta.device_properties))
    info = _without_wide(meta.distributed_info, "distributedInfo", found)
    version = _without_wide(meta.schema_version, "schemaVersion", found)
    if not found:
        return meta, found
    return dataclasses.replace(
        meta,
        device_properties=props,
        distributed_info=info,
        schema_version=None if version is _GONE else version,
    ), found


def _without_wide(value: Any, where: str, found: list[str]) -> Any:
    """`value` with every integer wider than 64 bits left out (dict keys and list items alike)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _INT64:
            return value
        found.append(where[:80])
        return _GONE
    if isinstance(value, dict):
        kept = {key: _without_wide(item, f"{where}.{key}", found) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item is not _GONE}
    if isinstance(value, list):
        items = [_without_wide(item, f"{where}[{at}]", found) for at, item in enumerate(value)]
        return [item for item in items if item is not _GONE]
    return value


def rank_note(meta: TraceMeta) -> str | None:
    """A word when distributedInfo.rank is present but unusable, or written as text."""
    info = meta.distributed_info
    if not isinstance(info, dict) or "rank" not in info:
        return None
    value = info["rank"]
    if meta.claimed_rank is None:
        return f"distributedInfo.rank {value!r} is not a rank number (0 to {MAX_RANK}); ignored"
    if isinstance(value, str):
        return f"distributedInfo.rank is text ({value!r}); read as rank {meta.claimed_rank}"
    return None
