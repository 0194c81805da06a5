"""Every column of every registered table has one declaration (issue 39): its dtype, unit, label,
importance and meaning; a table or column without one is named with where its line goes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from htatui.analysis.core.columns import ColumnSpec, TableColumns, derived_label, specs_for
from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import VIEWS, Table, View, column_problems, frame_of
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"
ROUTES = [(view, table) for view in VIEWS for table in view.tables]
VARIANTS: dict[str, list[dict[str, Any]]] = {"ops": [{"flops": True}, {"flops": True, "group_by": "shape"}]}
"""Knob values that add columns: each is made too."""


@pytest.fixture(scope="module")
def demo() -> TraceSet:
    return load_traces([DEMO], use_cache=False, max_workers=1)


def _problems(view: View[Any], table: Table[Any], traces: TraceSet) -> list[str]:
    problems = []
    for compat in (False, True):
        for knobs in [{}, *VARIANTS.get(view.id, [])]:
            options = view.options(scope=Scope(hta_compat=compat), **knobs)
            frame, _ = frame_of(table.compute(traces, options))
            problems += column_problems(view, table, frame)
    return sorted(set(problems))


@pytest.mark.parametrize(("view", "table"), ROUTES, ids=[f"{v.id}:{t.name}" for v, t in ROUTES])
def test_every_column_of_every_table_has_a_spec(view: View[Any], table: Table[Any], demo: TraceSet) -> None:
    assert _problems(view, table, demo) == []


@pytest.mark.parametrize("folder", ["h100_resnet_eager", "cupti_profiler"])
def test_columns_only_real_recordings_fill_have_specs(folder: str, load_shared: Any) -> None:
    """Shapes (ops --group-by shape --flops: the performance model's columns) and CUPTI counters."""
    traces = load_shared(folder)
    problems = [
        p for view in VIEWS if view.id in ("ops", "cupti") for t in view.tables for p in _problems(view, t, traces)
    ]
    assert problems == []


def test_a_missing_spec_says_where_its_line_goes() -> None:
    view = next(v for v in VIEWS if v.id == "temporal")
    frame = pl.DataFrame({"rank": [0], "idle_us": [1.0], "flag": ["above roof"]}, schema_overrides={"rank": pl.Int32})
    [problem] = column_problems(view, view.main, frame)
    assert "temporal: column 'flag' (String) has no ColumnSpec" in problem
    assert "ColumnSpec('flag', pl.String()" in problem and "htatui.analysis.views.temporal" in problem
    bare = dataclasses.replace(view.main, columns=None)
    [problem] = column_problems(view, bare, frame)
    assert "no column specification" in problem and "columns=" in problem
    retyped = frame.with_columns(pl.col("idle_us").cast(pl.Int64))
    assert column_problems(view, view.main, retyped) == [
        "temporal: column 'idle_us' is Int64 but its ColumnSpec says Float64",
        "temporal: column 'flag' (String) has no ColumnSpec: add ColumnSpec('flag', pl.String(), "
        '"<what it means>") to its TableColumns (htatui.analysis.views.temporal)',
    ]


def test_every_spec_says_what_its_column_means() -> None:
    for view in VIEWS:
        for table in view.tables:
            assert table.columns is not None
            for spec in table.columns.specs:
                assert len(spec.meaning.split()) >= 2, f"{view.id} --{table.name}: {spec.name} has no meaning"


def test_a_label_keeps_the_unit_and_a_pattern_labels_each_column() -> None:
    assert derived_label("non_compute_us") == "non-comp µs"
    assert derived_label("idle_pct") == "idle %"
    assert derived_label("memory_bw_gbps") == "memory bw GB/s"
    assert derived_label("calls_last") == "calls last"
    phases = TableColumns(ColumnSpec("rank", pl.Int32(), "the rank", "id"), ColumnSpec("*_us", pl.Float64(), "a phase"))
    frame = pl.DataFrame(schema={"rank": pl.Int32(), "forward_us": pl.Float64(), "x": pl.Utf8()})
    specs = specs_for(frame, phases)
    assert [s.header() for s in specs] == ["rank", "forward µs", "x"]
    assert [s.importance for s in specs] == ["id", "normal", "normal"]
    with pytest.raises(ValueError, match="declared twice: rank"):
        TableColumns(phases.specs[0], phases.specs[0])


def test_report_help_for_a_view_lists_its_columns_and_marks_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    from htatui.cli.main import main

    with pytest.raises(SystemExit):
        main(["report", "--view", "stragglers", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Columns (* marks the answer): rank, is_straggler, steps, delay_us*, delay_pct" in text
    assert "htatui query --tables stragglers_per_step says what each means" in text
