"""`:query`: SQL over the job's named tables (htatui query, docs/query.md) with the result as a table."""

from __future__ import annotations

import threading
from typing import ClassVar

import polars as pl
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from htatui.analysis.core.cancel import Cancelled, cancellable
from htatui.analysis.core.scope import Scope
from htatui.analysis.query import TABLES, QueryError, named_tables, result_columns, run_query
from htatui.trace import TraceSet
from htatui.tui.base.jobs import JobRunner
from htatui.tui.widgets.table import auto_columns
from htatui.tui.widgets.table_pane import TablePane

EXAMPLE = "SELECT name, COUNT(*) AS n, SUM(dur_us) AS gpu_us FROM kernels GROUP BY name ORDER BY gpu_us DESC"


class QueryScreen(ModalScreen[None], JobRunner[tuple[str, pl.DataFrame]]):
    """A SQL line over the job's tables for the app's scope; enter runs it, the result fills the table."""

    DEFAULT_CSS = """
    QueryScreen { align: center middle; }
    QueryScreen > Vertical {
        width: 100%; height: 100%; padding: 0 1;
        border: round $primary; background: $surface;
    }
    QueryScreen #hint { color: $foreground-muted; }
    QueryScreen #status { height: auto; }
    QueryScreen #status.-error { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="Close the query (a running one stops)", id="query.close"),
        Binding("ctrl+t", "focus_table", "Table", tooltip="Move to the result table", id="query.table"),
    ]

    def __init__(self, traces: TraceSet, scope: Scope, scope_text: str) -> None:
        super().__init__()
        self.traces = traces
        self.scope = scope
        self.scope_text = scope_text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Query · {self.scope_text}", id="title")
            yield Label(
                f"SQL over {len(TABLES)} tables: events, kernels, ops, steps, path, … (docs/query.md)", id="hint"
            )
            yield Input(placeholder=EXAMPLE, id="sql")
            yield Label("enter runs it · ctrl+t the table · esc closes", id="status")
            yield TablePane("Result", id="result")

    def on_mount(self) -> None:
        self.query_one("#result", TablePane).show(pl.DataFrame(), empty="No query run yet.")
        self.query_one("#sql", Input).focus()

    @on(Input.Submitted, "#sql")
    def run_sql(self, event: Input.Submitted) -> None:
        sql = event.value.strip() or EXAMPLE
        self._say(f"running… ({', '.join(named_tables(sql)) or 'no table named'})")
        traces, scope = self.traces, self.scope

        def work(cancel_event: threading.Event) -> tuple[str, pl.DataFrame]:
            with cancellable(cancel_event):
                return sql, run_query(traces, sql, scope)

        self.start_job("query", work, "query")

    def job_done(self, job: str, result: tuple[str, pl.DataFrame]) -> None:
        sql, frame = result
        declared = result_columns(frame, named_tables(sql))
        pane = self.query_one("#result", TablePane)
        pane.table.title = f"Result · {frame.height:,} rows"
        pane.show(frame, auto_columns(frame, declared=declared), empty="The query returned no rows.", sort=None)
        self._say(f"{frame.height:,} rows · {len(frame.columns)} columns · enter runs it again · esc closes")

    def job_failed(self, job: str, error: BaseException) -> None:
        if isinstance(error, Cancelled):
            self._say("cancelled")
            return
        text = str(error) if isinstance(error, QueryError) else f"{type(error).__name__}: {error}"
        self._say(text, error=True)
        self.notify(text, title="Query", severity="error", markup=False)

    def _say(self, text: str, *, error: bool = False) -> None:
        status = self.query_one("#status", Label)
        status.update(text)
        status.set_class(error, "-error")

    def action_focus_table(self) -> None:
        self.query_one("#result", TablePane).table.focus()

    def action_close(self) -> None:
        self.cancel_job("query")
        self.dismiss(None)
