"""Kineto's vocabulary: event categories, what is device work, and what a ProfilerStep is.

(Which ranges are a rank's steps — ProfilerStep or a serving framework's annotations — is
`step_sources.py`.)

Every layer asks here instead of spelling a category set or the step pattern again: the loader
(which categories carry which args, each row's step), the scope (which rows a step holds), the
views, the diff, the timeline and the memory readers.
"""

from __future__ import annotations

import re

import polars as pl

CATEGORY_ALIASES = {
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Runtime": "cuda_runtime",
    "Operator": "cpu_op",
    "Driver": "cuda_driver",
    "User Annotation": "user_annotation",
    "gpu_user_Annotation": "gpu_user_annotation",
}
"""2021-era Kineto wrote capitalised categories; they are stored under today's names."""

PROFILER_STEP = re.compile(r"ProfilerStep\s*#\s*(\d+)")
"""A ProfilerStep's name; group 1 is the step number (HTA allows spaces around '#')."""

GPU_ANNOTATION = "gpu_user_annotation"
"""The GPU-side copy of a `record_function` range: it starts when its first kernel runs, later
than the host range, so a `ProfilerStep#N` of this category is not a step span."""

GPU_ACTIVITY_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")
"""GPU work: kernels, copies, memsets, and MTIA's device events (HTA's idle-time selector S3).
Syncs are waits, not work, so they are left out."""

DEVICE_CATS = (*GPU_ACTIVITY_CATS, "cuda_sync")
"""Rows that run on a device stream: GPU work and the syncs it waits on."""

HOST_ARG_CATS = frozenset(
    {
        "cpu_op",
        "cuda_runtime",
        "cuda_driver",
        "user_annotation",
        GPU_ANNOTATION,
        "mtia_runtime",
        "xpu_runtime",
        "privateuse1_runtime",
        "privateuse1_driver",
        "Runtime",
        "Operator",
        "Driver",
    }
)
"""Host categories whose args carry correlation / External id / stream (raw spellings too)."""

DEVICE_ARG_CATS = frozenset({*DEVICE_CATS, "Kernel", "Memcpy", "Memset"})
"""Device categories whose args carry the kernel and copy details (raw spellings too)."""

COPY_CATS = ("gpu_memcpy", "gpu_memset")
"""GPU copies and memsets (the memory-bandwidth rows)."""

FRONTEND_CATS = ("cpu_op", "user_annotation")
"""The profiler's 'frontend' events, which a launch is attributed to: operators and annotations."""

RUNTIME_CATS = ("cuda_runtime", "mtia_runtime", "xpu_runtime", "privateuse1_runtime")
DRIVER_CATS = ("cuda_driver", "privateuse1_driver")
"""The accelerators' runtime and driver calls (launches, syncs, copies issued)."""

HOST_WORK_CATS = (*FRONTEND_CATS, *RUNTIME_CATS, *DRIVER_CATS)
"""Host work: operators, annotations and runtime/driver calls (launches, syncs, copies issued).
python_function frames, flows and GPU-side annotations are not host work."""

MEMORY_EVENT = "[memory]"
"""The name of the allocator's instant events that profile_memory=True records (bytes, totals, device)."""


def spellings(*categories: str) -> frozenset[str]:
    """The categories under every name Kineto wrote them: today's and the 2021-era capitalised one."""
    return frozenset(categories) | {raw for raw, today in CATEGORY_ALIASES.items() if today in categories}


MTIA_LAUNCH = "runFunction - job_prep_and_submit_for_execution"

KERNEL_LAUNCH_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel",
    MTIA_LAUNCH,
)
"""Calls that launch one kernel (corrected mode)."""

MEMORY_LAUNCH_APIS = (
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
)
"""Calls that enqueue one copy or memset (corrected mode)."""

GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "hipGraphLaunch")
"""Calls that launch a whole graph: all its kernels share the launch's correlation id."""

GRAPH_CAPTURE_APIS = (
    "cudaStreamBeginCapture",
    "cudaStreamBeginCaptureToGraph",
    "cudaStreamEndCapture",
    "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags",
    "hipStreamBeginCapture",
    "hipStreamEndCapture",
    "hipGraphInstantiate",
    "hipGraphInstantiateWithFlags",
)
"""Calls that capture a CUDA/HIP graph: the launches between Begin and End are recorded, not run."""


def step_number(name: pl.Expr) -> pl.Expr:
    """The step number of a ProfilerStep name (null for any other name, and for a number past
    int64: `ProfilerStep#99999999999999999999` is no step); `name` as text."""
    return name.str.extract(PROFILER_STEP.pattern, 1).cast(pl.Int64, strict=False)


def is_device_row() -> pl.Expr:
    """A row that ran on a device and names the host call that launched it (its correlation)."""
    return pl.col("cat").is_in(DEVICE_CATS) & pl.col("correlation").is_not_null()
