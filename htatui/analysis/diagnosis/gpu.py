"""Rules on the GPU's own work: what GPU compute is made of, matrix multiplies below their roof,
and chains of small memory-bound kernels a compiler would fuse. docs/diagnosis/gpu_compute.md,
gemm_roof.md and fusion.md."""

from __future__ import annotations

import polars as pl

from htatui.analysis.diagnosis.change import Change
from htatui.analysis.diagnosis.common import short_name, worst_row
from htatui.analysis.diagnosis.context import Context
from htatui.analysis.diagnosis.finding import Evidence, Finding
from htatui.analysis.diagnosis.settings import Family

OTHER_FAMILY = "other"

FAMILY_ADVICE = {
    "GEMM": "check them against their roof (Ops page, f): bf16 or TF32 instead of fp32, dimensions in multiples "
    "of 64, batch small matmuls together",
    "attention": "a fused attention kernel (scaled_dot_product_attention on the flash or cuDNN backend) in bf16; "
    "shorter sequences or fewer heads where the model allows",
    "convolution": "channels_last memory format with bf16 autocast, torch.backends.cudnn.benchmark = True",
    "optimizer": "a fused optimizer (fused=True) or foreach, fewer parameter tensors (flatten small ones)",
    "Triton (compiled)": 'compiled kernels: torch.compile(mode="max-autotune"), or read the largest one\'s '
    "generated code (TORCH_LOGS=output_code)",
}
MEMORY_BOUND_ADVICE = (
    "these kernels move memory more than they compute: fuse them (torch.compile), run them in bf16, or call "
    "a fused kernel (fused cross-entropy, fused norm)"
)


def family_of(names: pl.Expr, families: tuple[Family, ...]) -> pl.Expr:
    """The first family whose pattern matches each kernel name (case-insensitive), else "other"."""
    expr: pl.Expr = pl.lit(OTHER_FAMILY)
    for family in reversed(families):
        expr = pl.when(names.str.contains(f"(?i){family.pattern}")).then(pl.lit(family.name)).otherwise(expr)
    return expr


def gpu_compute(ctx: Context) -> list[Finding]:
    """A GPU-compute-bound step, and the kernel family that takes the most of it."""
    min_compute = ctx.settings.number("gpu_compute", "min_compute_pct")
    min_family = ctx.settings.number("gpu_compute", "min_family_pct")
    factor = ctx.settings.number("gpu_compute", "factor")
    temporal = ctx.read("temporal")
    bound = [int(r) for r, pct in temporal.select("rank", "compute_pct").iter_rows() if (pct or 0.0) >= min_compute]
    if not bound:
        return []
    kernels = ctx.read("kernels", top_k=None).filter(
        (pl.col("kernel_type") == "COMPUTATION") & pl.col("rank").is_in(bound)
    )
    if kernels.height == 0:
        return []
    kernels = kernels.with_columns(family=family_of(pl.col("name"), ctx.settings.families))
    per_rank = kernels.group_by("rank", "family").agg(us=pl.col("sum_us").sum(), n=pl.col("count").sum())
    counts = pl.DataFrame({"rank": bound, "steps": [ctx.step_count(r) for r in bound]}).cast(
        {"rank": per_rank["rank"].dtype}
    )
    per_rank = per_rank.join(counts, on="rank").with_columns(per_step=pl.col("us") / pl.col("steps"))
    largest = (
        per_rank.group_by("family").agg(pl.col("per_step").mean()).sort("per_step", "family", descending=[True, False])
    )
    family = str(largest["family"][0])
    share = ctx.pct(float(largest["per_step"][0]))
    if share < min_family:
        return []
    mine = per_rank.filter(pl.col("family") == family)
    rank = int(worst_row(mine, "per_step")["rank"])
    row = mine.filter(pl.col("rank") == rank).row(0, named=True)
    top = worst_row(kernels.filter((pl.col("family") == family) & (pl.col("rank") == rank)), "sum_us")
    names = kernels.filter(pl.col("family") == family)["name"].n_unique()
    compute_pct = float(temporal.filter(pl.col("rank") == rank)["compute_pct"][0])
    top_name = str(top["name"])
    return [
        Finding(
            "gpu_compute",
            f"the step is bound by GPU compute, and {family} kernels take the most of it: "
            f"{row['per_step']:,.0f} µs a step ({ctx.pct(float(row['per_step'])):.0f} %)",
            ctx.where(bound, rank, f"{family} kernels"),
            f"the GPU computes {compute_pct:.0f} % of its span; {family}: {names} kernel names, {row['n']:,} launches; "
            f"the largest, {short_name(top_name)}: {ctx.per_step(float(top['sum_us']), rank):,.0f} µs a step",
            FAMILY_ADVICE.get(
                family,
                MEMORY_BOUND_ADVICE
                if family in _fusable(ctx)
                else "look at its largest kernels on the Kernels page, and at their ops' roof on the Ops page (f)",
            ),
            float(row["per_step"]) * (1.0 - factor),
            Evidence("kernels", "kernels", "main", (("rank", rank), ("name", top_name))),
            rank,
            Change("name", top_name, factor),
        )
    ]


def _fusable(ctx: Context) -> tuple[str, ...]:
    return ctx.settings.names("fusion", "families")


def gemm_rows(ctx: Context) -> pl.DataFrame:
    """The matrix multiplies of `report --view ops --group-by shape --flops` with a roofline figure:
    rank, name, input_dims, gpu_self_us, pct_of_peak, peak_tflop_per_s (the one place this rule
    reads the roofline's columns)."""
    ops = ctx.read("ops", group_by="shape", flops=True, top_k=None)
    wanted = ("category", "pct_of_peak", "peak_tflop_per_s", "gpu_self_us")
    if any(column not in ops.columns for column in wanted):
        return pl.DataFrame(schema={"rank": pl.Int32(), "name": pl.Utf8()})
    return ops.filter(
        (pl.col("category").str.to_lowercase() == "gemm")
        & pl.col("pct_of_peak").is_not_null()
        & (pl.col("gpu_self_us") > 0)
    ).select("rank", "name", "input_dims", "gpu_self_us", "pct_of_peak", "peak_tflop_per_s")


def gemm_roof(ctx: Context) -> list[Finding]:
    """Matrix multiplies far below their roof, or in fp32 math without tensor cores."""
    ceiling = ctx.settings.number("gemm_roof", "max_pct_of_peak")
    minimum = ctx.settings.number("gemm_roof", "min_pct")
    target = ctx.settings.number("gemm_roof", "target_pct_of_peak")
    tensor_cores = ctx.settings.number("gemm_roof", "tensor_core_min_tflops")
    rows = gemm_rows(ctx)
    if rows.height == 0:
        return []
    slow = rows.filter(pl.col("pct_of_peak") < ceiling).with_columns(
        fp32=pl.col("peak_tflop_per_s") < tensor_cores,
        lost=pl.col("gpu_self_us") * (1.0 - pl.col("pct_of_peak") / target).clip(0.0, 1.0),
    )
    found = []
    for rank in sorted(set(slow["rank"].to_list())):
        own = slow.filter(pl.col("rank") == rank)
        time = ctx.per_step(float(own["gpu_self_us"].sum()), rank)
        if ctx.pct(time) >= minimum:
            found.append((rank, time, ctx.per_step(float(own["lost"].sum()), rank), own))
    if not found:
        return []
    rank, time, lost, own = max(found, key=lambda f: f[2])
    top = worst_row(own, "lost")
    fp32 = bool(own.filter(pl.col("fp32"))["gpu_self_us"].sum() >= own["gpu_self_us"].sum() / 2)
    name = str(top["name"])
    what = (
        f"matrix multiplies run in fp32 without tensor cores: {time:,.0f} µs a step"
        if fp32
        else f"matrix multiplies run far below their roof: {time:,.0f} µs a step under {ceiling:.0f} % of it"
    )
    change = (
        'let them use tensor cores: torch.set_float32_matmul_precision("high") (TF32), or bf16 autocast '
        '(torch.autocast("cuda", dtype=torch.bfloat16))'
        if fp32
        else "small or odd shapes leave the GPU idle inside the kernel: batch small matmuls together, pad "
        "dimensions to multiples of 64, look at the largest row's shape on the Ops page (f)"
    )
    return [
        Finding(
            "gemm_roof",
            what,
            ctx.where([rank], rank, name),
            f"{own.height} shape(s) below {ceiling:.0f} % of the roof; the largest loss, {name} "
            f"{top['input_dims']}: {top['pct_of_peak']:.0f} % of {top['peak_tflop_per_s']:,.0f} TFLOP/s",
            change,
            lost,
            Evidence("ops", "ops", "main", (("rank", rank), ("name", name))),
            rank,
            Change("name", name, min(1.0, float(top["pct_of_peak"]) / target)),
        )
    ]


def fusion(ctx: Context) -> list[Finding]:
    """Chains of short memory-bound kernels back to back on a stream: one fused kernel each."""
    fusable = set(_fusable(ctx))
    min_chain = int(ctx.settings.number("fusion", "min_chain"))
    longest = ctx.settings.number("fusion", "max_kernel_us")
    minimum = ctx.settings.number("fusion", "min_pct")
    factor = ctx.settings.number("fusion", "factor")
    found = []
    for rank in ctx.ranks:
        kernels = ctx.facts(rank).kernels.with_columns(family=family_of(pl.col("name"), ctx.settings.families))
        member = pl.col("family").is_in(list(fusable)) & (pl.col("dur") < longest)
        # A chain: consecutive members on one stream (a non-member starts a new run).
        runs = kernels.with_columns(member=member).with_columns(
            run=(pl.col("member") != pl.col("member").shift(1).over("stream")).fill_null(True).cast(pl.Int64).cum_sum()
        )
        chains = (
            runs.filter("member")
            .group_by("run")
            .agg(n=pl.len(), us=pl.col("dur").sum())
            .filter(pl.col("n") >= min_chain)
        )
        if chains.height == 0:
            continue
        time = ctx.per_step(float(chains["us"].sum()), rank)
        if ctx.pct(time) < minimum:
            continue
        inside = runs.join(chains.select("run"), on="run", how="semi")
        top = worst_row(inside.group_by("name").agg(us=pl.col("dur").sum()), "us")
        found.append(
            (rank, time, ctx.per_step(chains.height, rank), chains["n"].sum() / chains.height, str(top["name"]))
        )
    if not found:
        return []
    rank, time, count, mean_n, name = max(found, key=lambda f: f[1])
    return [
        Finding(
            "fusion",
            f"chains of small memory-bound kernels: {count:,.0f} a step, {time:,.0f} µs "
            f"({ctx.pct(time):.1f} % of the step)",
            ctx.where([f[0] for f in found], rank),
            f"{mean_n:.1f} kernels a chain on average, back to back on one stream, each under {longest:,.0f} µs "
            f"(families: {', '.join(sorted(fusable))}); the most time: {short_name(name)}",
            "fuse them: torch.compile the model (inductor makes one kernel of each elementwise and normalization "
            "chain), or fused ops (fused LayerNorm or RMSNorm, fused optimizers, fused cross-entropy)",
            time * (1.0 - factor),
            Evidence("kernels", "kernels", "main", (("rank", rank), ("name", name))),
            rank,
            Change("name", name, factor),
        )
    ]
