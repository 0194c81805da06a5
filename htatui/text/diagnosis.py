"""The Diagnosis findings as text: the step line and one finding in full, the same on the page
and in `htatui diagnose`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from htatui.analysis.diagnosis.finding import NOT_MODELLED
from htatui.text.numbers import cell_text


def step_line(summary: pl.DataFrame) -> str:
    """'step 16,110.42 µs · ranks 4 · steps 10-13 · bound by: gpu_compute_bound 88 %, cpu_bound 6 % (…)';
    the GPU's busy share stands in when the step model has no graph."""
    if summary.height == 0:
        return ""
    row = summary.row(0, named=True)
    parts = [f"step {cell_text(row['step_us'])} µs", f"ranks {row['ranks']}"]
    if row["steps"]:
        parts.append(f"steps {row['steps']}")
    if row["gpu_busy_pct"] is not None and row["bound_by"] == NOT_MODELLED:
        parts.append(f"GPU busy {cell_text(row['gpu_busy_pct'])} %")  # what the step model would say
    parts.append(f"bound by: {row['bound_by']}")
    return " · ".join(parts)


def saving_text(row: Mapping[str, Any]) -> str:
    """'saves 3,033.32 µs a step (18.80 %): rank 2 at the median's pace', or the rule's estimate."""
    if row["saved_us"] is not None:
        return f"saves {cell_text(row['saved_us'])} µs a step ({cell_text(row['saved_pct'])} %): {row['what_if']}"
    estimate = f"{cell_text(row['estimate_us'])} µs a step ({cell_text(row['estimate_pct'])} %)"
    return f"{row['what_if']}; the rule's estimate {estimate}"


def finding_lines(row: Mapping[str, Any], page_title: str) -> list[str]:
    """A finding in full, a line a part: where, evidence, the change, its saving, where to see it."""
    shown = f"{page_title} › {row['table']}" if row["table"] else page_title
    return [
        f"where: {row['where']}",
        f"evidence: {row['evidence']}",
        f"change: {row['change']}",
        f"saving: {saving_text(row)}",
        f"see: {shown} {row['row']}",
    ]
