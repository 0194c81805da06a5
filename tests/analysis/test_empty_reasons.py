"""Empty tables and unknown devices say why (issue 37, smaller items): the annotations view without
GPU-side spans, compat mode's launch view on a ROCm trace, a ROCm trace with unnamed devices."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_util import cpu_op, kernel, runtime, step, traces_of

from fixtures.generate import write_scenario
from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import frame_of, make_table, view
from htatui.analysis.views import annotations as user_annotations
from htatui.analysis.views import launch
from htatui.jobs.load import load_traces
from htatui.trace.model import TraceMeta


def test_annotations_without_gpu_spans_say_where_the_cpu_ones_are(tmp_path: Path) -> None:
    traces = traces_of(
        tmp_path,
        [
            step(1, 0, 100),
            cpu_op("## forward ##", 5, 50, cat="user_annotation"),
            runtime("hipLaunchKernel", 10, 5, 1),
            kernel("k", 20, 5, corr=1),
        ],
    )
    table = view("annotations").main
    frame, message = frame_of(make_table(table, traces, user_annotations.AnnotationOptions()))
    assert frame.height == 0
    assert message == (
        "no GPU-side annotations (gpu_user_annotation) in the chosen steps: Kineto writes them for ranges that ran "
        "GPU work on CUDA, not on ROCm or CPU-only traces; 2 CPU-side annotations (user_annotation) are there: "
        "--cpu-annotations lists them"
    )
    cpu = user_annotations.compute(traces, user_annotations.AnnotationOptions(cpu_side=True))
    assert sorted(cpu["name"].to_list()) == ["## forward ##", "ProfilerStep#1"]


@pytest.mark.parametrize("compat", [False, True])
def test_compat_launches_on_rocm_say_hta_ignores_hip(tmp_path: Path, compat: bool) -> None:
    write_scenario("edge", tmp_path)
    traces = load_traces([tmp_path / "amd"], use_cache=False, max_workers=1)
    for name in ("main", "summary"):
        frame, message = frame_of(
            make_table(view("launch").table(name), traces, launch.LaunchOptions(Scope(hta_compat=compat)))
        )
        if compat:
            assert (frame.height, message) == (0, launch.HIP_IN_COMPAT)
        else:
            assert frame.height > 0 and message is None


@pytest.mark.parametrize(
    ("properties", "backend", "name"),
    [
        (
            [{"id": 0, "name": "", "warpSize": 64}, {"id": 1, "name": "", "warpSize": 64}],
            "nccl",
            "ROCm GPU ×2, name not recorded",
        ),
        ([{"id": 0, "name": "", "warpSize": 32}], "nccl", "GPU ×1, name not recorded"),
        ([{"id": 0, "name": "AMD Instinct MI300X", "warpSize": 64}], "nccl", "AMD Instinct MI300X"),
        ([], "mtia:hccl", "MTIA"),
        ([], "nccl", "unknown"),
    ],
)
def test_device_name_when_properties_name_none(properties: list[dict[str, object]], backend: str, name: str) -> None:
    meta = TraceMeta(device_properties=tuple(properties), distributed_info={"backend": backend})
    assert meta.device_name == name
