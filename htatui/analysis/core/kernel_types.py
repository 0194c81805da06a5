"""What GPU work is and what kind it is: COMPUTATION, COMMUNICATION, MEMORY or OTHER.

Default semantics are corrected (docs/semantics-breakdowns.md, shared rules); `hta_compat=True`
switches to HTA 0.6.1's selectors and name-only typing, quirks included.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.comm_rules import comm_categories, is_comm_kernel
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.trace.kineto import GPU_ACTIVITY_CATS
from htatui.trace.model import TraceSet

COMPUTATION = "COMPUTATION"


COMMUNICATION = "COMMUNICATION"


MEMORY = "MEMORY"


OTHER = "OTHER"


KERNEL_TYPES = (COMPUTATION, COMMUNICATION, MEMORY)


def gpu_events(events: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """GPU activity: kernels, copies and memsets by category; HTA's selector S1 in compat."""
    if hta_compat:
        return hta.gpu_rows(events)
    return events.filter(pl.col("cat").cast(pl.Utf8).is_in(GPU_ACTIVITY_CATS))


def kernel_type(hta_compat: bool, rules: Rules = SHIPPED_RULES) -> pl.Expr:
    """COMPUTATION / COMMUNICATION / MEMORY / OTHER for each GPU row (docs/semantics-breakdowns.md, shared rules).

    Corrected: copies and memsets are MEMORY by category, syncs OTHER, and kernels are typed
    by the communication rules (`comm_rules.toml` plus the user's in `rules`: NCCL/RCCL in every spelling,
    DeepEP, NVSHMEM, …, or collective args on the kernel) as COMMUNICATION, ROCm copy kernels
    MEMORY, the rest COMPUTATION.
    Compat: HTA's name-only prefix rules, quirks included.
    """
    name = pl.col("name").cast(pl.Utf8)
    if hta_compat:
        return _hta_name_type(name)
    cat = pl.col("cat").cast(pl.Utf8)
    comm_kernel = is_comm_kernel(rules)
    copy_kernel = name.str.starts_with("__amd_rocclr_copyBuffer") | name.str.starts_with("__amd_rocclr_fillBuffer")
    return (
        pl.when(cat.is_in(comm_categories(rules)))
        .then(pl.lit(COMMUNICATION))
        .when(cat.is_in(["gpu_memcpy", "gpu_memset"]))
        .then(pl.lit(MEMORY))
        .when(cat == "kernel")
        .then(
            pl.when(comm_kernel)
            .then(pl.lit(COMMUNICATION))
            .when(copy_kernel)
            .then(pl.lit(MEMORY))
            .otherwise(pl.lit(COMPUTATION))
        )
        # MTIA device events (jobs, DMA, collectives, waits) have no category split: HTA's name
        # rules are the best typing there is for them.
        .when(cat == "mtia_ccp_events")
        .then(_hta_name_type(name))
        .otherwise(pl.lit(OTHER))
    )


def _hta_name_type(name: pl.Expr) -> pl.Expr:
    """HTA's name-only typing (docs/semantics-breakdowns.md, shared rules), quirks included."""
    return hta.name_type(name, COMMUNICATION, MEMORY, COMPUTATION, OTHER)


def typed_gpu_events(events: pl.DataFrame, hta_compat: bool, rules: Rules, *columns: str) -> pl.DataFrame:
    """`gpu_events` with a ``kind`` column (`kernel_type`), typing each distinct (cat, name) once.

    Typing the distinct names and joining back is ~15× faster than running the name rules on
    every row of a large rank (the names are Categorical, so the join is on integer codes).
    """
    # collective_name is part of the key: a kernel carrying collective args is communication.
    key = ["cat", "name", "collective_name"]
    gpu = gpu_events(events.select(*dict.fromkeys([*key, "stream", *columns])), hta_compat)
    kinds = gpu.select(key).unique().with_columns(kind=kernel_type(hta_compat, rules))
    typed = gpu.join(kinds, on=key, how="left", nulls_equal=True).with_columns(pl.col("kind").fill_null(OTHER))
    return typed if "collective_name" in columns else typed.drop("collective_name")


_TYPED_READS = ("cat", "name", "collective_name", "stream", "rank", "ts", "end", "dur")


def typed_gpu(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    """`typed_gpu_events` of the prepared events with rank, ts, end, dur: made once per job and
    selection, and shared by the temporal, overlap and kernel views."""
    key = ("kernel_types.typed_gpu", *selection_key(traces, options))
    return memoised(
        traces,
        key,
        lambda: typed_gpu_events(
            prepare(traces, options, columns=_TYPED_READS).events,
            options.hta_compat,
            options.scope.rules,
            "rank",
            "ts",
            "end",
            "dur",
        ),
    )
