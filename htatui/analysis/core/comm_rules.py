"""Which GPU kernels are communication: rules kept as data, extendable by the user.

The shipped rules live in `comm_rules.toml` beside this module (NCCL and RCCL in every known
spelling, MSCCL, HCCL, DeepEP, NVSHMEM, PyTorch symmetric memory, MTIA collectives). Users add
rules in TOML files of the same shape, named in the ``HTATUI_COMM_RULES`` environment variable
(``os.pathsep``-separated); `htatui report --comm-rules FILE` sets it. Only htatui's corrected
typing uses them: `--hta-compat` keeps HTA 0.6.1's name prefixes.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from htatui.sources.user_file import read_user_text

ENV_VAR = "HTATUI_COMM_RULES"
SHIPPED = Path(__file__).with_name("comm_rules.toml")


class CommRulesError(ValueError):
    """A rules file that cannot be read or has a bad rule; the message names the file."""


@dataclass(frozen=True)
class CommRule:
    """One naming rule: kernels whose name matches `pattern` (case-insensitive) are communication."""

    library: str
    pattern: str
    source: str
    example: str = ""


@dataclass(frozen=True)
class CommRules:
    rules: tuple[CommRule, ...]
    categories: tuple[str, ...]

    @property
    def regex(self) -> str:
        """One case-insensitive regex matching any rule's pattern."""
        return "(?i)" + "|".join(f"(?:{rule.pattern})" for rule in self.rules) if self.rules else r"$^"

    @property
    def fingerprint(self) -> str:
        """A short digest of what the rules call communication (stored with figures made under them)."""
        text = "\n".join([self.regex, *self.categories])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def library_of(self, name: str) -> str | None:
        """The library of the first rule matching `name` (for tables and tests), or None."""
        for rule in self.rules:
            if pl.Series([name]).str.contains(f"(?i){rule.pattern}")[0]:
                return rule.library
        return None


def _valid_regex(pattern: str) -> bool:
    try:
        pl.Series([""]).str.contains(f"(?i){pattern}")
    except pl.exceptions.ComputeError:
        return False
    return True


def _read(path: Path) -> tuple[list[CommRule], list[str]]:
    try:
        data: dict[str, Any] = tomllib.loads(read_user_text(path))
    except OSError as exc:
        raise CommRulesError(f"{path}: cannot read communication rules ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CommRulesError(f"{path}: not a valid TOML rules file ({exc})") from None
    rules: list[CommRule] = []
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise CommRulesError(f"{path}: 'rule' must be an array of tables ([[rule]])")
    for number, entry in enumerate(entries, start=1):
        pattern = entry.get("pattern") if isinstance(entry, dict) else None
        if not isinstance(pattern, str) or not pattern:
            raise CommRulesError(f"{path}: rule {number} has no 'pattern' string")
        if not _valid_regex(pattern):
            raise CommRulesError(f"{path}: rule {number} pattern {pattern!r} is not a valid regex")
        library = entry.get("library", "user")
        rules.append(CommRule(str(library), pattern, str(path), str(entry.get("example", ""))))
    categories = data.get("categories", [])
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise CommRulesError(f"{path}: 'categories' must be a list of strings")
    return rules, list(categories)


@lru_cache(maxsize=8)
def _load(user_files: tuple[str, ...]) -> CommRules:
    rules, categories = _read(SHIPPED)
    for name in user_files:
        more_rules, more_categories = _read(Path(name))
        rules.extend(more_rules)
        categories.extend(c for c in more_categories if c not in categories)
    return CommRules(tuple(rules), tuple(categories))


def user_rule_files() -> tuple[str, ...]:
    value = os.environ.get(ENV_VAR, "")
    return tuple(part for part in value.split(os.pathsep) if part.strip())


def comm_rules() -> CommRules:
    """The shipped rules plus the user's (read once per distinct HTATUI_COMM_RULES value)."""
    return _load(user_rule_files())


def add_user_rule_file(path: Path) -> None:
    """Add `path` to HTATUI_COMM_RULES for this process, after checking it reads."""
    _read(path)
    files = [*user_rule_files(), str(path)]
    os.environ[ENV_VAR] = os.pathsep.join(files)


def is_comm_kernel() -> pl.Expr:
    """True for a kernel row that the rules call communication: its name, or collective args on it."""
    rules = comm_rules()
    name = pl.col("name").cast(pl.Utf8)
    by_name = name.str.contains(rules.regex).fill_null(False)
    by_args = pl.col("collective_name").is_not_null()
    return by_name | by_args


def comm_categories() -> list[str]:
    """Event categories whose every row is communication (empty in the shipped rules)."""
    return list(comm_rules().categories)
