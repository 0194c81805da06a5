"""The steady state of a rank's steps (`--steps steady`): its steps without warm-up and graph capture.

The first steps of a job are not its typical ones: cuDNN and Triton autotune, the allocator
grows, `torch.compile` and a serving engine capture their CUDA graphs, and a serving engine's
batch ramps up to its concurrency and down again at the end. TraceLens splits serving traces the
same way before it reports (its steady-state window: iterations whose request count is near the
peak). From the default steps (every step but the last when there are two or more), `steady`
leaves out, in order:

1. **graph capture**: a step in which the host captures a CUDA/HIP graph (a `*StreamBeginCapture`,
   `*StreamEndCapture` or `*GraphInstantiate*` call, or a serving engine's `capture_N_…` range,
   starts inside it);
2. **batch below its peak**: where the steps are a serving engine's iterations whose annotations
   say how many requests ran, those with fewer than the peak − max(1, 10 % of the peak)
   (TraceLens's threshold): the ramp up and the drain;
3. **warm-up**: the leading steps that last more than twice the median step of what is left.
"""

from __future__ import annotations

import polars as pl

from htatui.trace.kineto import GRAPH_CAPTURE_APIS
from htatui.trace.step_sources import CAPTURE_ANNOTATION, requests_of

WARM_UP_FACTOR = 2.0
"""A leading step this many times longer than the median step is warm-up."""

PEAK_SHARE = 0.1
"""A serving step within max(1, this share) of the peak request count is at the peak (TraceLens)."""

Reasons = tuple[tuple[str, tuple[int, ...]], ...]


def steady_steps(
    events: pl.DataFrame, spans: pl.DataFrame, candidates: tuple[int, ...]
) -> tuple[tuple[int, ...], Reasons]:
    """The steady steps among `candidates` and why each other candidate was left out.

    `events`: the rank's rows (ph, cat, name, ts); `spans`: its step ranges (step, ts, end, dur,
    name) as `step_sources.spans_of(..., with_names=True)` gives them."""
    steps = (
        spans.filter(pl.col("step").is_in(pl.Series(candidates, dtype=pl.Int64).implode()))
        .group_by("step", maintain_order=True)
        .agg(ts=pl.col("ts").min(), end=pl.col("end").max(), name=pl.col("name").first())
        .with_columns(dur=pl.col("end") - pl.col("ts"))
        .sort("ts")
    )
    reasons: list[tuple[str, tuple[int, ...]]] = []
    capture = _capturing(events, steps)
    steps = steps.filter(~pl.col("step").is_in(pl.Series(capture, dtype=pl.Int64).implode()))
    reasons.append(("graph capture", capture))
    below = _below_peak(steps)
    steps = steps.filter(~pl.col("step").is_in(pl.Series(below, dtype=pl.Int64).implode()))
    reasons.append(("batch below its peak", below))
    warm = _warm_up(steps)
    steps = steps.filter(~pl.col("step").is_in(pl.Series(warm, dtype=pl.Int64).implode()))
    reasons.append(("warm-up", warm))
    kept = set(steps["step"].to_list())
    return tuple(s for s in candidates if s in kept), tuple((why, found) for why, found in reasons if found)


def _capturing(events: pl.DataFrame, steps: pl.DataFrame) -> tuple[int, ...]:
    """The steps in which a graph capture call or a capture range starts."""
    names = events["name"].unique()
    text = names.cast(pl.Utf8)
    capture_names = names.filter(
        text.is_in(GRAPH_CAPTURE_APIS) | text.str.contains(CAPTURE_ANNOTATION).fill_null(False)
    )
    if capture_names.len() == 0 or steps.height == 0:
        return ()
    starts = events.filter((pl.col("ph") == "X") & pl.col("name").is_in(capture_names.implode()))["ts"]
    found = steps.join(pl.DataFrame({"at": starts}), how="cross").filter(
        (pl.col("at") >= pl.col("ts")) & (pl.col("at") < pl.col("end"))
    )
    return tuple(sorted(set(found["step"].to_list())))


def _below_peak(steps: pl.DataFrame) -> tuple[int, ...]:
    """Serving steps whose annotation says fewer requests than the peak's band."""
    requests = [requests_of(name) if isinstance(name, str) else None for name in steps["name"].to_list()]
    known = [r for r in requests if r is not None]
    if not known or len(known) != len(requests):
        return ()
    peak = max(known)
    floor = peak - max(1.0, PEAK_SHARE * peak)
    return tuple(step for step, count in zip(steps["step"].to_list(), known, strict=True) if count < floor)


def _warm_up(steps: pl.DataFrame) -> tuple[int, ...]:
    """The leading steps longer than WARM_UP_FACTOR × the median step."""
    if steps.height < 2:
        return ()
    median = steps["dur"].median()
    if not isinstance(median, float) or median <= 0:
        return ()
    warm: list[int] = []
    for step, dur in steps.select("step", "dur").iter_rows():
        if dur <= WARM_UP_FACTOR * median:
            break
        warm.append(step)
    return tuple(warm)
