"""Steps from the framework (issue 37, item 1): a serving engine's iteration annotations, a user's
`--steps-from` regex, and the steady state (`--steps steady`)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kineto_util import cpu_op, kernel, runtime, step, traces_of

from fixtures.generate import write_scenario
from htatui.analysis.core.describe import describe_scope, scope_steps
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.views import idle, temporal
from htatui.jobs.load import load_traces
from htatui.trace.step_sources import STEPS_FROM_ENV, requests_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serving")
    write_scenario("serving", root)
    return root


def test_sglang_iterations_are_the_steps(serving: Path) -> None:
    traces = load_traces([serving / "sglang"], use_cache=False, max_workers=1)
    steps = scope_steps(traces, CommonOptions())[0]
    assert (steps.available, steps.used, steps.source) == ((1, 2, 3, 4), (1, 2, 3), "SGLang `step[…]` annotations")
    assert describe_scope(traces, CommonOptions()) == (
        "rank 0 · steps 1-3 from SGLang `step[…]` annotations (last step 4 left out)"
    )
    # Steps 1-3 (fixtures/serving.py): first GPU row the copy at 1030, last the act_and_mul ending
    # at 3500: span 2470; compute 3 × 350; copies 3 × 4; idle 2470 − 1062.
    row = temporal.compute(traces, temporal.TemporalOptions()).to_dicts()[0]
    assert (row["span_us"], row["compute_us"], row["non_compute_us"], row["idle_us"]) == (2470.0, 1050.0, 12.0, 1408.0)


def test_steady_leaves_out_the_ramp_and_the_last_step(serving: Path) -> None:
    traces = load_traces([serving / "sglang"], use_cache=False, max_workers=1)
    options = CommonOptions(Scope(steps=Steps.parse("steady")))
    steps = scope_steps(traces, options)[0]
    assert steps.used == (2, 3)
    assert dict(steps.reasons) == {"batch below its peak": (1,), "last step": (4,)}
    assert describe_scope(traces, options) == (
        "rank 0 · steady steps 2-3 from SGLang `step[…]` annotations (left out: batch below its peak 1, last step 4)"
    )
    # Steps 2-3: span 2030 … 3500 = 1470, compute 700, copies 8.
    row = temporal.compute(traces, temporal.TemporalOptions(scope=options.scope)).to_dicts()[0]
    assert (row["span_us"], row["compute_us"], row["non_compute_us"]) == (1470.0, 700.0, 8.0)


def test_vllm_iterations_are_the_steps(serving: Path) -> None:
    traces = load_traces([serving / "vllm"], use_cache=False, max_workers=1)
    steps = scope_steps(traces, CommonOptions())[0]
    assert (steps.available, steps.source) == ((1, 2, 3), "vLLM `execute_…` annotations")


@pytest.mark.parametrize(
    ("name", "requests"),
    [
        ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)", 32),
        ("execute_context_2(14721)_generation_3(3)", 5),
        ("step[DECODE bs=64]", 64),
        ("step[EXTEND bs=2 toks=14721 c_sq=14721]", 2),
        ("decode[bs=117/128 tok=117 d=117]", 117),
        ("execute_diffusion_1_1024x1024", None),
    ],
)
def test_requests_of_an_iteration(name: str, requests: int | None) -> None:
    assert requests_of(name) == requests


def _warm_and_capture_job() -> list[dict[str, Any]]:
    """Five ProfilerSteps: step 1 lasts 5000 µs (warm-up), steps 2-5 1000 µs each; step 3 captures
    a graph (cudaStreamBeginCapture inside it). One kernel a step."""
    events: list[dict[str, Any]] = []
    start = 0.0
    for n, dur in zip(range(1, 6), (5000.0, 1000.0, 1000.0, 1000.0, 1000.0), strict=True):
        events += [
            step(n, start, dur),
            runtime("cudaLaunchKernel", start + 10, 5, n),
            kernel("k", start + 20, 50, corr=n),
        ]
        if n == 3:
            events.append(runtime("cudaStreamBeginCapture", start + 100, 2, 100))
        start += dur
    return events


def test_steady_leaves_out_warm_up_and_capture(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, _warm_and_capture_job())
    options = CommonOptions(Scope(steps=Steps.parse("steady")))
    steps = scope_steps(traces, options)[0]
    assert steps.used == (2, 4)
    assert dict(steps.reasons) == {"graph capture": (3,), "warm-up": (1,), "last step": (5,)}


def test_steps_from_a_regex_names_the_source_and_parses_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--steps-from` makes each row's step at parse time: the cached parse of the default source is
    not reused (the cache key holds the regex)."""
    events = [
        step(1, 0, 2000),
        cpu_op("decode_round", 0, 900, cat="user_annotation"),
        cpu_op("decode_round", 1000, 900, cat="user_annotation"),
        runtime("cudaLaunchKernel", 10, 5, 1),
        kernel("k", 20, 50, corr=1),
        runtime("cudaLaunchKernel", 1010, 5, 2),
        kernel("k", 1020, 80, corr=2),
    ]
    traces_of(tmp_path, events)
    first = load_traces([tmp_path], use_cache=True, max_workers=1)
    assert scope_steps(first, CommonOptions())[0].available == (1,)
    monkeypatch.setenv(STEPS_FROM_ENV, "^decode_round$")
    again = load_traces([tmp_path], use_cache=True, max_workers=1)
    steps = scope_steps(again, CommonOptions())[0]
    assert (steps.available, steps.used, steps.source) == ((1, 2), (1,), "`^decode_round$` ranges")
    row = temporal.compute(again, temporal.TemporalOptions()).to_dicts()[0]
    assert row["compute_us"] == 50.0


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "htatui", *args], capture_output=True, text=True, check=False, timeout=120, cwd=ROOT
    )


def test_cli_steps_from_and_its_errors(serving: Path, tmp_path: Path) -> None:
    result = _run(
        "report", str(serving / "sglang"), "--view", "steps", "--steps-from", r"^step\[DECODE bs=32", "--format", "csv"
    )
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(result.stdout.splitlines()))
    assert [(r["step"], r["used"]) for r in rows] == [("1", "true"), ("2", "true"), ("3", "false")]
    bad = _run("report", str(serving / "sglang"), "--view", "steps", "--steps-from", "(")
    assert (bad.returncode, bad.stderr.strip()) == (2, "htatui: --steps-from: '(' is not a valid regex")
    dataset = tmp_path / "ds"
    assert _run("ingest", str(serving / "sglang"), "-o", str(dataset)).returncode == 0
    refused = _run("info", str(dataset), "--steps-from", "x")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"htatui: {dataset}: --steps-from applies to trace files; a dataset keeps the steps it was ingested with"
    )


# ---- TraceLens's public inference traces ---------------------------------------------------
INFERENCE = "tests/traces/inference"
TIMELINES = {
    "sglang_decode/sglang_Qwen3-8B_decode.json.gz": ("sglang_decode", "vLLM `execute_…` annotations"),
    "sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz": (
        "sglang_prefilldecode",
        "vLLM `execute_…` annotations",
    ),
    "vllm_decode_full/graph_execution.json.gz": ("vllm_decode_full", "vLLM `execute_…` annotations"),
    "vllm_prefilldecode_piecewise/graph_execution.json.gz": (
        "vllm_prefilldecode_piecewise",
        "vLLM `execute_…` annotations",
    ),
}


@pytest.mark.parametrize("trace", sorted(TIMELINES))
def test_tracelens_replays_step_by_their_iteration_annotation(tracelens: Any, trace: str) -> None:
    """One step per iteration annotation (each trace holds one iteration); the GPU timeline over
    it is TraceLens's (its perf_csvs/gpu_timeline.csv, ms)."""
    folder, source = TIMELINES[trace]
    path = tracelens(f"{INFERENCE}/{trace}")
    expected = {
        row["type"]: float(row["time ms"]) * 1000.0
        for row in csv.DictReader(
            tracelens(f"{INFERENCE}/{folder}/perf_csvs/gpu_timeline.csv").read_text().splitlines()
        )
    }
    traces = load_traces([path], use_cache=False, max_workers=1)
    steps = scope_steps(traces, CommonOptions())[0]
    assert (steps.available, steps.used, steps.whole_trace, steps.source) == ((1,), (1,), False, source)
    row = temporal.compute(traces, temporal.TemporalOptions()).to_dicts()[0]
    assert row["span_us"] == pytest.approx(expected["total_time"], rel=1e-9)
    assert row["idle_us"] == pytest.approx(expected["idle_time"], rel=1e-9)
    assert row["compute_us"] == pytest.approx(expected["computation_time"], rel=1e-9)
    # The idle view splits the same idle time by stream and cause, over the same step.
    gaps = idle.compute(traces, idle.IdleOptions())
    assert gaps.height > 0
