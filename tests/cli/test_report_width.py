"""Headless tables fit an 80-column terminal; piped output keeps full rows; no number is ever split."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import polars as pl
import pytest
from cli_util import run_in_pty

from fixtures.generate import write_scenario
from htatui.analysis.core.columns import TableColumns, derived_label, derived_spec
from htatui.cli.main import main
from htatui.text.render import render_frame

ROOT = Path(__file__).resolve().parents[2]
LONG = (
    "void at::native::(anonymous namespace)::vectorized_elementwise_kernel"
    "<4, at::native::FillFunctor<float>>(int, float*)"
)


class Terminal(io.StringIO):
    """What render_frame sees when stdout is a terminal."""

    def isatty(self) -> bool:
        return True


def wide_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": [0, 1],
            "name": [LONG, LONG.replace("<4,", "<8,")],
            "kernel_type": ["COMPUTATION", "COMMUNICATION"],
            "count": [190, 3],
            "sum_us": [8_204_993.25, 11_075.0],
            "mean_us": [43_184.17, 3_691.67],
            "min_us": [1.5, 2.5],
            "max_us": [260_638.0, 5_000.0],
            "std_us": [12.25, 0.5],
            "idle_pct": [7.25, 92.75],
            "non_compute_time_us": [14_522_911.5, 0.0],
        }
    )


def test_short_headers_keep_the_unit() -> None:
    assert derived_label("non_compute_time_us") == "non-comp time µs"
    assert derived_label("idle_pct") == "idle %"
    assert derived_label("span_ms") == "span ms"
    assert derived_label("accounted_for") == "accounted for"


def test_terminal_table_fits_80_columns_and_names_what_it_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    render_frame(wide_frame(), "table", title="kernels", out=out)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    # Numbers whole on one line; names shortened by meaning and still telling the two kernels apart.
    for number in ("8,204,993.25", "11,075.00", "190"):
        assert number in text
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 2
    names = [row.split("│")[2].strip() for row in rows]
    assert names[0] != names[1] and all("vectorized" in name for name in names)
    assert "(--wide shows all)" in text and "left out to fit 80 columns" in text


def test_wide_shows_every_column_without_breaking_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    render_frame(wide_frame(), "table", out=out, wide=True)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "14,522,911.50" in text and "260,638.00" in text and "non-comp time µs" in text
    assert "left out" not in text
    assert len([line for line in text.splitlines() if line.startswith("│")]) == 2


def test_piped_table_fits_160_columns_and_wide_keeps_full_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    render_frame(wide_frame(), "table", out=out)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 160
    assert LONG not in text and "vectorized_element" in text
    assert len([line for line in text.splitlines() if line.startswith("│")]) == 2
    out = io.StringIO()
    render_frame(wide_frame(), "table", out=out, wide=True)
    text = out.getvalue()
    assert LONG in text and "non-comp time µs" in text and "left out" not in text
    # $COLUMNS, when set, is the width of piped tables too.
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    render_frame(wide_frame(), "table", out=out)
    assert max(len(line) for line in out.getvalue().splitlines()) <= 100


def test_key_columns_are_never_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last column goes first when fitting, unless it is the table's key column."""
    monkeypatch.setenv("COLUMNS", "60")
    out = io.StringIO()
    frame = wide_frame()
    specs = [derived_spec(name, dtype) for name, dtype in frame.schema.items()]
    key = TableColumns(
        *(dataclasses.replace(s, importance="key") if s.name == "non_compute_time_us" else s for s in specs)
    )
    render_frame(frame, "table", out=out, columns=key)
    text = out.getvalue()
    assert "14,522,911.50" in text and "left out to fit 60 columns" in text
    assert max(len(line) for line in text.splitlines()) <= 60


def test_csv_and_json_floats_carry_no_binary_noise() -> None:
    frame = pl.DataFrame(
        {
            "name": ["a", "b", "c"],
            "dur_us": [730.3699999999999, 530 / 7, 1_795_366_631_037_282.0],
            "pct": [0.1 + 0.2, None, float("nan")],
        }
    )
    out = io.StringIO()
    render_frame(frame, "csv", out=out)
    # Noise goes: a time keeps the trace's ns (3 decimals of µs) and no more, a µs epoch timestamp
    # stays whole; a float with no unit keeps its real digits.
    assert out.getvalue().splitlines()[1:] == [
        "a,730.37,0.3",
        "b,75.714,",
        "c,1795366631037282.0,NaN",
    ]
    out = io.StringIO()
    render_frame(frame, "json", out=out)
    rows = json.loads(out.getvalue())
    assert [row["dur_us"] for row in rows] == [730.37, 75.714, 1_795_366_631_037_282.0]
    assert rows[0]["pct"] == 0.3 and rows[2]["pct"] is None


def run_piped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], columns: int | None = None
) -> str:
    """`htatui ARGS` in this process with stdout on a pipe (capsys: not a terminal) and $COLUMNS
    unset unless given; returns stdout. Exit 0 is asserted (`--help` exits through SystemExit(0))."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return printed.out


def test_piped_launch_prints_the_summary_and_outliers_with_the_delay_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_scenario("small", tmp_path / "small")
    job = str(tmp_path / "small")
    text = run_piped(capsys, monkeypatch, ["report", job, "--view", "launch", "--no-cache"])
    assert max(len(line) for line in text.splitlines()) <= 160
    titles = [line.split(" · ")[0] for line in text.splitlines() if line.startswith("launch ")]
    assert titles == ["launch summary", "launch short-kernels", "launch runtime-outliers", "launch delay-outliers"]
    # The small job: 14 launches a rank, 6 of them delayed past 100 µs (145, 135, 140 µs, twice a rank).
    assert "launch delay µs" in text and "145.00" in text
    assert text.count("│    0 │") == 1 + 6
    # At 80 columns the key column (launch_delay_us) stays, whatever else is left out.
    narrow = run_piped(capsys, monkeypatch, ["report", job, "--view", "launch", "--full", "--no-cache"], columns=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    header = next(line for line in narrow.splitlines() if "rank" in line and "┃" in line)
    assert "delay µs" in header
    assert len([line for line in narrow.splitlines() if line.startswith("│")]) == 28


def test_report_help_groups_flags_by_view(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # argparse wraps help to $COLUMNS: 80, what a child process on a pipe is given by default.
    text = run_piped(capsys, monkeypatch, ["report", "--help"], columns=80)
    launch = text[text.index("--view launch (Launch):") : text.index("--view queue")]
    assert "--delay-outliers" in launch and "--runtime-cutoff" in launch and "--full" in launch
    assert "--by-stream" not in launch
    own = run_piped(capsys, monkeypatch, ["report", "--view", "launch", "--help"], columns=80)
    assert "--delay-outliers" in own and "--full" in own and "--by-stream" not in own and "--view idle" not in own
    assert "print the delay-outliers table of launch: Launches whose GPU work waited longer" in " ".join(own.split())


@pytest.mark.parametrize("view", ["temporal", "kernels", "idle", "launch"])
def test_report_in_an_80_column_pty(tmp_path: Path, view: str, capsys: pytest.CaptureFixture[str]) -> None:
    write_scenario("small", tmp_path / "small")
    job = str(tmp_path / "small")
    text = run_in_pty(["report", job, "--view", view, "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines and max(len(line) for line in lines) <= 80, text
    # Every number of the first row's shown columns is printed whole (as the JSON gives it; the JSON
    # is read in this process: only the terminal's width needs a process of its own).
    capsys.readouterr()
    assert main(["report", job, "--view", view, "--no-cache", "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)[0]
    row = next(line for line in lines if line.startswith("│"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    numbers = {f"{v:,.2f}" for v in first.values() if isinstance(v, float)} | {
        str(v) for v in first.values() if isinstance(v, int)
    }
    shown_numbers = [cell for cell in cells if re.fullmatch(r"[-\d,.]+", cell)]
    assert shown_numbers and all(cell in numbers for cell in shown_numbers), (cells, numbers)


def test_info_in_an_80_column_pty(tmp_path: Path) -> None:
    write_scenario("small", tmp_path / "small")
    text = run_in_pty(["info", str(tmp_path / "small"), "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    assert len([line for line in lines if line.startswith("│")]) == 2


def test_diff_table_keeps_the_change_columns_at_80(tmp_path: Path) -> None:
    write_scenario("diff", tmp_path)
    text = run_in_pty(["diff", str(tmp_path / "base"), str(tmp_path / "test"), "--format", "table", "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    header = next(line for line in lines if "name" in line)
    assert "delta µs" in header and "status" in header
    assert "--wide shows all" in text


def test_skipped_files_are_listed_under_info_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 #13: a file skipped while loading leaves a sign in stdout, not only on stderr."""
    write_scenario("small", tmp_path / "small")
    (tmp_path / "small" / "rank-2.json").write_text("{not json")
    job = str(tmp_path / "small")
    for args in (["info", job], ["report", job, "--view", "temporal"]):
        text = run_piped(capsys, monkeypatch, [*args, "--no-cache"])
        assert "(1 note, listed below)" in text.splitlines()[0]
        lines = text.splitlines()
        # The note may wrap at the piped width (a long tmp path), so read from its first line to the end.
        note = " ".join(next(lines[i:] for i in range(len(lines)) if lines[i].startswith("skipped ")))
        assert note.startswith(f"skipped {tmp_path / 'small' / 'rank-2.json'}: invalid JSON")
    assert "skipped" not in run_piped(
        capsys, monkeypatch, ["report", job, "--view", "temporal", "--no-cache", "--format", "csv"]
    )


def test_info_at_80_columns_keeps_file_names_and_says_shared_values_once(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 #9: at 80 columns `info` cut file names to `work…ker0_…` and dropped device, rank
    source and warnings. The device and rank source (one value for the job) go to the title, so the
    file names stay whole; CSV keeps every column."""
    text = run_piped(capsys, monkeypatch, ["info", str(ROOT / "fixtures" / "demo"), "--no-cache"], columns=80)
    assert "device: NVIDIA A100-SXM4-80GB" in " ".join(text.split())
    assert all(f"rank-{rank}.json.gz" in text for rank in range(4))
    assert max(len(line) for line in text.splitlines()) <= 80
    header = run_piped(capsys, monkeypatch, ["info", str(ROOT / "fixtures" / "demo"), "--format", "csv"]).splitlines()[
        0
    ]
    assert header == "rank,file,rank_source,device,events,kernels,streams,span_ms,steps,warnings"


def test_info_folds_each_ranks_warnings_into_lines_under_the_table() -> None:
    from htatui.cli.info import INFO_SCHEMA, folded_for_table

    base = {"file": "r.json", "events": 1, "kernels": 0, "streams": 0, "span_ms": 1.0, "steps": ""}
    frame = pl.DataFrame(
        [
            {**base, "rank": 0, "rank_source": "trace", "device": "A", "warnings": "w1; w2"},
            {**base, "rank": 1, "rank_source": "trace", "device": "B", "warnings": ""},
        ],
        schema=INFO_SCHEMA,
    )
    folded, said, lines = folded_for_table(frame)
    assert said == ["rank source: trace"]
    assert lines == ["rank 0: w1", "rank 0: w2"]
    assert "device" in folded.columns and "warnings" not in folded.columns and "rank_source" not in folded.columns


def test_the_ops_rooflines_figures_are_kept_when_a_flops_table_is_fitted(monkeypatch: pytest.MonkeyPatch) -> None:
    """With --flops the ops table's key columns include the roofline's verdict, so 80 columns keep it."""
    from htatui.analysis.registry import BY_ID

    declared = BY_ID["ops"].table("main").columns
    frame = pl.DataFrame(
        {
            "rank": [0],
            "name": ["aten::mm"],
            "kind": ["op"],
            "input_dims": ["[[8192, 768], [768, 32000]]"],
            "n": [2],
            "cpu_total_us": [1341.97],
            "cpu_self_us": [119.8],
            "gpu_self_us": [567.5],
            "gpu_total_us": [567.5],
            "gflop": [402.65],
            "bytes_moved": [1.2e8],
            "flop_per_byte": [3355.4],
            "tflop_per_s": [709.5],
            "pct_of_peak": [71.71],
            "bound": ["compute"],
            "headroom_us": [160.6],
        }
    )
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    render_frame(frame, "table", out=out, columns=declared)
    header = out.getvalue().splitlines()[1:4]
    assert all(any(label in line for line in header) for label in ("TFLOP/s", "% of peak", "bound"))
    assert "71.71" in out.getvalue() and "compute" in out.getvalue()


def test_the_answer_is_kept_at_80_columns_in_a_tty() -> None:
    """Issue 38 #1: at 80 columns stragglers kept `is strag`, `steps`, `calls last` and cut the
    cause to `data_…08 µs)`; --what-if dropped the path (now replay) if faster, saved_us and saved_pct."""
    demo = str(ROOT / "fixtures" / "demo")
    text = run_in_pty(["report", demo, "--view", "stragglers"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    header = next(line for line in lines if "rank" in line and "┃" in line)
    assert "delay µs" in header and "cause" in header and "calls last" not in header
    row = next(line for line in lines if line.startswith("│    2 "))
    assert "GPU compute: 100 % of the delay (+14,492 µs" in row
    text = run_in_pty(["report", demo, "--view", "critical-path", "--what-if"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    header = " ".join(line for line in lines if "┃" in line)
    assert all(label in header for label in ("replay if µs", "saved µs", "saved %"))


def test_a_load_note_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38 #6: report printed its load notes on stderr and again under the table."""
    from htatui.cli.main import main

    write_scenario("small", tmp_path / "small")
    (tmp_path / "small" / "rank-2.json").write_text("{not json")
    job = str(tmp_path / "small")
    for args in (["report", job, "--view", "temporal"], ["info", job]):
        assert main([*args, "--no-cache"]) == 0
        printed = capsys.readouterr()
        assert "skipped" in printed.out and "skipped" not in printed.err, printed.err
    assert main(["report", job, "--view", "temporal", "--format", "csv"]) == 0
    printed = capsys.readouterr()
    assert "skipped" not in printed.out and "htatui: skipped" in printed.err


def test_a_flag_two_views_use_differently_says_both() -> None:
    """Issue 38 #6: --rank's help said "patterns: rank to mine" though critical-path follows it."""
    from htatui.cli.report import OPTION_FLAGS

    rank = next(option for option in OPTION_FLAGS if option.flag == "--rank")
    assert "patterns: rank to mine" in rank.help and "critical-path: rank to follow" in rank.help
    top = next(option for option in OPTION_FLAGS if option.flag == "--top")
    assert top.help.startswith("kernels/kernel-spread: how many names to keep") and "ops: " in top.help
