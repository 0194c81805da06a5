"""Names on disk of a job dataset; the trace loader asks `is_dataset` of every folder it is given."""

from __future__ import annotations

from pathlib import Path

MANIFEST = "htatui-dataset.json"
SUMMARY = "summary.arrow"
TABLES = "tables"


def is_dataset(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()
