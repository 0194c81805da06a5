"""A view's tunable options, declared once on its options dataclass and read by every face.

`knob(default, flag=…, help=…, label=…)` is a dataclass field whose metadata says how the CLI
spells it (`--top`), what it means, and how a screen labels its input; `htatui report` makes its
flags from these (defaults in `--help` read from the field, never restated) and screens make
their option inputs from them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

Kind = Literal["int", "float", "text", "ints", "switch"]
"""How a value is typed in: a number, text, a comma list of integers, or a flag with no value."""

T = TypeVar("T")


@dataclass(frozen=True)
class Knob:
    """How one option field is offered to users."""

    flag: str
    help: str
    kind: Kind
    label: str
    minimum: float | None = None
    maximum: float | None = None


def knob(
    default: T,
    *,
    flag: str,
    help: str,  # noqa: A002 - the word argparse uses
    kind: Kind,
    label: str = "",
    minimum: float | None = None,
    maximum: float | None = None,
) -> T:
    """A dataclass field with `default` and the knob's metadata (see the module docstring)."""
    spec = Knob(flag, help, kind, label or flag.removeprefix("--").replace("-", " "), minimum, maximum)
    return dataclasses.field(default=default, metadata={"knob": spec})


def knobs_of(options: type[Any] | Any) -> dict[str, Knob]:
    """The knob fields of an options class (or instance), by field name, in declaration order."""
    return {f.name: f.metadata["knob"] for f in dataclasses.fields(options) if "knob" in f.metadata}


def parse(kind: Kind, text: str) -> Any:
    """A typed value from what a user typed; ValueError when it is not of that kind."""
    if kind == "int":
        # "all" lifts a limit such as a top-k (None in the options).
        return None if text.strip().lower() == "all" else int(text)
    if kind == "float":
        return float(text)
    if kind == "ints":
        return tuple(int(part) for part in text.split(",") if part.strip())
    if kind == "switch":
        return text.strip().lower() in ("1", "true", "yes", "on")
    return text
