"""The Diagnosis rules' thresholds, kept as data and changed by the user's files.

The shipped values live in `rules.toml` beside this module; users change them in TOML files of the
same shape named by the scope's rules (`core.rules.Rules.diagnosis_files`: `--diagnosis-rules FILE`,
or the ``HTATUI_DIAGNOSIS_RULES`` variable the faces read): a number or switch replaces the shipped
value, a list adds to it, `[[family]]` entries come before the shipped families (the first that
matches a kernel wins).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.errors import HtatuiError

SHIPPED = Path(__file__).with_name("rules.toml")

Value = bool | float | tuple[str, ...]


class DiagnosisRulesError(HtatuiError, ValueError):
    """A rules file that cannot be read or has a bad entry; the message names the file."""


@dataclass(frozen=True)
class Family:
    """A kernel family: kernels whose name matches `pattern` (case-insensitive)."""

    name: str
    pattern: str


@dataclass(frozen=True)
class Settings:
    """Every rule's values by rule id, and the kernel families in the order they are tried."""

    rules: dict[str, dict[str, Value]]
    families: tuple[Family, ...]

    def enabled(self, rule: str) -> bool:
        return bool(self.rules[rule]["enabled"])

    def number(self, rule: str, key: str) -> float:
        value = self.rules[rule][key]
        assert isinstance(value, float), f"{rule}.{key} is not a number"
        return value

    def names(self, rule: str, key: str) -> tuple[str, ...]:
        value = self.rules[rule][key]
        assert isinstance(value, tuple), f"{rule}.{key} is not a list"
        return value


def _valid_regex(pattern: str) -> bool:
    try:
        pl.Series([""]).str.contains(pattern)
    except pl.exceptions.ComputeError:
        return False
    return True


def _value(path: Path, where: str, value: Any) -> Value:
    """A TOML value as a rule value: a switch, a number (as float) or a list of regexes."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        for item in value:
            if not _valid_regex(item):
                raise DiagnosisRulesError(f"{path}: {where}: {item!r} is not a valid regex")
        return tuple(value)
    raise DiagnosisRulesError(f"{path}: {where} must be a number, true/false or a list of strings")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DiagnosisRulesError(f"{path}: cannot read diagnosis rules ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DiagnosisRulesError(f"{path}: not a valid TOML rules file ({exc})") from None


def _families(path: Path, entries: Any) -> list[Family]:
    if not isinstance(entries, list):
        raise DiagnosisRulesError(f"{path}: 'family' must be an array of tables ([[family]])")
    out = []
    for number, entry in enumerate(entries, start=1):
        name = entry.get("name") if isinstance(entry, dict) else None
        pattern = entry.get("pattern") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(pattern, str) or not name or not pattern:
            raise DiagnosisRulesError(f"{path}: family {number} needs a 'name' and a 'pattern' string")
        if not _valid_regex(f"(?i){pattern}"):
            raise DiagnosisRulesError(f"{path}: family {name!r} pattern {pattern!r} is not a valid regex")
        out.append(Family(name, pattern))
    return out


def _shipped() -> tuple[dict[str, dict[str, Value]], list[Family]]:
    data = _read_toml(SHIPPED)
    families = _families(SHIPPED, data.pop("family", []))
    rules = {
        rule: {key: _value(SHIPPED, f"{rule}.{key}", value) for key, value in table.items()}
        for rule, table in data.items()
    }
    return rules, families


def _apply(path: Path, rules: dict[str, dict[str, Value]], families: list[Family]) -> list[Family]:
    """The user file at `path` applied to `rules` (in place); its families before `families`."""
    data = _read_toml(path)
    added = _families(path, data.pop("family", []))
    for rule, table in data.items():
        if rule not in rules:
            known = ", ".join(sorted(rules))
            raise DiagnosisRulesError(f"{path}: no rule {rule!r} (rules: {known})")
        if not isinstance(table, dict):
            raise DiagnosisRulesError(f"{path}: [{rule}] must be a table")
        for key, raw in table.items():
            if key not in rules[rule]:
                keys = ", ".join(rules[rule])
                raise DiagnosisRulesError(f"{path}: rule {rule!r} has no key {key!r} (keys: {keys})")
            value, shipped = _value(path, f"{rule}.{key}", raw), rules[rule][key]
            if type(value) is not type(shipped):
                raise DiagnosisRulesError(f"{path}: {rule}.{key} must be {_kind(shipped)}, like the shipped value")
            rules[rule][key] = (*shipped, *value) if isinstance(shipped, tuple) else value  # type: ignore[misc]
    return [*added, *families]


def _kind(value: Value) -> str:
    if isinstance(value, bool):
        return "true or false"
    return "a list of strings" if isinstance(value, tuple) else "a number"


@lru_cache(maxsize=8)
def _load(user_files: tuple[str, ...]) -> Settings:
    rules, families = _shipped()
    for name in user_files:
        families = _apply(Path(name), rules, families)
    return Settings(rules, tuple(families))


def settings(rules: Rules = SHIPPED_RULES) -> Settings:
    """The shipped rules changed by the user's files in `rules` (read once per distinct list of files)."""
    return _load(rules.diagnosis_files)
