"""What a table's columns are: one declaration per column (`ColumnSpec`), read by every face.

A view module declares each table's columns once, in order, as a `TableColumns`; from it come the
empty frame's dtypes (`schema`, `empty`), the header a person reads in `report` and the app
(`label`), which columns stay when a table is narrowed (`importance`: the answer first), the
unit a CSV/JSON float is kept to (`unit`), `report --help` and docs/tables.md (`meaning`).
tests/analysis/test_column_specs.py checks that every column of every registered table has one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Literal

import polars as pl

Importance = Literal["id", "key", "normal", "low"]
"""`id` says what a row is (rank, name) and `key` is the answer the table exists for: neither is
left out to fit a width; `low` columns are left out first, then `normal` ones (rightmost first)."""

UNITS: tuple[tuple[str, str], ...] = (
    ("_us", "µs"),
    ("_pct", "%"),
    ("_ms", "ms"),
    ("_bytes", "B"),
    ("_gbps", "GB/s"),
)
"""Units read from a name's suffix (the project's naming rule: `idle_us`, `idle_pct`)."""

KEPT_DECIMALS: dict[str, int] = {"µs": 3, "ms": 6, "%": 6}
"""Decimals a float of this unit keeps in CSV, JSON and Parquet: the trace's ns and no more
(µs to 3 decimals); a share to 1e-6 % (a ns of a 0.1 s span)."""

SHORT_WORDS: dict[str, str] = {
    "non_compute": "non-comp",
    "compute": "comp",
    "duration": "dur",
    "kernel_type": "type",
    "straggler": "strag",
    "count": "n",
}
"""Words a derived label spells short, so headers stay narrow (the unit always stays)."""

ID_NAMES = frozenset({"rank", "name", "job", "kernel", "operator", "op", "view", "metric", "call_path"})
LOW_NAMES = frozenset({"warnings", "rank_source", "file", "device", "std_us", "min_us", "max_us", "kernel_type"})
"""Importance of a column of a table that declares none (`info`, `check`, a diff): by its name."""


def unit_of(name: str) -> str:
    """The unit a column's name carries: 'idle_us' → 'µs', 'bw_gbps' → 'GB/s', 'count' → ''."""
    for suffix, symbol in UNITS:
        if name.endswith(suffix):
            return symbol
    return ""


def derived_label(name: str, unit: str | None = None) -> str:
    """'non_compute_us' → 'non-comp µs': the name's words, some spelled short, then the unit."""
    stem = name
    for suffix, symbol in UNITS:
        if name.endswith(suffix) and (unit is None or unit == symbol):
            stem = name[: -len(suffix)]
            break
    shown = unit if unit is not None else unit_of(name)
    padded = f"_{stem}_"
    for word, short in SHORT_WORDS.items():
        padded = padded.replace(f"_{word}_", f"_{short}_")
    return f"{padded.replace('_', ' ').strip()} {shown}".strip()


@dataclass(frozen=True)
class ColumnSpec:
    """One column: its name, dtype, one-line meaning and importance; unit and label follow from the
    name unless given. A name with `*` stands for the columns named from the data (a rank's
    counters, a CPU phase), each matching it."""

    name: str
    dtype: pl.DataType
    meaning: str
    importance: Importance = "normal"
    unit: str | None = None
    """None: read from the name's suffix (`_us` → µs)."""
    label: str | None = None
    """The header people read, in `report` and the app alike; None: derived from the name."""
    sentence: bool = False
    """A sentence (a cause, a reason): cut at its end when narrowed, never shortened by meaning."""

    @property
    def shown_unit(self) -> str:
        return self.unit if self.unit is not None else unit_of(self.name)

    def header(self, column: str | None = None) -> str:
        """The label of this column (or, for a pattern, of the data's `column` it matched)."""
        if self.label is not None:
            return self.label
        return derived_label(column or self.name, self.unit)

    @property
    def is_pattern(self) -> bool:
        return "*" in self.name

    def matches(self, column: str) -> bool:
        return fnmatchcase(column, self.name) if self.is_pattern else column == self.name


def derived_spec(name: str, dtype: pl.DataType) -> ColumnSpec:
    """The spec of a column of a table that declares none: label and unit from its name."""
    importance: Importance = "id" if name in ID_NAMES else "low" if name in LOW_NAMES else "normal"
    return ColumnSpec(name, dtype, "", importance)


class MissingColumnSpec(KeyError):
    """A table's column with no declaration: its message says where to add one."""


@dataclass(frozen=True)
class TableColumns:
    """A table's columns in their order: exact names, and patterns for columns named from the data."""

    specs: tuple[ColumnSpec, ...]

    def __init__(self, *specs: ColumnSpec) -> None:
        object.__setattr__(self, "specs", specs)
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"a column is declared twice: {sorted(n for n in names if names.count(n) > 1)[0]}")

    @property
    def schema(self) -> dict[str, pl.DataType]:
        """The exact columns and their dtypes, in order (the empty frame's schema)."""
        return {spec.name: spec.dtype for spec in self.specs if not spec.is_pattern}

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)

    def conform(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`frame`'s exact columns in the declared order and dtypes (its other columns dropped)."""
        return frame.select(pl.col(name).cast(dtype) for name, dtype in self.schema.items())

    def find(self, column: str) -> ColumnSpec | None:
        """The spec of a column: by its exact name, else the first pattern it matches."""
        for spec in self.specs:
            if not spec.is_pattern and spec.name == column:
                return spec
        return next((spec for spec in self.specs if spec.is_pattern and spec.matches(column)), None)

    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs)

    def key(self) -> tuple[str, ...]:
        """The columns the table exists for, in their order (the first sorts a cut summary)."""
        return tuple(spec.name for spec in self.specs if spec.importance == "key" and not spec.is_pattern)

    def __add__(self, other: TableColumns) -> TableColumns:
        return TableColumns(*self.specs, *other.specs)

    def ranked(self, importance: Importance, *names: str) -> TableColumns:
        """The same columns with `names` given `importance` (tables that share columns, not answers)."""
        unknown = set(names) - set(self.names())
        if unknown:
            raise ValueError(f"no column {sorted(unknown)[0]!r} to rank")
        return TableColumns(*(replace(s, importance=importance) if s.name in names else s for s in self.specs))


def specs_for(frame: pl.DataFrame, columns: TableColumns | None) -> list[ColumnSpec]:
    """One spec per column of `frame`, in its order: the declared one, else one derived from the name
    (a pattern's label is the column's own)."""
    out = []
    for name, dtype in frame.schema.items():
        spec = columns.find(name) if columns is not None else None
        if spec is None:
            out.append(derived_spec(name, dtype))
        elif spec.is_pattern:
            out.append(ColumnSpec(name, spec.dtype, spec.meaning, spec.importance, spec.unit, None, spec.sentence))
        else:
            out.append(spec)
    return out


# ---- columns many tables share: declared once, used by name ------------------------------------
RANK = ColumnSpec("rank", pl.Int32(), "the rank (one trace file of the job)", "id")
STREAM = ColumnSpec("stream", pl.Int64(), "the GPU stream (CUDA stream id)", "id")
STEP = ColumnSpec("step", pl.Int64(), "the ProfilerStep number", "id")
KERNEL_NAME = ColumnSpec("name", pl.Utf8(), "the kernel's name as recorded", "id")
OP_NAME = ColumnSpec("name", pl.Utf8(), "the op's name as recorded", "id")
