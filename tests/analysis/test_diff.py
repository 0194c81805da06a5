"""Trace diff: hand-built A/B jobs with known changes, the generated `diff` scenario, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from kineto_util import cpu_op, kernel, runtime, step, write_trace

from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.diff import compare as diff
from htatui.analysis.diff.compare import DIFF_COLUMNS, DiffOptions, compare
from htatui.analysis.diff.summary import summary
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

Op = tuple[str, str | None, float]
BASE_OPS: list[Op] = [
    ("aten::mm", "gemm_kernel", 100.0),
    ("aten::softmax", "softmax_kernel", 30.0),
    ("aten::relu", "relu_kernel", 50.0),
    ("aten::tiny", "tiny_kernel", 10.0),
]
TEST_OPS: list[Op] = [
    ("aten::mm", "gemm_kernel", 150.0),  # slower
    ("aten::relu", "relu_kernel", 25.0),  # faster
    ("aten::layer_norm", "layer_norm_kernel", 40.0),  # added (softmax removed)
    ("aten::tiny", "tiny_kernel", 10.5),  # within the noise threshold
]


def job_events(
    steps: list[int], ops: list[Op], *, kernel_gap: float = 10.0, step_dur: float = 1000.0
) -> list[dict[str, Any]]:
    """Per step: each op on the CPU (20 µs, 30 µs apart) launches its kernel (10 µs
    cudaLaunchKernel); kernels run back to back from step start + 100 with `kernel_gap` between."""
    events: list[dict[str, Any]] = []
    corr = 1
    for i, number in enumerate(steps):
        start = 1000.0 + i * step_dur
        events.append(step(number, start, step_dur - 10.0))
        cpu_t, gpu_t = start + 10.0, start + 100.0
        for op_name, kernel_name, kernel_dur in ops:
            events.append(cpu_op(op_name, cpu_t, 20.0))
            if kernel_name is not None:
                events.append(runtime("cudaLaunchKernel", cpu_t + 5.0, 10.0, corr))
                events.append(kernel(kernel_name, gpu_t, kernel_dur, corr=corr))
                gpu_t += kernel_dur + kernel_gap
                corr += 1
            cpu_t += 30.0
    return events


def load(folder: Path) -> TraceSet:
    return load_traces([folder], use_cache=False, max_workers=1)


@pytest.fixture
def ab(tmp_path: Path) -> tuple[TraceSet, TraceSet]:
    """Base: 3 steps of BASE_OPS; test: 3 steps of TEST_OPS with 60 µs between kernels."""
    write_trace(tmp_path / "base" / "rank-0.json", job_events([1, 2, 3], BASE_OPS), rank=0)
    write_trace(tmp_path / "test" / "rank-0.json", job_events([1, 2, 3], TEST_OPS, kernel_gap=60.0), rank=0)
    return load(tmp_path / "base"), load(tmp_path / "test")


def row(frame: pl.DataFrame, name: str, kind: str | None = None) -> dict[str, Any]:
    match = frame.filter(pl.col("name") == name)
    if kind is not None:
        match = match.filter(pl.col("kind") == kind)
    assert match.height == 1, f"{name}: {match.height} rows"
    return match.row(0, named=True)


# ---- known changes ----------------------------------------------------------------------


def test_known_changes_default(ab: tuple[TraceSet, TraceSet]) -> None:
    result = compare(*ab, DiffOptions())
    frame = result.frame
    assert tuple(frame.columns) == DIFF_COLUMNS
    # Default: the last step is dropped on each side, so steps 1-2 are compared.
    assert result.selection.base.steps == (1, 2) and result.selection.test.steps == (1, 2)
    gemm = row(frame, "gemm_kernel")
    assert (gemm["kind"], gemm["status"]) == ("kernel", "slower")
    assert (gemm["base_count"], gemm["base_total_us"], gemm["test_count"], gemm["test_total_us"]) == (
        2.0,
        200.0,
        2.0,
        300.0,
    )
    assert gemm["delta_us"] == 100.0 and gemm["delta_pct"] == pytest.approx(50.0)
    softmax = row(frame, "softmax_kernel")
    assert softmax["status"] == "removed" and softmax["delta_count"] == -2.0 and softmax["delta_pct"] == -100.0
    layer_norm = row(frame, "layer_norm_kernel")
    assert layer_norm["status"] == "added" and layer_norm["test_total_us"] == 80.0
    assert layer_norm["delta_pct"] is None
    assert row(frame, "relu_kernel")["status"] == "faster"
    assert row(frame, "tiny_kernel")["status"] == "unchanged"  # 20 → 21 µs: within 2 µs / 5 %
    assert row(frame, "aten::softmax", "op")["status"] == "removed"
    assert row(frame, "aten::layer_norm", "op")["status"] == "added"
    launches = row(frame, "cudaLaunchKernel", "op")
    assert (launches["base_count"], launches["test_count"], launches["status"]) == (8.0, 8.0, "unchanged")
    steps = row(frame, diff.STEP_NAME)
    assert steps["base_count"] == 2.0 and steps["status"] == "unchanged"
    # Sorted by |delta_us|, largest first.
    deltas = frame["delta_us"].abs().to_list()
    assert deltas == sorted(deltas, reverse=True)
    assert frame["name"][0] == "gemm_kernel"


def test_statuses_are_exactly_the_known_changes(ab: tuple[TraceSet, TraceSet]) -> None:
    frame = compare(*ab, DiffOptions(by="kernel")).frame
    assert dict(frame.select("name", "status").iter_rows()) == {
        "gemm_kernel": "slower",
        "softmax_kernel": "removed",
        "layer_norm_kernel": "added",
        "relu_kernel": "faster",
        "tiny_kernel": "unchanged",
    }
    assert set(frame["kind"]) == {"kernel"}
    ops = compare(*ab, DiffOptions(by="op")).frame
    assert set(ops["kind"]) == {"op"}
    assert "gemm_kernel" not in ops["name"].to_list()


def test_noise_threshold(ab: tuple[TraceSet, TraceSet]) -> None:
    strict = compare(*ab, DiffOptions(noise_pct=0.0, noise_us=0.0)).frame
    assert row(strict, "tiny_kernel")["status"] == "slower"
    loose = compare(*ab, DiffOptions(noise_pct=60.0, noise_us=0.0)).frame
    assert row(loose, "gemm_kernel")["status"] == "unchanged"
    assert row(loose, "relu_kernel")["status"] == "unchanged"  # -50 %
    assert row(loose, "softmax_kernel")["status"] == "removed"  # added/removed ignore noise


def test_steps_choices(ab: tuple[TraceSet, TraceSet]) -> None:
    every = compare(*ab, DiffOptions(scope=Scope(steps=Steps("all")))).frame
    assert row(every, "gemm_kernel")["base_count"] == 3.0
    one = compare(*ab, DiffOptions(scope=Scope(steps=Steps.parse("2")))).frame
    assert row(one, "gemm_kernel")["test_total_us"] == 150.0
    # --steps all compares each side's whole trace (no step filter); named steps are those steps.
    assert compare(*ab, DiffOptions(scope=Scope(steps=Steps("all")))).selection.base.steps is None
    assert compare(*ab, DiffOptions(scope=Scope(steps=Steps.parse("1-2")))).selection.base.steps == (1, 2)
    with pytest.raises(ValueError, match="step 7 is not in the base trace"):
        compare(*ab, DiffOptions(scope=Scope(steps=Steps.parse("7"))))


def test_description_names_ranks_steps_and_dropped_step(ab: tuple[TraceSet, TraceSet]) -> None:
    text = compare(*ab, DiffOptions()).description
    assert "base: rank 0, steps 1-2" in text
    assert "test: rank 0, steps 1-2" in text
    assert "last step 3 left out" in text


def test_short_names_fold_templates(tmp_path: Path) -> None:
    templated: list[Op] = [
        ("aten::add", "void add_kernel<float>(float*, int)", 10.0),
        ("aten::add", "void add_kernel<half>(half*, int)", 20.0),
    ]
    write_trace(tmp_path / "a" / "r.json", job_events([1, 2], templated), rank=0)
    write_trace(tmp_path / "b" / "r.json", job_events([1, 2], templated[:1]), rank=0)
    base, test = load(tmp_path / "a"), load(tmp_path / "b")
    full = compare(base, test, DiffOptions(scope=Scope(steps=Steps("all")), by="kernel")).frame
    assert full.height == 2
    short = compare(base, test, DiffOptions(scope=Scope(steps=Steps("all")), by="kernel", short_names=True)).frame
    folded = row(short, "add_kernel")
    assert (folded["base_count"], folded["base_total_us"], folded["test_count"]) == (4.0, 60.0, 2.0)


def test_ranks_averaged(tmp_path: Path) -> None:
    slow_gemm: list[Op] = [("aten::mm", "gemm_kernel", 200.0)]
    write_trace(tmp_path / "base" / "rank-0.json", job_events([1, 2, 3], BASE_OPS[:1]), rank=0)
    write_trace(tmp_path / "base" / "rank-1.json", job_events([1, 2, 3], slow_gemm), rank=1)
    write_trace(tmp_path / "test" / "rank-0.json", job_events([1, 2, 3], BASE_OPS[:1]), rank=0)
    base, test = load(tmp_path / "base"), load(tmp_path / "test")
    result = compare(base, test, DiffOptions(by="kernel"))
    gemm = row(result.frame, "gemm_kernel")
    # Base: (2 × 100 + 2 × 200) / 2 ranks; test: one rank.
    assert (gemm["base_count"], gemm["base_total_us"]) == (2.0, 300.0)
    assert (gemm["test_count"], gemm["test_total_us"]) == (2.0, 200.0)
    assert gemm["status"] == "faster"
    assert result.selection.base.ranks == (0, 1)
    assert "ranks 0, 1 (averaged)" in result.description
    one = compare(base, test, DiffOptions(by="kernel", rank=1, test_rank=0))
    assert row(one.frame, "gemm_kernel")["base_total_us"] == 400.0
    subset = compare(base, test, DiffOptions(scope=Scope(ranks=(0,)), by="kernel"))
    assert subset.selection.base.ranks == (0,)
    assert row(subset.frame, "gemm_kernel")["status"] == "unchanged"
    with pytest.raises(ValueError, match="none of ranks"):
        compare(base, test, DiffOptions(scope=Scope(ranks=(1,))))
    with pytest.raises(ValueError, match="rank 1 is not in the test trace"):
        compare(base, test, DiffOptions(rank=1))


def test_no_common_step_numbers_align_by_position(tmp_path: Path) -> None:
    write_trace(tmp_path / "base" / "r.json", job_events([1, 2, 3], BASE_OPS), rank=0)
    write_trace(tmp_path / "test" / "r.json", job_events([11, 12, 13, 14], TEST_OPS), rank=0)
    result = compare(load(tmp_path / "base"), load(tmp_path / "test"), DiffOptions())
    assert result.selection.base.steps == (1, 2)
    assert result.selection.test.steps == (11, 12)
    assert "aligned by position" in result.description
    assert row(result.frame, "gemm_kernel")["test_count"] == 2.0


def test_side_without_steps_is_compared_whole(tmp_path: Path) -> None:
    no_steps = [e for e in job_events([1], BASE_OPS) if not str(e["name"]).startswith("ProfilerStep")]
    write_trace(tmp_path / "base" / "r.json", no_steps, rank=0)
    write_trace(tmp_path / "test" / "r.json", job_events([1, 2], BASE_OPS), rank=0)
    result = compare(load(tmp_path / "base"), load(tmp_path / "test"), DiffOptions())
    assert result.selection.base.steps is None
    assert "no ProfilerStep" in result.description
    assert row(result.frame, "gemm_kernel")["base_count"] == 1.0
    with pytest.raises(ValueError, match="no ProfilerStep"):
        compare(load(tmp_path / "base"), load(tmp_path / "test"), DiffOptions(scope=Scope(hta_compat=True)))


def test_hta_compat_first_step_and_stream_split(ab: tuple[TraceSet, TraceSet]) -> None:
    result = compare(*ab, DiffOptions(scope=Scope(hta_compat=True)))
    assert result.selection.base.steps == (1,) and result.selection.test.steps == (1,)
    frame = result.frame
    assert row(frame, "gemm_kernel")["base_total_us"] == 100.0
    assert row(frame, "ProfilerStep#1")["kind"] == "op"  # HTA keeps each step's own name
    every = compare(*ab, DiffOptions(scope=Scope(steps=Steps("all"), hta_compat=True))).frame
    assert row(every, "gemm_kernel")["base_count"] == 3.0  # no last-step drop in compat
    assert {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"} <= set(every["name"].to_list())


def test_hta_compat_groups_by_name_across_kinds(tmp_path: Path) -> None:
    # A GPU-side annotation and a CPU annotation with the same name: HTA sums them in one row.
    events = job_events([1, 2], BASE_OPS[:1])
    events.append(cpu_op("nccl:all_reduce", 1020.0, 5.0, cat="user_annotation"))
    gpu_annotation = cpu_op("nccl:all_reduce", 1020.0, 7.0, cat="gpu_user_annotation")
    gpu_annotation["args"] = {"correlation": 1}
    gpu_annotation["args"]["stream"] = 20
    events.append(gpu_annotation)
    write_trace(tmp_path / "a" / "r.json", events, rank=0)
    write_trace(tmp_path / "b" / "r.json", job_events([1, 2], BASE_OPS[:1]), rank=0)
    frame = compare(load(tmp_path / "a"), load(tmp_path / "b"), DiffOptions(scope=Scope(hta_compat=True))).frame
    merged = row(frame, "nccl:all_reduce")
    assert (merged["kind"], merged["base_count"], merged["base_total_us"]) == ("mixed", 2.0, 12.0)
    assert merged["status"] == "removed"
    default = compare(load(tmp_path / "a"), load(tmp_path / "b"), DiffOptions(scope=Scope(steps=Steps("all")))).frame
    # Corrected: the CPU annotation is an op; the GPU-side annotation is neither kernel nor op.
    assert row(default, "nccl:all_reduce")["base_total_us"] == 5.0


def test_empty_and_identical(ab: tuple[TraceSet, TraceSet]) -> None:
    base, _ = ab
    same = compare(base, base, DiffOptions())
    assert set(same.frame["status"]) == {"unchanged"}
    assert same.frame["delta_us"].abs().sum() == 0.0


# ---- headline views compared ------------------------------------------------------------


def test_summary_idle_increased(ab: tuple[TraceSet, TraceSet]) -> None:
    frame = summary(*ab, DiffOptions())
    assert frame.columns == ["view", "metric", "base", "test", "delta"]
    assert set(frame["view"]) == {"temporal", "kernel types", "overlap", "idle", "launch"}
    values = {(v, m): (b, t, d) for v, m, b, t, d in frame.iter_rows()}
    # Steps 1-2. Base kernels 190 µs per step, 3 gaps of 10 µs; test 225.5 µs, 3 gaps of 60 µs.
    base_busy, test_busy = 2 * 190.0, 2 * 225.5
    base_span = 1000.0 + 190.0 + 30.0
    test_span = 1000.0 + 225.5 + 180.0
    assert values[("temporal", "span_us")][:2] == (base_span, test_span)
    base_idle, test_idle, delta_idle = values[("temporal", "idle_us")]
    assert (base_idle, test_idle) == (base_span - base_busy, test_span - test_busy)
    assert delta_idle == pytest.approx(test_idle - base_idle) and delta_idle > 0
    assert values[("kernel types", "COMPUTATION_us")][:2] == (base_busy, test_busy)
    assert values[("overlap", "overlap_pct")] == (None, None, None)  # no communication kernels
    # Idle by category: the 60 µs gaps are "other" (≥ 30 µs, launched in time); 10 µs ones kernel wait.
    assert values[("idle", "kernel_wait_us")][0] == 6 * 10.0
    assert values[("idle", "total_us")][2] == pytest.approx(delta_idle)
    assert values[("launch", "count")][:2] == (8.0, 8.0)


def test_summary_averages_ranks(tmp_path: Path) -> None:
    write_trace(tmp_path / "base" / "rank-0.json", job_events([1, 2, 3], BASE_OPS), rank=0)
    write_trace(tmp_path / "base" / "rank-1.json", job_events([1, 2, 3], BASE_OPS), rank=1)
    write_trace(tmp_path / "test" / "rank-0.json", job_events([1, 2, 3], BASE_OPS), rank=0)
    frame = summary(load(tmp_path / "base"), load(tmp_path / "test"), DiffOptions())
    for _view, _metric, base, test, delta in frame.iter_rows():
        if base is not None:
            assert base == pytest.approx(test) and delta == pytest.approx(0.0, abs=1e-9)


# ---- the generated diff scenario (fixtures/expected.py) ---------------------------------


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[TraceSet, TraceSet]:
    from fixtures.generate import write_scenario

    folder = tmp_path_factory.mktemp("diff")
    write_scenario("diff", folder)
    return load(folder / "base"), load(folder / "test")


def _expected_names(side: dict[str, dict[str, tuple[int, float]]]) -> dict[str, tuple[float, float]]:
    return {name: (float(c), float(d)) for group in side.values() for name, (c, d) in group.items()}


def test_scenario_all_steps_match_expected(scenario: tuple[TraceSet, TraceSet]) -> None:
    from fixtures.expected import DIFF_EXPECTED

    every_step = Steps.of(DIFF_EXPECTED["steps"])
    frame = compare(*scenario, DiffOptions(scope=Scope(steps=every_step))).frame
    assert compare(*scenario, DiffOptions(scope=Scope(steps=every_step))).selection.base.steps == tuple(
        DIFF_EXPECTED["steps"]
    )
    for side in ("base", "test"):
        expected = _expected_names(DIFF_EXPECTED["steps_1_3"][side])
        got = {
            name: (count, total)
            for name, count, total in frame.filter(pl.col(f"{side}_count") > 0)
            .filter(pl.col("name") != diff.STEP_NAME)
            .select("name", f"{side}_count", f"{side}_total_us")
            .iter_rows()
        }
        assert got == expected
    for name, (delta_count, delta_us) in DIFF_EXPECTED["delta_1_3"].items():
        record = row(frame, name)
        assert (record["delta_count"], record["delta_us"]) == (delta_count, delta_us)
    steps = row(frame, diff.STEP_NAME)
    assert steps["base_total_us"] == 3 * DIFF_EXPECTED["step_dur"]["base"]
    assert steps["test_total_us"] == 3 * DIFF_EXPECTED["step_dur"]["test"]


def test_scenario_statuses(scenario: tuple[TraceSet, TraceSet]) -> None:
    from fixtures.scenarios import ADD, GEMM, LAYER_NORM, RELU, SOFTMAX

    frame = compare(*scenario, DiffOptions(by="kernel")).frame
    assert dict(frame.select("name", "status").iter_rows()) == {
        GEMM: "slower",
        SOFTMAX: "removed",
        LAYER_NORM: "added",
        RELU: "unchanged",
        ADD: "unchanged",
    }


def test_scenario_compat_first_iteration_is_hta_ops_diff(scenario: tuple[TraceSet, TraceSet]) -> None:
    from fixtures.expected import DIFF_EXPECTED

    frame = compare(*scenario, DiffOptions(scope=Scope(hta_compat=True))).frame
    frame = frame.filter(~pl.col("name").str.starts_with("ProfilerStep"))
    expected_base = _expected_names(DIFF_EXPECTED["per_step"]["base"])
    got_base = {
        n: (c, t)
        for n, c, t in frame.filter(pl.col("base_count") > 0).select("name", "base_count", "base_total_us").iter_rows()
    }
    assert got_base == expected_base
    ops = DIFF_EXPECTED["ops_diff"]
    added = frame.filter((pl.col("base_count") == 0) & (pl.col("test_count") > 0))["name"].sort().to_list()
    deleted = frame.filter((pl.col("base_count") > 0) & (pl.col("test_count") == 0))["name"].sort().to_list()
    unchanged = frame.filter((pl.col("test_count") > 0) & (pl.col("delta_count") == 0))["name"].sort().to_list()
    assert (added, deleted, unchanged) == (ops["added"], ops["deleted"], ops["unchanged"])


def test_scenario_summary_matches_expected(scenario: tuple[TraceSet, TraceSet]) -> None:
    from fixtures.expected import DIFF_EXPECTED

    kept = summary(*scenario, DiffOptions())
    every = summary(*scenario, DiffOptions(scope=Scope(steps=Steps("all"), hta_compat=True)))
    for frame, which in ((kept, "kept"), (every, "all")):
        values = {(v, m): (b, t) for v, m, b, t, _ in frame.iter_rows()}
        for side_index, side in enumerate(("base", "test")):
            temporal = DIFF_EXPECTED["temporal"][side][which]
            assert values[("temporal", "idle_us")][side_index] == temporal["idle_time"]
            assert values[("temporal", "compute_us")][side_index] == temporal["compute_time"]
            assert values[("temporal", "span_us")][side_index] == temporal["kernel_time"]
            idle = DIFF_EXPECTED["idle"][side][which]
            for category, value in idle.items():
                assert values[("idle", f"{category}_us")][side_index] == pytest.approx(value)


# ---- the CLI ----------------------------------------------------------------------------


def _run(argv: list[str]) -> int:
    from htatui.cli.main import main

    return main(argv)


def test_cli_json_columns_and_stderr(
    ab: tuple[TraceSet, TraceSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(["diff", str(tmp_path / "base"), str(tmp_path / "test"), "--format", "json", "--no-cache"])
    captured = capsys.readouterr()
    assert code == 0
    rows = json.loads(captured.out)
    assert all(tuple(r) == DIFF_COLUMNS for r in rows)
    gemm = next(r for r in rows if r["name"] == "gemm_kernel")
    assert gemm["status"] == "slower" and gemm["delta_us"] == 100.0
    assert "base: rank 0, steps 1-2" in captured.err


def test_cli_flags(ab: tuple[TraceSet, TraceSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, test = str(tmp_path / "base"), str(tmp_path / "test")
    assert _run(["diff", base, test, "--format", "csv", "--by", "kernel", "--steps", "all", "--no-cache"]) == 0
    out = pl.read_csv(capsys.readouterr().out.encode())
    assert set(out["kind"]) == {"kernel"}
    assert _run(["diff", base, test, "--summary", "--format", "json", "--no-cache"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"view", "metric", "base", "test", "delta"} == set(rows[0])
    # Without --format and with stdout not a terminal, the table is printed.
    assert _run(["diff", base, test, "--hta-compat", "--no-cache"]) == 0
    captured = capsys.readouterr()
    assert "gemm_kernel" in captured.out and "HTA's default" in captured.err


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    good = tmp_path / "good" / "r.json"
    write_trace(good, job_events([1, 2], BASE_OPS), rank=0)
    assert _run(["diff", str(bad), str(good.parent), "--format", "csv", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]
    assert _run(["diff", str(tmp_path / "missing"), str(good.parent), "--format", "csv"]) == 2
    assert "missing" in capsys.readouterr().err
    assert _run(["diff", str(good.parent), str(good.parent), "--format", "csv", "--rank", "5"]) == 2
    assert "rank 5" in capsys.readouterr().err
