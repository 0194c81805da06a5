"""Values no profiler writes: dropped or ignored with one warning per file, never computed with.

A negative duration would make compute time negative; a timestamp of 2**70 µs would make a
span of 1e21 µs; a rank of 2**40 does not fit the rank column. HTA similarly drops events
longer than its maximum event duration.
"""

from __future__ import annotations

import dataclasses

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
    """Events without a negative, non-finite or absurd ts/dur, and a warning counting the rest."""
    ts, dur = pl.col("ts"), pl.col("dur")
    bad_ts = ts.is_not_null() & (ts.is_nan() | (ts.abs() > MAX_ABS_TIMESTAMP_US))
    bad_dur = dur.is_not_null() & (dur.is_nan() | (dur < 0) | (dur > MAX_EVENT_DURATION_US))
    flags = events.select(bad_ts=bad_ts, bad_dur=bad_dur)
    is_bad = flags["bad_ts"] | flags["bad_dur"]
    count = int(is_bad.sum())
    if not count:
        return events, None
    bad_durs, bad_ts_count = int(flags["bad_dur"].sum()), int(flags["bad_ts"].sum())
    warning = (
        f"{count} event(s) with impossible times dropped ({bad_durs} with a negative or over-a-week dur, "
        f"{bad_ts_count} with a ts that is not finite or beyond {MAX_ABS_TIMESTAMP_US:g} µs)"
    )
    return events.filter(~is_bad), warning


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
