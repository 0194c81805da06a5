"""What to fix first: rules over the registered views, each finding with the step time its fix
would save (docs/diagnosis/README.md).

Each rule (ranks.py, host.py, calls.py, gpu.py, memory.py; listed in rules.py) reads registered
tables through the registry's reader, so its numbers are the ones the named page shows, and
yields findings: what, where, the evidence and its page and row,
the change to make, and the what-if that models it; `saving.py` asks the step model's replay
what each what-if saves. Findings with a modelled saving come first, by the saving; the rest
after, by the rule's own estimate (the time their change acts on). Thresholds are data
(`rules.toml`, extended by the user's files: `settings.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis.change import in_words
from htatui.analysis.diagnosis.context import Context, TableReader
from htatui.analysis.diagnosis.finding import FINDING_COLUMNS, FINDING_SPEC, NOT_MODELLED, Finding
from htatui.analysis.diagnosis.rules import RULES
from htatui.analysis.diagnosis.saving import Predicted, predicted_savings, step_bounds
from htatui.analysis.diagnosis.settings import DiagnosisRulesError
from htatui.analysis.diagnosis.settings import settings as rule_settings
from htatui.trace.model import TraceSet

__all__ = [
    "FINDING_COLUMNS",
    "FINDING_SPEC",
    "SUMMARY_COLUMNS",
    "SUMMARY_SPEC",
    "DiagnosisOptions",
    "DiagnosisRulesError",
    "findings",
    "summary",
]

SUMMARY_SPEC = TableColumns(
    ColumnSpec("step_us", pl.Float64(), "the scope's mean step (each rank's mean, averaged)", "key"),
    ColumnSpec("ranks", pl.Int64(), "ranks in the scope"),
    ColumnSpec("steps", pl.Utf8(), "steps in the scope"),
    ColumnSpec("gpu_busy_pct", pl.Float64(), "the GPU's busy share of the step", "key"),
    ColumnSpec("bound_by", pl.Utf8(), "what bounds the step (the step model's summary, or not modelled)", "key"),
    ColumnSpec("findings", pl.Int64(), "findings listed"),
    ColumnSpec("modelled", pl.Int64(), "findings with a modelled saving"),
)
SUMMARY_COLUMNS = SUMMARY_SPEC.schema
"""One row: the scope's mean step (each rank's mean, averaged), its ranks and steps, the GPU's busy
share, what bounds the step (the step model's summary, or "not modelled"), and how many findings
there are and how many of them have a modelled saving."""

COMPAT_NOTE = "the diagnosis reads htatui's own analyses; --hta-compat reproduces HTA 0.6.1, which has none"


@dataclass(frozen=True)
class DiagnosisOptions(CommonOptions):
    """The scope; the rules' thresholds are in rules.toml and the user's files (the scope's rules:
    --diagnosis-rules)."""


@dataclass(frozen=True)
class Diagnosis:
    """The findings table and the summary row."""

    findings: pl.DataFrame
    summary: pl.DataFrame
    message: str | None


def diagnose(traces: TraceSet, options: DiagnosisOptions, read: TableReader) -> Diagnosis:
    """Every enabled rule over the scope, the findings ranked; made once per job, scope and rules."""
    key = ("diagnosis.diagnose", *selection_key(traces, options))
    return memoised(traces, key, lambda: _diagnose(traces, options.scope, read))


def _diagnose(traces: TraceSet, scope: Scope, read: TableReader) -> Diagnosis:
    if scope.hta_compat:
        empty = pl.DataFrame(schema=FINDING_COLUMNS)
        return Diagnosis(empty, pl.DataFrame(schema=SUMMARY_COLUMNS), COMPAT_NOTE)
    ctx = Context(traces, scope, read, rule_settings(scope.rules))
    found = [finding for rule, find in RULES.items() if ctx.settings.enabled(rule) for finding in find(ctx)]
    changes = [f.what_if for f in found if f.what_if is not None]
    steps = ctx.steps()["step"].drop_nulls().n_unique()
    replayed = iter(predicted_savings(traces, scope, changes, steps))
    predicted = [None if f.what_if is None else next(replayed) for f in found]
    table = _ranked(found, predicted, ctx.step_us())
    return Diagnosis(table, _summary(ctx, table, step_bounds(traces, scope)), None if table.height else "nothing found")


def _ranked(found: list[Finding], predicted: list[Predicted | None], step_us: float) -> pl.DataFrame:
    """FINDING_COLUMNS, modelled savings first by the saving, then the rest by the most they could save."""
    rows = []
    for finding, saving in zip(found, predicted, strict=True):
        rows.append(
            {
                "rule": finding.rule,
                "what": finding.what,
                "saved_pct": None if saving is None else saving.saved_pct,
                "saved_us": None if saving is None else saving.saved_us,
                "estimate_pct": 100.0 * finding.estimate_us / step_us if step_us > 0 else 0.0,
                "estimate_us": finding.estimate_us,
                "what_if": NOT_MODELLED if saving is None or finding.what_if is None else in_words(finding.what_if),
                "where": finding.where,
                "evidence": finding.evidence,
                "change": finding.change,
                "page": finding.see.page,
                "table": finding.see.table_text,
                "row": finding.see.row_text,
                "rank": finding.rank,
            }
        )
    table = pl.DataFrame(rows, schema=FINDING_COLUMNS)
    return table.sort(
        [pl.col("saved_us").is_null(), "saved_us", "estimate_us", "rule"],
        descending=[False, True, True, False],
        nulls_last=True,
        maintain_order=True,
    )


def _summary(ctx: Context, table: pl.DataFrame, bounds: str | None) -> pl.DataFrame:
    temporal = ctx.read("temporal")
    busy = temporal["compute_pct"] + temporal["non_compute_pct"] if temporal.height else pl.Series([], dtype=pl.Float64)
    steps = ctx.steps()["step"].drop_nulls().unique().sort().to_list()
    row = {
        "step_us": ctx.step_us(),
        "ranks": len(ctx.ranks),
        "steps": ctx.steps_text().removeprefix("steps ").removeprefix("step ") if steps else "",
        "gpu_busy_pct": float(busy.mean()) if busy.len() else None,  # type: ignore[arg-type]
        "bound_by": bounds or NOT_MODELLED,
        "findings": table.height,
        "modelled": int(table["saved_us"].is_not_null().sum()),
    }
    return pl.DataFrame([row], schema=SUMMARY_COLUMNS)


def findings(traces: TraceSet, options: DiagnosisOptions, read: TableReader) -> NotedTable:
    """What to fix first: each finding with the step time its fix would save (FINDING_COLUMNS)."""
    result = diagnose(traces, options, read)
    return NotedTable(result.findings, result.message)


def summary(traces: TraceSet, options: DiagnosisOptions, read: TableReader) -> NotedTable:
    """The step the findings are shares of: its mean time, ranks, steps and what bounds it."""
    result = diagnose(traces, options, read)
    return NotedTable(result.summary, result.message if result.summary.height == 0 else None)
