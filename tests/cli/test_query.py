"""`htatui query`: polars SQL over the job's named tables, each made for the scope (issue 38)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import polars as pl
import pytest
from cli_util import run_in_pty

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.query import TABLES, QueryError, named_tables, run_query
from htatui.analysis.registry import BY_ID, frame_of
from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"


@pytest.fixture(scope="module")
def demo() -> TraceSet:
    return load_traces([DEMO], use_cache=False, max_workers=1)


def test_a_join_of_kernels_and_ops_is_the_ops_tables_gpu_self_time(demo: TraceSet) -> None:
    """Each kernel's op (`op_index`) is the one key_averages charges it to: Σ per op name of the
    kernels it launched is the ops view's gpu_self_us, summed over ranks and kinds."""
    joined = run_query(
        demo,
        "SELECT o.name, SUM(k.dur_us) AS gpu_us FROM kernels k JOIN ops o "
        "ON k.rank = o.rank AND k.op_index = o.index GROUP BY o.name",
        Scope(),
    )
    view = frame_of(BY_ID["ops"].main.compute(demo, BY_ID["ops"].options()))[0]
    expected = view.group_by("name").agg(pl.col("gpu_self_us").sum()).filter(pl.col("gpu_self_us") > 0)
    got = dict(joined.iter_rows())
    assert len(got) == expected.height > 10
    for name, gpu_self_us in expected.iter_rows():
        assert got[name] == pytest.approx(gpu_self_us, rel=1e-9), name


def test_an_aggregate_per_step_is_the_temporal_views_span_of_that_step(demo: TraceSet) -> None:
    per_step = run_query(
        demo,
        "SELECT rank, step, MAX(end_us) - MIN(ts_us) AS span_us FROM kernels GROUP BY rank, step ORDER BY rank, step",
        Scope(),
    )
    assert sorted(set(per_step["step"].to_list())) == [10, 11, 12, 13]  # the default scope: the last step left out
    temporal = BY_ID["temporal"]
    for step in (10, 13):
        view = temporal.main.compute(demo, temporal.options(scope=Scope(steps=Steps.parse(str(step)))))
        mine = per_step.filter(pl.col("step") == step).select("rank", "span_us")
        assert mine["span_us"].to_list() == pytest.approx(frame_of(view)[0]["span_us"].to_list(), rel=1e-12)
        assert mine["rank"].to_list() == frame_of(view)[0]["rank"].to_list()


def test_the_scope_is_applied_to_every_table(demo: TraceSet) -> None:
    scope = Scope(ranks=(1, 3), steps=Steps.parse("11"))
    for table in ("events", "kernels", "ops", "temporal"):
        ranks = run_query(demo, f"SELECT DISTINCT rank FROM {table} ORDER BY rank", scope)
        assert ranks["rank"].to_list() == [1, 3], table
    steps = run_query(demo, "SELECT DISTINCT step FROM kernels", scope)
    assert steps["step"].to_list() == [11]


def test_only_the_tables_a_query_names_are_made() -> None:
    assert named_tables("SELECT * FROM kernels k JOIN ops o ON k.op_index = o.index") == ["kernels", "ops"]
    assert named_tables("SELECT 'temporal' AS t, name FROM \"idle_by_stream\"") == ["idle_by_stream"]
    assert set(named_tables("select * from PATH")) == {"path"}
    assert {"events", "kernels", "ops", "steps", "path", "critical_path_job_edges", "kernels_by_name"} <= set(TABLES)


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELEC 1", "sql parser error"),
        ("SELECT * FROM nosuch", "no table 'nosuch' (htatui query --tables lists the"),
        ("SELECT nosuch FROM steps", 'unable to find column "nosuch"'),
        ("   ", "the query is empty"),
    ],
)
def test_a_query_that_cannot_run_is_one_line_and_exit_2(
    sql: str, said: str, demo: TraceSet, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(QueryError, match=said.split("(")[0].rstrip()):
        run_query(demo, sql, Scope())
    assert main(["query", str(DEMO), sql]) == 2
    err = capsys.readouterr().err
    assert err.startswith("htatui: query: ") and said in err and err.count("\n") == 1


def test_csv_json_and_parquet_hold_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT rank, step, dur_us FROM steps ORDER BY rank, step"
    assert main(["query", str(DEMO), sql, "--format", "csv"]) == 0
    csv = capsys.readouterr().out
    assert csv.splitlines()[0] == "rank,step,dur_us" and len(csv.splitlines()) == 21
    assert main(["query", str(DEMO), sql, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 20 and set(rows[0]) == {"rank", "step", "dur_us"}
    out = tmp_path / "steps.parquet"
    assert main(["query", str(DEMO), sql, "--format", "parquet", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    back = pl.read_parquet(out)
    assert back["dur_us"].to_list() == pytest.approx([row["dur_us"] for row in rows], abs=5e-4)
    assert main(["query", str(DEMO), sql, "--format", "parquet", "-o", str(out)]) == 2
    assert "already exists (pass --force to overwrite)" in capsys.readouterr().err


def test_tables_lists_the_catalog_and_a_tables_columns(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["query", "--tables", "kernels"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "op_index" in text and "the index of the op (in ops) that launched it" in " ".join(text.split())


def test_a_huge_result_at_80_columns_fits_and_says_what_it_cut() -> None:
    started = time.perf_counter()
    text = run_in_pty(["query", str(DEMO), "SELECT * FROM events"])
    assert time.perf_counter() - started < 120
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    assert "query · " in lines[0] and "the first 200" in " ".join(text.split())
    assert len([line for line in lines if line.startswith("│")]) == 200
    assert "left out to fit 80 columns" in text and "(--wide shows all)" in " ".join(text.split())


def test_export_parquet_writes_every_table_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    command = ["export", "parquet", str(DEMO), "-o", str(tmp_path), "--only", "kernels,ops,temporal,path"]
    assert main(command) == 0
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == ["kernels.parquet", "ops.parquet", "path.parquet", "temporal.parquet"]
    kernels = pl.read_parquet(tmp_path / "kernels.parquet")
    assert kernels.columns == list(TABLES["kernels"].columns.names())
    capsys.readouterr()
    assert main(command) == 2
    assert "already exists (pass --force to overwrite)" in capsys.readouterr().err
    assert main([*command[:-1], "nosuch"]) == 2
    assert "no table 'nosuch'" in capsys.readouterr().err


def test_the_sql_is_kept_as_written_after_the_paths(capsys: pytest.CaptureFixture[str]) -> None:
    """A path's type would fold `//` into `/`: the SQL is the last word, kept whole."""
    assert main(["query", str(DEMO), "SELECT 7 // 2 AS q, 'a//b' AS s", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "3,a//b"


def test_the_query_doc_names_every_table_and_column() -> None:
    from htatui.cli.query import tables_markdown

    doc = ROOT / "docs" / "query.md"
    mark = "<!-- generated from the code below this line: tests/cli/test_query.py checks it -->\n"
    head = doc.read_text(encoding="utf-8").split(mark)[0]
    if os.environ.get("HTATUI_WRITE_QUERY_DOC"):
        doc.write_text(head + mark + "\n" + tables_markdown(), encoding="utf-8")
    assert doc.read_text(encoding="utf-8") == head + mark + "\n" + tables_markdown()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/query.md" in readme and "htatui query" in readme
