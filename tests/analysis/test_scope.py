"""The scope: step parsing, which rows each step choice keeps, and that every face counts the same steps.

Hand-built traces, numbers derived in the comments; on the shared DDP job, the span of
`report --view temporal` is that of the steps `report --view steps` marks as used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.analysis.core.describe import describe_scope, missing_steps
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.scope import Scope, Steps, choose_steps, last_complete_step
from htatui.analysis.diff import summary as diff_summary
from htatui.analysis.diff.compare import DiffOptions, select_sides
from htatui.analysis.views import steps, temporal
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


def load(path: Path) -> TraceSet:
    return load_traces([path], use_cache=False, max_workers=1)


def test_steps_parse_and_print() -> None:
    assert Steps.parse("default") == Steps() == Steps.parse("") == Steps.parse("common")
    assert Steps.parse("all") == Steps("all")
    assert Steps.parse("3") == Steps("some", ((3, 3),))
    assert Steps.parse("2-4, 7") == Steps("some", ((2, 4), (7, 7)))
    assert str(Steps.parse("7,2-4")) == "2-4,7"
    assert Steps.of([5, 2, 3]) == Steps("some", ((2, 3), (5, 5)))
    for bad in ("two", "4-2", "-3", "1-x"):
        with pytest.raises(ValueError, match="--steps"):
            Steps.parse(bad)


def test_choose_steps_by_start_not_by_number() -> None:
    # Steps numbered 5, 6, 7 but run 7, 5, 6: the last to start (6) is the one left out.
    chosen = choose_steps([7, 5, 6], Steps())
    assert (chosen.available, chosen.used, chosen.left_out, chosen.whole_trace) == ((5, 6, 7), (5, 7), (6,), False)
    assert choose_steps([], Steps()).whole_trace
    assert choose_steps([5], Steps()).used == (5,)
    assert choose_steps([5, 6, 7], Steps("all")).whole_trace
    assert choose_steps([5, 6, 7], Steps.parse("6-9")).used == (6, 7)


def one_step_inference(tmp_path: Path, *, empty_step_after: bool) -> TraceSet:
    """GPU work queued before the profiler's host side started, then one ProfilerStep.

    kernel "early" [0, 40) has correlation 1, whose launch is not in the trace;
    ProfilerStep#1 [50, 150) launches kernel "k" [80, 100) (correlation 2 at 60).
    With `empty_step_after`, ProfilerStep#2 [150, 151) holds nothing.
    """
    events: list[dict[str, Any]] = [
        kernel("early", 0, 40, corr=1),
        step(1, 50, 100),
        runtime("cudaLaunchKernel", 60, 5, 2),
        kernel("k", 80, 20, corr=2),
    ]
    if empty_step_after:
        events.append(step(2, 150, 1))
    folder = tmp_path / ("two" if empty_step_after else "one")
    return load(write_trace(folder / "rank-0.json", events, rank=0))


def test_an_empty_step_added_changes_no_number(tmp_path: Path) -> None:
    """One rule for GPU work with no launch in the trace: no step holds it, whatever the step count."""
    for empty_step_after in (False, True):
        traces = one_step_inference(tmp_path, empty_step_after=empty_step_after)
        frame = temporal.compute(traces, temporal.TemporalOptions())
        # Only "k" is in step 1: span 20, busy 20.
        assert frame.select("span_us", "idle_us", "compute_us").row(0) == (20.0, 0.0, 20.0), empty_step_after
        # The whole trace counts "early" too: [0, 100), busy 40 + 20.
        whole = temporal.compute(traces, temporal.TemporalOptions(Scope(steps=Steps("all"))))
        assert whole.select("span_us", "idle_us").row(0) == (100.0, 40.0)


def test_steps_view_and_every_view_count_the_same_steps(tmp_path: Path) -> None:
    """Host rows by their start in a host step span, device rows by their launch; GPU-side step copies are not steps.

    ProfilerStep#1 [0, 100), #2 [100, 200), #3 [200, 300); in each step a launch at 10 µs into it
    and its kernel 50-70 µs into it, on the GPU. The GPU-side copy of step 3 ([250, 270), as
    Kineto writes gpu_user_annotation) must not move the last step's start to 250.
    """
    events: list[dict[str, Any]] = []
    for n in (1, 2, 3):
        start = 100.0 * (n - 1)
        events += [step(n, start, 100), runtime("cudaLaunchKernel", start + 10, 5, n)]
        events.append(kernel(f"k{n}", start + 50, 20, corr=n))
    events.append(
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 0, "tid": 7, "ts": 250, "dur": 20}
    )
    traces = load(write_trace(tmp_path / "rank-0.json", events, rank=0))
    used = steps.compute(traces, steps.StepsOptions()).filter("used")["step"].to_list()
    assert used == [1, 2]
    span = temporal.compute(traces, temporal.TemporalOptions())["span_us"][0]
    assert span == 120.0  # k1 starts at 50, k2 ends at 170
    assert temporal.compute(traces, temporal.TemporalOptions(Scope(steps=Steps("all"))))["span_us"][0] == 220.0
    assert temporal.compute(traces, temporal.TemporalOptions(Scope(steps=Steps.parse("2"))))["span_us"][0] == 20.0
    # HTA's rule: its cut-off is the latest ProfilerStep row, the GPU-side copy at 250, so the
    # launch of k3 at 210 is kept and the span runs to k3's end at 270 ([HTA quirk]).
    compat = temporal.compute(traces, temporal.TemporalOptions(Scope(hta_compat=True)))
    assert compat["span_us"][0] == 220.0
    assert describe_scope(traces, CommonOptions(Scope(hta_compat=True))) == (
        "rank 0 · steps 1-2 (last step 3 left out); HTA cuts at the last step's GPU-side copy, "
        "so most of that step counts · HTA 0.6.1 rules"
    )
    options = CommonOptions()
    assert describe_scope(traces, options) == "rank 0 · steps 1-2 (last step 3 left out)"
    assert describe_scope(traces, CommonOptions(Scope(steps=Steps("all")))) == "rank 0 · all steps 1-3 (whole trace)"
    assert missing_steps(traces, CommonOptions(Scope(steps=Steps.parse("9")))) == (
        "--steps 9: no such step on the chosen ranks (steps 1-3)"
    )
    assert prepare(traces, options).steps_used == {0: [1, 2]}


def test_ddp_temporal_span_is_the_span_of_the_used_steps(load_shared: Any) -> None:
    """h100_ddp_gloo_2rank: steps 2-3 used, 4 left out. Rank 0's host steps run 2,915.81 →
    86,826.59 µs (43,588.03 + 40,281.22 µs and a 42 µs gap); its GPU work in them spans
    83,619.77 µs (the GPU starts 257 µs after the host's step 2 and ends 50 µs before step 3
    ends). --steps all: the whole GPU span, 123,115.62 µs, step 4 included."""
    traces = load_shared("h100_ddp_gloo_2rank")
    step_table = steps.compute(traces, steps.StepsOptions())
    spans = temporal.compute(traces, temporal.TemporalOptions())
    for rank in traces.rank_ids:
        used = step_table.filter((pl.col("rank") == rank) & pl.col("used"))
        host = float(used.select((pl.col("start_us") + pl.col("dur_us")).max() - pl.col("start_us").min()).item())
        gpu = float(spans.filter(pl.col("rank") == rank)["span_us"][0])
        assert 0.95 * host <= gpu <= host, rank
    assert spans["span_us"][0] == pytest.approx(83_619.77, abs=0.01)
    whole = temporal.compute(traces, temporal.TemporalOptions(Scope(steps=Steps("all"))))
    assert whole["span_us"][0] == pytest.approx(123_115.62, abs=0.01)
    # The diff of the job with itself compares the same steps with the same numbers.
    selection = select_sides(traces, traces, DiffOptions())
    assert selection.base.steps == (2, 3)
    summary = diff_summary.summary(traces, traces, DiffOptions())
    span = summary.filter((pl.col("view") == "temporal") & (pl.col("metric") == "span_us"))
    assert span["base"][0] == pytest.approx(spans["span_us"].mean())


def test_the_last_complete_step_is_the_last_one_counted_that_the_default_keeps() -> None:
    # Run 7, 5, 6: 6 started last (cut short), so the last complete step is 7, whichever steps count.
    default = choose_steps([7, 5, 6], Steps())
    assert last_complete_step(default, default) == 7
    assert last_complete_step(choose_steps([7, 5, 6], Steps("all")), default) == 7
    assert last_complete_step(choose_steps([7, 5, 6], Steps.parse("5-6")), default) == 5
    # Only the cut-short step counted: that one; one step: it; no step: none.
    assert last_complete_step(choose_steps([7, 5, 6], Steps.parse("6")), default) == 6
    assert last_complete_step(choose_steps([5], Steps()), choose_steps([5], Steps())) == 5
    assert last_complete_step(choose_steps([], Steps()), choose_steps([], Steps())) is None
