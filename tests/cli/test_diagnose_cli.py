"""`htatui diagnose` and `htatui diff --fail-if`: the exit codes a CI gate reads, and their lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_rank(folder: Path, step_us: float, kernel_us: float) -> Path:
    """3 steps of `step_us`, each with one kernel of `kernel_us` launched at its start."""
    events: list[dict[str, Any]] = []
    for n in (1, 2, 3):
        base = (n - 1) * step_us
        events += [
            step(n, base, step_us),
            runtime("cudaLaunchKernel", base + 1, 3, n),
            kernel("k", base + 5, kernel_us, corr=n),
        ]
    write_trace(folder / "rank-0.json", events, rank=0)
    return folder


# ---- diagnose ---------------------------------------------------------------------------------
def test_diagnose_demo_exits_1_with_rank_2_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "diagnose", str(DEMO))
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("htatui diagnose demo · ranks all (4) · steps 10-13")
    assert lines[1].startswith("step 16,110.42 µs · ranks 4 · steps 10-13")
    assert lines[3] == "1. rank 2 holds up the other ranks: its GPU compute runs 14,492 µs past theirs  [straggler]"
    assert '   see: Ranks › stragglers {"rank": 2}' in lines
    assert lines[-1].endswith("would save 5 % of the step or more: exit 1")


def test_diagnose_json_and_csv_hold_the_report_table(capsys: pytest.CaptureFixture[str], cli_one_job: None) -> None:
    # One job for the three commands: the diagnosis is made once and printed three ways.
    code, out, _err = run(capsys, "diagnose", str(DEMO), "--format", "json")
    report = json.loads(out)
    assert code == 1 and report["status"] == "findings" and report["fail_pct"] == 5.0
    assert report["summary"]["ranks"] == 4 and report["findings"][0]["rule"] == "straggler"
    code, table, _err = run(capsys, "report", str(DEMO), "--view", "diagnosis", "--format", "json")
    assert code == 0 and json.loads(table)[0]["what"] == report["findings"][0]["what"]
    code, out, _err = run(capsys, "diagnose", str(DEMO), "--format", "csv")
    assert code == 1 and out.splitlines()[0].startswith("what,saved_pct,saved_us,estimate_pct,estimate_us,what_if,rule")


FAMILIES = ("gemm", "flash_fwd", "conv2d", "softmax", "layer_norm", "multi_tensor_apply", "triton_poi", "reduce_kernel")


def test_diagnose_exits_0_when_no_finding_reaches_the_threshold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, cli_one_job: None
) -> None:
    """Eight kernel families of 95 µs a step, 29 µs apart, all launched at the step's start: the GPU
    computes 77 % of its span, no family 10 % of the step, no wait for the host: nothing to find."""
    events: list[dict[str, Any]] = []
    for n in (1, 2, 3):
        base = (n - 1) * 1000.0
        events.append(step(n, base, 1000))
        for i, name in enumerate(FAMILIES):
            c = 10 * n + i
            events += [
                runtime("cudaLaunchKernel", base + i, 1, c),
                kernel(f"{name}_kernel", base + 10 + 124 * i, 95, corr=c),
            ]
    write_trace(tmp_path / "busy" / "rank-0.json", events, rank=0)
    code, out, _err = run(capsys, "diagnose", str(tmp_path / "busy"))
    assert code == 0 and out.splitlines()[-1] == "nothing found"
    # The threshold is the best finding's saving (the replay's, else its estimate): at it, exit 1.
    _code, out, _err = run(capsys, "diagnose", str(DEMO), "--format", "json")
    best = max(f["saved_pct"] if f["saved_pct"] is not None else f["estimate_pct"] for f in json.loads(out)["findings"])
    assert run(capsys, "diagnose", str(DEMO), "--fail-pct", str(best))[0] == 1
    assert run(capsys, "diagnose", str(DEMO), "--fail-pct", str(best + 0.01))[0] == 0


def test_diagnose_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "diagnose", str(tmp_path / "missing"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.toml"
    bad.write_text("[sync]\nmin_pc = 1\n")
    code, out, err = run(capsys, "diagnose", str(DEMO), "--diagnosis-rules", str(bad))
    assert code == 2 and out == ""
    assert err.strip() == f"htatui: {bad}: rule 'sync' has no key 'min_pc' (keys: enabled, names, min_pct, factor)"
    code, _out, err = run(capsys, "report", str(DEMO), "--view", "diagnosis", "--diagnosis-rules", str(bad))
    assert code == 2 and "rule 'sync' has no key 'min_pc'" in err


def test_a_rules_file_turns_the_first_finding_off(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTATUI_DIAGNOSIS_RULES", "")
    quiet = tmp_path / "quiet.toml"
    quiet.write_text("[straggler]\nenabled = false\n")
    code, out, _err = run(capsys, "diagnose", str(DEMO), "--diagnosis-rules", str(quiet), "--format", "json")
    assert code == 1 and "straggler" not in {f["rule"] for f in json.loads(out)["findings"]}


# ---- diff --fail-if ---------------------------------------------------------------------------
@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Base: steps of 1000 µs, a 500-µs kernel each; test: steps of 1100 µs (+10 %), 600-µs kernels (+20 %)."""
    return one_rank(tmp_path / "base", 1000, 500), one_rank(tmp_path / "test", 1100, 600)


def test_fail_if_prints_one_line_per_broken_threshold_and_exits_1(
    capsys: pytest.CaptureFixture[str], pair: tuple[Path, Path]
) -> None:
    base, test = pair
    argv = ["diff", str(base), str(test), "--fail-if", "step_us>+5%", "--fail-if", "kernels.sum_us>+10%"]
    code, out, _err = run(capsys, *argv, "--fail-if", "kernels.count>0")
    assert code == 1
    assert out.splitlines() == [
        "step_us>+5%: +10.00 % (base 1,000.00 → test 1,100.00)",
        "kernels.sum_us>+10%: +20.00 % (base 1,000.00 → test 1,200.00)",
    ]


def test_fail_if_exits_0_when_every_threshold_holds(
    capsys: pytest.CaptureFixture[str], pair: tuple[Path, Path]
) -> None:
    base, test = pair
    code, out, err = run(
        capsys, "diff", str(base), str(test), "--fail-if", "step_us>+15%", "--fail-if", "temporal.idle_us>0"
    )
    assert code == 0 and out == ""
    assert "2 thresholds held: step_us>+15%: +10.00 %" in err


@pytest.mark.parametrize(
    ("threshold", "problem"),
    [
        ("step_us", "no comparison"),
        ("step_us>+5 percent", "expected METRIC>CHANGE"),
        (">5%", "expected METRIC>CHANGE"),
        ("steps_us>5%", "no metric 'steps_us'"),
        ("temporal.nosuch_us>5", "no value of temporal.nosuch_us on both sides"),
    ],
)
def test_a_malformed_threshold_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], pair: tuple[Path, Path], threshold: str, problem: str
) -> None:
    base, test = pair
    code, out, err = run(capsys, "diff", str(base), str(test), "--fail-if", threshold)
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"htatui: --fail-if {threshold!r}: ") and problem in last
