"""The options every view takes: the scope, and the table-with-a-sentence some views answer with."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Self, TypeVar

import polars as pl

from htatui.analysis.core.scope import Scope


@dataclass(frozen=True)
class CommonOptions:
    """What every view takes: the scope (ranks, steps, mode); a view's options add its knobs."""

    scope: Scope = field(default_factory=Scope)

    @property
    def ranks(self) -> tuple[int, ...] | None:
        """The scope's ranks (None = every rank)."""
        return self.scope.ranks

    @property
    def hta_compat(self) -> bool:
        """Whether the scope follows HTA 0.6.1's rules and quirks."""
        return self.scope.hta_compat

    def with_ranks(self, ranks: tuple[int, ...] | None) -> Self:
        """The same options over other ranks."""
        return replace(self, scope=self.scope.with_ranks(ranks))


@dataclass(frozen=True)
class NotedTable:
    """A table and the sentence that goes with it: why it is empty, or how it was made."""

    frame: pl.DataFrame
    message: str | None = None


OptionsT = TypeVar("OptionsT", bound=CommonOptions)
