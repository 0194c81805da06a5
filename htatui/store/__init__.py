"""The job dataset: per-rank columnar files + a per-rank summary table, written by `htatui ingest`.

Modules: `layout` (names on disk; imported by the trace loader), `dataset` (read and write),
`summary` (the per-rank summary row), `ingest` (local process pool or Ray tasks).
"""
