"""A performance model from shapes: FLOPs and bytes moved per operator call (Textual-free, pure).

`call.OpCall` is one call's recorded arguments (`Input Dims`, `Input type`, `Input Strides`,
`Concrete Inputs`); `dispatch.estimate` names the formula for the op and returns an `Estimate`
(FLOPs, bytes, the model's name, the category) or None. One module per op family (`gemm`,
`conv`, `attention`, `elementwise`, `norm`, `reduce`, `memory_ops`, `foreach`, `triton` for
inductor's launchers, `vendor` for vLLM / SGLang / aiter ops); `dtypes` gives element sizes and
the peak-table dtype, `kernels` the dtype a kernel's name says it computes in; `peaks` reads the
device roofs (`peaks.toml`: matrix and vector per dtype). `frames` makes the per-call figures,
`roofline` the rows and their roofs, `table` the ops table's columns. Every formula and its
source (TraceLens's perf model, where it has one) is in docs/semantics-perf-model.md.
"""
