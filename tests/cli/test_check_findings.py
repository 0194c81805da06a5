"""`check` names kernels that start before their launch call (issue 35); the step model clamps them,
so the cycle they made in HTA's graph no longer arises.

The trace: gemm_a [20, 30) launched at 10; a cudaDeviceSynchronize [30, 70) whose Context Sync ends
at 65; gemm_b runs [50, 60) but its launch call is at 100, after the sync that waited for it: the
sync's end waits on gemm_b, gemm_b waits on its launch, and the launch comes after the sync.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_util import context_sync, cpu_op, kernel, runtime, step, traces_of

from htatui.analysis.health import capabilities, findings
from htatui.cli.main import main


def backwards_trace(tmp_path: Path) -> Path:
    traces_of(
        tmp_path,
        [
            step(1, 0, 200),
            cpu_op("aten::mm", 1, 150),
            runtime("cudaLaunchKernel", 10, 5, corr=1),
            kernel("gemm_a", 20, 10, corr=1),
            runtime("cudaDeviceSynchronize", 30, 40, corr=3),
            context_sync(60, 5, corr=3),
            runtime("cudaLaunchKernel", 100, 5, corr=2),
            kernel("gemm_b", 50, 10, corr=2),
        ],
    )
    return tmp_path


def test_check_names_a_kernel_before_its_launch_and_the_cycle_it_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", str(backwards_trace(tmp_path)), "--format", "json", "--no-cache"]) == 1
    report = json.loads(capsys.readouterr().out)
    found = {finding["kind"]: finding["message"] for finding in report["findings"]}
    assert found["kernel before launch"] == (
        "1 kernel(s), copies or memsets start before the call that launched them (by up to 50.000 µs): host and "
        "device clocks disagree; launch delays and the critical path through them cannot be trusted"
    )
    # The step model clamps such work to its launch (tests/analysis/test_step_model.py), so its graph
    # has no cycle to name; the path says what it clamped.
    assert "critical-path cycle" not in found
    assert report["status"] == "warnings"
    assert main(["report", str(tmp_path), "--view", "critical-path", "--no-cache"]) == 0
    assert "1 device work that starts before its launching call" in capsys.readouterr().err


def test_quick_check_skips_what_reads_every_event(tmp_path: Path) -> None:
    traces = traces_of(
        tmp_path, [step(1, 0, 200), runtime("cudaLaunchKernel", 100, 5, corr=2), kernel("k", 50, 10, corr=2)]
    )
    quick = findings(traces, capabilities(traces, read_shapes=False), thorough=False)
    assert quick.height == 0
    thorough = findings(traces, capabilities(traces, read_shapes=False))
    assert thorough["kind"].to_list() == ["kernel before launch"]
