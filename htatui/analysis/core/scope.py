"""The scope every number obeys: which ranks, which ProfilerSteps, and HTA's rules or ours.

A `Scope` is made once, from the command line (`--ranks`, `--steps`, `--hta-compat`) or the
app's pickers, and handed to every view; headers, `report` titles and the diff describe it with
`describe`. docs/semantics.md ("Scope") states the rules; in short, outside compat mode:

* `--steps default` keeps every step but the last when a rank has two or more (the profiler's
  last step is usually cut short), the one step when it has one, and the whole trace when it has
  none; `--steps all` is the whole trace; `--steps 3` or `--steps 2-4` those steps;
  `--steps steady` the default's without warm-up and graph capture (`steady.py`).
* Steps are the ProfilerStep ranges, or where a rank has none a serving engine's iteration
  annotations or a user's `--steps-from` ranges (`trace/step_sources.py`); headers name the source.
* A step holds the host rows that start inside its host ProfilerStep span and the device rows
  those rows launched. GPU work whose launch is not in the trace (queued before the profiler's
  host side started) belongs to no step: any step scope leaves it out, whatever the step count.

`--hta-compat` keeps HTA 0.6.1's own rules (`filter_last_step` below): its last-step cutoff, the
GPU-side ProfilerStep copies counted as steps, and nothing filtered with fewer than two steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.steady import Reasons, steady_steps
from htatui.trace.step_sources import PROFILER_STEPS, spans_of, step_source, steps_by_start

StepsKind = Literal["default", "all", "some", "steady"]


@dataclass(frozen=True)
class Steps:
    """Which steps count: the default (all but the last), all (the whole trace), some, or the steady state."""

    kind: StepsKind = "default"
    runs: tuple[tuple[int, int], ...] = ()
    """With kind "some": inclusive (first, last) runs of step numbers, e.g. ((2, 4), (7, 7))."""

    @classmethod
    def parse(cls, text: str) -> Steps:
        """'default', 'all', or step numbers and runs such as '3', '2-4' or '2-4,7'; ValueError otherwise."""
        value = text.strip().lower()
        # `htatui diff` spelled the default "common" (the steps both sides count).
        if value in ("", "default", "common"):
            return cls()
        if value == "all":
            return cls("all")
        if value == "steady":
            return cls("steady")
        runs = []
        for part in value.split(","):
            first, sep, last = part.strip().partition("-")
            try:
                low = int(first)
                high = int(last) if sep else low
            except ValueError:
                expected = "default, all, steady, or step numbers like 3, 2-4 or 2-4,7"
                raise ValueError(f"--steps: expected {expected}; got {text!r}") from None
            if low < 0 or high < low:
                raise ValueError(f"--steps: {part.strip()!r} is not a run of step numbers (N-M with N ≤ M)")
            runs.append((low, high))
        return cls("some", tuple(sorted(runs)))

    @classmethod
    def of(cls, numbers: Iterable[int]) -> Steps:
        """Exactly these step numbers (a diff side's chosen steps)."""
        return cls.parse(format_ranges(numbers, separator=",", empty="all"))

    def __str__(self) -> str:
        if self.kind != "some":
            return self.kind
        return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in self.runs)

    def holds(self, step: int) -> bool:
        return any(low <= step <= high for low, high in self.runs)


@dataclass(frozen=True)
class Scope:
    """Ranks (None = all), steps, whether HTA 0.6.1's rules and quirks apply, and the user's rules."""

    ranks: tuple[int, ...] | None = None
    steps: Steps = field(default_factory=Steps)
    hta_compat: bool = False
    job_steps: tuple[int, ...] | None = None
    """The steps every rank of the job has among those `steps` chose on it (`common_steps`), set
    once for the job when the ranks' own choices differ (a rank one step short); None: no rank's
    choice is cut. Each rank counts only these, so all are measured over the same steps."""
    rules: Rules = SHIPPED_RULES
    """The user's rule files the numbers are made under (`core.rules`), chosen once by the face."""

    def with_ranks(self, ranks: tuple[int, ...] | None) -> Scope:
        return replace(self, ranks=ranks)

    @property
    def is_default(self) -> bool:
        """Default steps and mode under the shipped rules (the rank choice aside): what a dataset's
        summary and a trace folder's cross-rank tables store."""
        return self.steps == Steps() and not self.hta_compat and self.job_steps is None and self.rules == SHIPPED_RULES


@dataclass(frozen=True)
class RankSteps:
    """How the scope's steps fall on one rank."""

    available: tuple[int, ...]
    """The rank's ProfilerStep numbers, in order of number."""
    used: tuple[int, ...]
    """The steps whose work the numbers count (every step with `--steps all`)."""
    left_out: tuple[int, ...]
    """Steps of the rank the scope leaves out."""
    whole_trace: bool
    """No step filter: rows outside every step count too (`--steps all`, or no steps at all)."""
    gpu_copy_cutoff: bool = False
    """HTA's rule (compat) cuts at the GPU-side copy of the last step, which starts after the host
    step: most of the "left out" step is kept, as HTA keeps it."""
    not_common: tuple[int, ...] = ()
    """Steps the scope chose on this rank that another rank lacks (`Scope.job_steps`): left out."""
    source: str | None = PROFILER_STEPS.label
    """Where the rank's steps come from (`StepSource.label`): ProfilerStep, a framework's
    annotations or the user's regex; None when it has no steps."""
    reasons: Reasons = ()
    """With `--steps steady`: why steps were left out, e.g. (("warm-up", (1, 2)),)."""

    @property
    def own(self) -> tuple[int, ...]:
        """The steps the scope chose on this rank alone, before the job's common steps cut them."""
        return tuple(sorted((*self.used, *self.not_common)))


def rank_steps(events: pl.DataFrame, scope: Scope) -> RankSteps:
    """The scope's steps on a rank whose events (ph, cat, name, ts, end) are given."""
    source = step_source(events, with_gpu_copies=scope.hta_compat)
    spans = spans_of(events, source, with_gpu_copies=scope.hta_compat, with_names=scope.steps.kind == "steady")
    label = source.label if source is not None else None
    job_steps = None if scope.hta_compat else scope.job_steps
    chosen = choose_steps(steps_by_start(spans), scope.steps, job_steps, source=label)
    if scope.steps.kind == "steady" and chosen.used:
        used, reasons = steady_steps(events, spans, chosen.used)
        left_out = tuple(s for s in chosen.available if s not in used)
        return replace(chosen, used=used, left_out=left_out, reasons=(*reasons, *_cut_short(chosen)))
    if scope.hta_compat and scope.steps.kind == "default" and chosen.left_out:
        host_start = spans_of(events, source)["ts"].max()
        if host_start is not None and spans["ts"].max() > host_start:  # type: ignore[operator]
            return replace(chosen, gpu_copy_cutoff=True)
    return chosen


def _cut_short(chosen: RankSteps) -> Reasons:
    """The default's left-out step (the last, usually cut short), as a steady scope's reason."""
    return (("last step", chosen.left_out),) if chosen.left_out else ()


def choose_steps(
    by_start: Sequence[int],
    steps: Steps,
    job_steps: Sequence[int] | None = None,
    *,
    source: str | None = PROFILER_STEPS.label,
) -> RankSteps:
    """How `steps` fall on a rank whose steps are `by_start` (their numbers, by start time), cut to
    the job's common steps when it has some (`Scope.job_steps`).

    A steady scope starts from the default's steps (`rank_steps` then leaves out warm-up and capture)."""
    available = tuple(sorted(set(by_start)))
    if not available:
        source = None
    if steps.kind == "all" or not available:
        return RankSteps(available, available, (), True, source=source)
    if steps.kind == "some":
        used = tuple(s for s in available if steps.holds(s))
    elif len(available) >= 2:
        last = by_start[-1]
        used = tuple(s for s in available if s != last)
    else:
        used = available
    not_common: tuple[int, ...] = ()
    if job_steps is not None:
        not_common = tuple(s for s in used if s not in job_steps)
        used = tuple(s for s in used if s in job_steps)
    return RankSteps(
        available, used, tuple(s for s in available if s not in used), False, not_common=not_common, source=source
    )


def common_steps(own: Iterable[RankSteps]) -> tuple[int, ...] | None:
    """The job's steps when the ranks' own choices differ: those every rank with steps chose.

    None when nothing needs cutting (one rank, equal choices, the whole trace) or when the ranks
    share no chosen step (numbered apart): then each keeps its own and `check` names it.
    """
    chosen = [set(r.used) for r in own if r.available and not r.whole_trace]
    if len(chosen) < 2 or all(c == chosen[0] for c in chosen):
        return None
    common = set.intersection(*chosen)
    return tuple(sorted(common)) if common else None


def ragged(steps_by_rank: dict[int, RankSteps]) -> dict[int, tuple[int, ...]]:
    """Ranks without a step the scope chose on another rank, and those steps (a rank one step short)."""
    owns = {rank: set(r.own) for rank, r in steps_by_rank.items() if r.available and not r.whole_trace}
    every = set().union(*owns.values()) if owns else set()
    missing = {rank: tuple(sorted(every - own)) for rank, own in owns.items()}
    return {rank: steps for rank, steps in missing.items() if steps}


def ragged_note(steps_by_rank: dict[int, RankSteps]) -> str | None:
    """One sentence for the cross-rank views: which ranks lack which steps, and what is measured."""
    missing = ragged(steps_by_rank)
    if not missing:
        return None
    used = sorted({s for r in steps_by_rank.values() for s in r.used})
    lacks = "; ".join(
        f"rank {rank} has no step {format_ranges(steps, separator=',')} to count" for rank, steps in missing.items()
    )
    if not used or len({r.used for r in steps_by_rank.values() if r.available}) > 1:
        return f"{lacks} (the other ranks do), and the ranks share no step: each is measured over its own"
    counted = f"step{'s' if len(used) > 1 else ''} {format_ranges(used, separator=',')}"
    return f"{lacks} (the other ranks do): every rank is measured over {counted}"


def scope_mask(events: pl.DataFrame, scope: Scope) -> tuple[pl.Series, RankSteps]:
    """Which complete (ph X) rows of one rank the scope keeps, and its steps there.

    `events` needs ph, cat, name, stream, correlation, ts, end, iteration.
    """
    steps = rank_steps(events, scope)
    if scope.hta_compat and scope.steps.kind != "some":
        keep = hta.last_step_mask(events, include_last_step=scope.steps.kind == "all")
    else:
        keep = (pl.col("ph") == "X") & in_steps(steps)
    return events.select(keep=keep.fill_null(False))["keep"], steps


def in_steps(steps: RankSteps) -> pl.Expr:
    """The rows of a rank that its scope's steps hold (by the `iteration` the loader gave each row)."""
    if steps.whole_trace:
        return pl.lit(True)
    return pl.col("iteration").is_in(pl.Series(steps.used, dtype=pl.Int64).implode()).fill_null(False)


def host_rows_mask(events: pl.DataFrame, scope: Scope, steps: RankSteps) -> pl.Expr:
    """Which of a rank's host rows of any phase (instants too: `[memory]` events) the scope keeps:
    those of its steps (by the `iteration` the loader gave them), or HTA's cut-off in compat mode.

    `events` needs ph, cat, name, ts, end (for the cut-off).
    """
    if scope.hta_compat and scope.steps.kind != "some":
        cutoff = hta.last_step_cutoff(events, include_last_step=scope.steps.kind == "all")
        return pl.lit(True) if cutoff is None else cutoff
    return in_steps(steps)


def describe(steps_by_rank: dict[int, RankSteps], scope: Scope) -> str:
    """'steps 2-3 (last step 4 left out)', 'all steps 2-4 (whole trace)', 'whole trace (no ProfilerStep)'…;
    a source other than ProfilerStep is named after the steps ('steps 1-3 from SGLang `step[…]`
    annotations (last step 4 left out)'), where a narrow header still shows it."""
    if not steps_by_rank:
        return "no ranks"
    sources = sorted({str(r.source) for r in steps_by_rank.values() if r.source not in (None, PROFILER_STEPS.label)})
    return _describe_steps(steps_by_rank, scope, f" from {' and '.join(sources)}" if sources else "")


def _describe_steps(steps_by_rank: dict[int, RankSteps], scope: Scope, source: str) -> str:
    used = sorted({s for r in steps_by_rank.values() for s in r.used})
    not_common = sorted({s for r in steps_by_rank.values() for s in r.not_common} - set(used))
    left_out = sorted({s for r in steps_by_rank.values() for s in r.left_out} - set(used) - set(not_common))
    varies = len({r.used for r in steps_by_rank.values()}) > 1
    whole = all(r.whole_trace for r in steps_by_rank.values())
    if whole and not used:
        return "whole trace (no ProfilerStep or iteration annotation)"
    if not used:
        why = _steady_reasons(steps_by_rank) if scope.steps.kind == "steady" else ""
        available = format_ranges(_available(steps_by_rank))
        return f"no step of {scope.steps} on these ranks (steps {available}{source}{why})"
    if scope.steps.kind == "steady":
        text = f"steady step{'s' if len(used) > 1 else ''} {format_ranges(used, separator=',')}{source}"
        return text + (" (varies by rank)" if varies else "") + _steady_reasons(steps_by_rank)
    text = f"step{'s' if len(used) > 1 else ''} {format_ranges(used, separator=',')}{source}"
    if varies:
        text += " (varies by rank)"
    if whole:
        return f"all {text} (whole trace)"
    outs = []
    if left_out:
        what = "last step" if scope.steps.kind == "default" else "step" + ("s" if len(left_out) > 1 else "")
        outs.append(f"{what} {format_ranges(left_out, separator=',')} left out")
    if not_common:
        outs.append(f"step {format_ranges(not_common, separator=',')} left out: not every rank has it")
    if outs:
        text += f" ({'; '.join(outs)})"
    if any(r.gpu_copy_cutoff for r in steps_by_rank.values()):
        text += "; HTA cuts at the last step's GPU-side copy, so most of that step counts"
    return text


def _steady_reasons(steps_by_rank: dict[int, RankSteps]) -> str:
    """' (left out: warm-up 1-2, graph capture 3, last step 9)', over every rank."""
    found: dict[str, set[int]] = {}
    for rank_steps in steps_by_rank.values():
        for why, steps in rank_steps.reasons:
            found.setdefault(why, set()).update(steps)
    if not found:
        return ""
    return (
        " (left out: " + ", ".join(f"{why} {format_ranges(sorted(s), separator=',')}" for why, s in found.items()) + ")"
    )


def _available(steps_by_rank: dict[int, RankSteps]) -> list[int]:
    return sorted({s for r in steps_by_rank.values() for s in r.available})


def last_complete_step(chosen: RankSteps, default: RankSteps) -> int | None:
    """The last step `chosen` counts that the profiler did not cut short (None when it counts none).

    `default`: the rank's steps under the default scope, which leaves out the step that started
    last when there are two or more (the one the profiler cuts short); so `--steps all` gives the
    step before that one, and a rank with one step gives that step.
    """
    complete = [step for step in chosen.used if step in default.used]
    if complete:
        return complete[-1]
    return chosen.used[-1] if chosen.used else None
