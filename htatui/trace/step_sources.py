"""Where a rank's steps come from: ProfilerStep, a serving framework's iteration annotations, or a regex.

A training loop marks its steps with the profiler's `ProfilerStep#N` ranges. Serving engines call
no `prof.step()`: vLLM, SGLang, ATOM and xDiT mark each iteration of their scheduler with a
`user_annotation` of their own (`execute_32_context_0(…)_generation_32(…)`, `step[DECODE bs=32]`,
`decode[bs=64 tok=64]`, `execute_diffusion_1_1024x1024`). A rank's steps are, in this order:

1. the ranges a user's `--steps-from REGEX` names (the HTATUI_STEPS_FROM environment variable),
2. its host `ProfilerStep#N` ranges, numbered as the profiler numbered them,
3. else the annotations of the first framework below that the rank has, numbered 1, 2, … by start,
4. else none (the whole trace).

The loader gives each row its step (`frame.add_iterations`), the scope picks steps from the same
spans (`step_spans`), and every header names the source when it is not ProfilerStep.
docs/semantics.md ("Where steps come from") has the rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import polars as pl

from htatui.errors import HtatuiError
from htatui.trace.kineto import GPU_ANNOTATION, PROFILER_STEP, step_number

STEPS_FROM_ENV = "HTATUI_STEPS_FROM"
"""A user's step regex (`--steps-from`), read by the loader and the scope alike."""


@dataclass(frozen=True)
class StepSource:
    """Which host ranges are steps, and how they are numbered."""

    label: str
    """How headers name it: "ProfilerStep", "vLLM `execute_…` annotations"…"""
    pattern: str
    """A regex (polars syntax) that a step range's name matches."""
    numbered: bool = False
    """The name carries the step number (ProfilerStep#N); else steps are numbered 1, 2, … by start."""
    annotations_only: bool = True
    """Only `user_annotation` rows count (a framework's marks); a user's regex takes any host row."""

    @property
    def is_profiler_step(self) -> bool:
        return self.numbered


PROFILER_STEPS = StepSource("ProfilerStep", PROFILER_STEP.pattern, numbered=True, annotations_only=False)

FRAMEWORK_STEPS = (
    StepSource("vLLM `execute_…` annotations", r"^execute_(?:\d+_)?context_\d+\("),
    StepSource("SGLang `step[…]` annotations", r"^step\[(?:EXTEND|DECODE|MIXED|PREFILL|IDLE)\b"),
    StepSource("ATOM `prefill[…]`/`decode[…]` annotations", r"^(?:prefill|decode)\["),
    StepSource("xDiT `execute_diffusion_…` annotations", r"^execute_diffusion_\d+"),
)
"""Serving engines' iteration annotations, in the order TraceLens tries them (its
`ITERATION_PATTERNS`): the first one a rank has gives its steps."""

CAPTURE_ANNOTATION = r"^capture_\d+_"
"""A serving engine's graph-capture range (`capture_32_DECODE`): capture, not an iteration."""

_HOST_EXCLUDED = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "mtia_ccp_events", GPU_ANNOTATION)


class StepsFromError(HtatuiError, ValueError):
    """A `--steps-from` value that is not a usable regex; the message is one line."""


def check_steps_from(pattern: str) -> str:
    """`pattern` when polars can use it as a regex; StepsFromError otherwise."""
    if not pattern:
        raise StepsFromError("--steps-from: expected a regex naming the step ranges, got an empty one")
    try:
        pl.Series([""]).str.contains(pattern)
    except pl.exceptions.ComputeError:
        raise StepsFromError(f"--steps-from: {pattern!r} is not a valid regex") from None
    return pattern


def user_steps() -> StepSource | None:
    """The user's `--steps-from` source, when one is set."""
    pattern = os.environ.get(STEPS_FROM_ENV, "")
    if not pattern:
        return None
    return StepSource(f"`{pattern}` ranges", pattern, annotations_only=False)


def _rows(source: StepSource, names: pl.Series) -> pl.Expr:
    """The complete host rows of `source` whose name is one of `names` (the matching names)."""
    host = (pl.col("ph") == "X") & pl.col("name").is_in(names.implode())
    if source.annotations_only:
        return host & (pl.col("cat") == "user_annotation")
    return host & ~pl.col("cat").is_in(_HOST_EXCLUDED).fill_null(False)


def _matching(names: pl.Series, source: StepSource) -> pl.Series:
    return names.filter(names.cast(pl.Utf8).str.contains(source.pattern).fill_null(False))


def step_source(events: pl.DataFrame, *, with_gpu_copies: bool = False) -> StepSource | None:
    """The source of the steps of `events` (ph, cat, name): the user's, ProfilerStep, a framework's,
    or None. HTA's rules (`with_gpu_copies`) know ProfilerStep alone.

    The patterns run on the distinct names only."""
    names = events["name"].unique()
    candidates = [PROFILER_STEPS] if with_gpu_copies else [*filter(None, [user_steps()]), PROFILER_STEPS]
    if not with_gpu_copies and user_steps() is None:
        candidates.extend(FRAMEWORK_STEPS)
    for source in candidates:
        matched = _matching(names, source)
        if matched.len() and events.select(_rows(source, matched).any()).item():
            return source
    return None


def is_step_row(events: pl.DataFrame, source: StepSource | None, *, with_gpu_copies: bool = False) -> pl.Expr:
    """The step ranges of `source` among `events`' rows; HTA also counts ProfilerStep's GPU-side copies."""
    if source is None:
        return pl.lit(False)
    matched = _matching(events["name"].unique(), source)
    if with_gpu_copies:
        return (pl.col("ph") == "X") & pl.col("name").is_in(matched.implode())
    return _rows(source, matched)


def numbered(steps: pl.DataFrame, source: StepSource, *, by: list[str] | None = None) -> pl.Expr:
    """The step number of each step range of `steps` (sorted by start within `by`): from the name for
    ProfilerStep, else 1, 2, … by start."""
    if source.numbered:
        return step_number(pl.col("name").cast(pl.Utf8))
    position = pl.int_range(1, pl.len() + 1, dtype=pl.Int64)
    return position.over(by) if by else position


def steps_by_start(spans: pl.DataFrame) -> list[int]:
    """The step numbers of `step_spans` rows, each once, in the order the steps start."""
    return list(dict.fromkeys(spans["step"].to_list()))


def step_spans(events: pl.DataFrame, *, with_gpu_copies: bool = False) -> pl.DataFrame:
    """step, ts, end, dur of every step range, by start (and `rank` first when `events` has it),
    from the source `step_source` finds; HTA's rules (`with_gpu_copies`) count ProfilerStep's
    GPU-side copies too."""
    return spans_of(events, step_source(events, with_gpu_copies=with_gpu_copies), with_gpu_copies=with_gpu_copies)


def spans_of(
    events: pl.DataFrame, source: StepSource | None, *, with_gpu_copies: bool = False, with_names: bool = False
) -> pl.DataFrame:
    """`step_spans` of a known source (None: no steps); `with_names` adds each range's `name` (text)."""
    keys = ["rank"] if "rank" in events.columns else []
    dur = pl.col("dur") if "dur" in events.columns else pl.col("end") - pl.col("ts")
    rows = events.filter(is_step_row(events, source, with_gpu_copies=with_gpu_copies))
    ordered = rows.select(*keys, "name", ts="ts", end="end", dur=dur).sort([*keys, "ts"], maintain_order=True)
    number = pl.lit(None, pl.Int64) if source is None else numbered(ordered, source, by=keys or None)
    columns: list[pl.Expr | str] = [*keys, number.alias("step"), "ts", "end", "dur"]
    # A number past int64 (`ProfilerStep#99999999999999999999`) is no step.
    spans = ordered.select(*columns, *([pl.col("name").cast(pl.Utf8)] if with_names else []))
    return spans if source is None else spans.drop_nulls("step")


_REQUESTS = (
    re.compile(r"^execute_(?:\d+_)?context_(\d+).*?_generation_(\d+)"),
    re.compile(r"^(?:step|prefill|decode)\[\w*\s*bs=(\d+)"),
)


def requests_of(name: str) -> int | None:
    """How many requests a serving iteration annotation says it ran (vLLM: context + generation
    requests; SGLang and ATOM: `bs=`), None when it says none."""
    for pattern in _REQUESTS:
        match = pattern.match(name)
        if match:
            return sum(int(group) for group in match.groups())
    return None
