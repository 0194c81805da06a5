"""The rules every number is made under: the user's communication rules, device peaks and
diagnosis thresholds, as one frozen value chosen once by a face and carried on the scope.

A face (the CLI, the app) makes it from its flags and, as the user's defaults, the
``HTATUI_COMM_RULES``, ``HTATUI_DEVICE_PEAKS`` and ``HTATUI_DIAGNOSIS_RULES`` variables it
reads once (`from_settings`); nothing below the faces reads or writes the environment. As a
field of `Scope` it is part of every key an answer is kept under (`core.kept`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

COMM_RULES_ENV = "HTATUI_COMM_RULES"
DEVICE_PEAKS_ENV = "HTATUI_DEVICE_PEAKS"
DIAGNOSIS_RULES_ENV = "HTATUI_DIAGNOSIS_RULES"


@dataclass(frozen=True)
class Rules:
    """The user's rule files, in the order given (empty: the shipped rules alone)."""

    comm_files: tuple[str, ...] = ()
    """Communication rules added to `comm_rules.toml` (`core.comm_rules`)."""
    peaks_files: tuple[str, ...] = ()
    """Devices tried before `peaks.toml` (`perf.peaks`)."""
    diagnosis_files: tuple[str, ...] = ()
    """Thresholds changing `rules.toml` (`diagnosis.settings`)."""

    def files(self) -> tuple[str, ...]:
        """Every user file, each kind in its order."""
        return (*self.comm_files, *self.peaks_files, *self.diagnosis_files)


SHIPPED_RULES = Rules()
"""The shipped rules alone (no user file)."""


def _listed(value: str) -> tuple[str, ...]:
    return tuple(part for part in value.split(os.pathsep) if part.strip())


def from_settings(
    environ: Mapping[str, str],
    comm: Iterable[Path | str] = (),
    peaks: Iterable[Path | str] = (),
    diagnosis: Iterable[Path | str] = (),
) -> Rules:
    """The rules a face chose: the files its environment names (``os.pathsep``-separated), then
    the files its flags name."""
    return Rules(
        (*_listed(environ.get(COMM_RULES_ENV, "")), *map(str, comm)),
        (*_listed(environ.get(DEVICE_PEAKS_ENV, "")), *map(str, peaks)),
        (*_listed(environ.get(DIAGNOSIS_RULES_ENV, "")), *map(str, diagnosis)),
    )
