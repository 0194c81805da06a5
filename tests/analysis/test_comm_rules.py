"""Communication-kernel rules as data: every NCCL/RCCL spelling, DeepEP, NVSHMEM, user rules."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from kineto_util import kernel, runtime, traces_of

from htatui.analysis.core import comm_rules
from htatui.analysis.core.kernel_types import COMMUNICATION, COMPUTATION, kernel_type
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.views import overlap, temporal
from htatui.analysis.views.temporal import TemporalOptions

COMM_NAMES = {
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": "NCCL",  # NCCL < 2.19
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "NCCL",  # NCCL >= 2.19
    "ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)": "NCCL",  # NCCL 2.4-2.6
    "void ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)": "NCCL",  # demangled with 'void'
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)": "NCCL",
    "rcclGenericKernel": "RCCL",
    "mscclKernel_Sum_float_LL": "MSCCL",
    "void dpsk::ep::internode::combine<4, 8>(void*, float*)": "DeepEP",
    "void dpsk::ep::internode::dispatch<false, 8>(int*, void*)": "DeepEP",
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*)": "DeepEP",
    "nvshmemi_alltoall_kernel": "NVSHMEM",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(float**)": "PyTorch symmetric memory",
}
COMPUTE_NAMES = [
    "ampere_sgemm_128x64_nn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >",
    "void cutlass::Kernel<epilogue_deep>",  # 'deep' alone is not DeepEP
]


def _typed(names: list[str], compat: bool, rules: Rules = SHIPPED_RULES) -> list[str]:
    frame = pl.DataFrame(
        {"name": names, "cat": ["kernel"] * len(names), "collective_name": [None] * len(names)},
        schema={"name": pl.Utf8, "cat": pl.Utf8, "collective_name": pl.Utf8},
    )
    return frame.select(kind=kernel_type(compat, rules))["kind"].to_list()


def test_every_known_spelling_is_communication() -> None:
    assert _typed(list(COMM_NAMES), compat=False) == [COMMUNICATION] * len(COMM_NAMES)
    assert _typed(COMPUTE_NAMES, compat=False) == [COMPUTATION] * len(COMPUTE_NAMES)
    rules = comm_rules.comm_rules()
    assert {name: rules.library_of(name) for name in COMM_NAMES} == COMM_NAMES


def test_compat_keeps_htas_prefix_typing() -> None:
    # HTA 0.6.1: names starting 'nccl' (either spelling) are COMMUNICATION; RCCL, DeepEP,
    # NVSHMEM kernels are computation.
    typed = dict(zip(COMM_NAMES, _typed(list(COMM_NAMES), compat=True), strict=True))
    assert typed["ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"] == COMMUNICATION
    assert typed["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"] == COMMUNICATION
    # neither starts with 'nccl' nor contains 'ncclKernel': HTA calls the renamed kernel compute
    assert typed["void ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"] == COMPUTATION
    assert typed["rcclGenericKernel"] == COMPUTATION
    assert typed["void dpsk::ep::internode::combine<4, 8>(void*, float*)"] == COMPUTATION
    assert typed["nvshmemi_alltoall_kernel"] == COMPUTATION


def test_collective_args_make_a_kernel_communication() -> None:
    frame = pl.DataFrame(
        {"name": ["my_fused_allreduce"], "cat": ["kernel"], "collective_name": ["allreduce"]},
    )
    assert frame.select(kind=kernel_type(False))["kind"].to_list() == [COMMUNICATION]


def _deepep_job() -> list[dict[str, object]]:
    """gemm [100,200) on stream 7 and DeepEP combine [150,250) on stream 20.

    Corrected: compute = 100 µs; comm = 100 µs of which [150,200) = 50 overlaps compute → 50 %.
    Compat: both are computation, compute = union [100,250) = 150 µs, and no comm → null overlap.
    """
    return [
        runtime("cudaLaunchKernel", 90, 5, 1),
        runtime("cudaLaunchKernel", 95, 5, 2),
        kernel("sm90_xmma_gemm_bf16", 100, 100, stream=7, corr=1),
        kernel("void dpsk::ep::internode::combine<4, 8>(void*)", 150, 100, stream=20, corr=2),
    ]


@pytest.mark.parametrize("compat", [False, True])
def test_deepep_kernel_counts_as_communication(tmp_path: Path, compat: bool) -> None:
    traces = traces_of(tmp_path, _deepep_job())
    got = temporal.compute(traces, TemporalOptions(scope=Scope(hta_compat=compat))).to_dicts()[0]
    assert got["compute_us"] == (150 if compat else 100)
    over = overlap.compute(traces, overlap.OverlapOptions(scope=Scope(hta_compat=compat)))["overlap_pct"][0]
    assert over == (None if compat else 50.0)


def test_user_rules_extend_the_shipped_ones(tmp_path: Path) -> None:
    rules_file = tmp_path / "mine.toml"
    rules_file.write_text('[[rule]]\nlibrary = "MyCCL"\npattern = "^myccl_"\n')
    assert _typed(["myccl_allgather"], compat=False) == [COMPUTATION]
    mine = Rules(comm_files=(str(rules_file),))
    assert _typed(["myccl_allgather", "ncclDevKernel_Generic"], compat=False, rules=mine) == [COMMUNICATION] * 2
    assert comm_rules.comm_rules(mine).library_of("MYCCL_x") == "MyCCL"
    assert _typed(["myccl_allgather"], compat=False) == [COMPUTATION]  # the shipped rules are unchanged


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[rule]]\nlibrary = 'x'\n", "rule 1 has no 'pattern' string"),
        ("[[rule]]\npattern = '('\n", "is not a valid regex"),
        ("rule = [", "not a valid TOML rules file"),
        ("categories = 'kernel'\n", "'categories' must be a list of strings"),
    ],
)
def test_bad_rules_file_names_the_file(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(comm_rules.CommRulesError, match=problem) as error:
        comm_rules.comm_rules(Rules(comm_files=(str(bad),)))
    assert str(bad) in str(error.value)
    missing = tmp_path / "missing.toml"
    with pytest.raises(comm_rules.CommRulesError, match="cannot read"):
        comm_rules.comm_rules(Rules(comm_files=(str(missing),)))
