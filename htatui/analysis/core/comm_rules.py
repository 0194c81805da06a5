"""Which GPU kernels and host events are communication: rules kept as data, extendable by the user.

The shipped rules live in `comm_rules.toml` beside this module: kernel rules (NCCL and RCCL in
every known spelling, MSCCL, HCCL, DeepEP, NVSHMEM, PyTorch symmetric memory, MTIA collectives)
and host rules, the collectives that run on the CPU (a process group's `gloo:`/`nccl:` ranges,
vLLM's shared-memory ops, the `c10d::` ops). Users add rules in TOML files of the same shape,
named by the scope's rules (`core.rules.Rules.comm_files`: `--comm-rules FILE`, or the
``HTATUI_COMM_RULES`` variable the faces read). `--hta-compat` keeps HTA 0.6.1's kernel name
prefixes; the host rules find the meeting points of every mode.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from htatui.analysis.core.rules import COMM_RULES_ENV, SHIPPED_RULES, Rules
from htatui.errors import HtatuiError
from htatui.sources.user_file import read_user_text

SHIPPED = Path(__file__).with_name("comm_rules.toml")
ENV_VAR = COMM_RULES_ENV
"""The variable whose files a face adds to the scope's rules (`core.rules.from_settings`)."""


class CommRulesError(HtatuiError, ValueError):
    """A rules file that cannot be read or has a bad rule; the message names the file."""


@dataclass(frozen=True)
class CommRule:
    """One naming rule: kernels whose name matches `pattern` (case-insensitive) are communication."""

    library: str
    pattern: str
    source: str
    example: str = ""


HOST_TIERS = ("range", "c10d")
"""A host rule's tier: "range" rows (a process group's `gloo:` range, a custom CPU collective op)
are a job's meeting points first; "c10d" rows only where no rank has a "range" row, as one call
is often both (a `c10d::allreduce_` op around its `gloo:all_reduce` range)."""


@dataclass(frozen=True)
class HostRule:
    """One host rule: host events (op or annotation) whose name matches `pattern` (case-insensitive)
    are a collective that ran on the CPU."""

    library: str
    pattern: str
    source: str
    tier: str = "range"
    kind: str = ""
    """The collective's kind when the name does not say it (else read from the name)."""
    example: str = ""


@dataclass(frozen=True)
class CpuCollective:
    """What a host event is when the rules call it a CPU collective."""

    library: str
    kind: str
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send/recv, barrier, …"""
    tier: str


@dataclass(frozen=True)
class CommRules:
    rules: tuple[CommRule, ...]
    categories: tuple[str, ...]
    host: tuple[HostRule, ...] = ()

    @property
    def regex(self) -> str:
        """One case-insensitive regex matching any rule's pattern."""
        return "(?i)" + "|".join(f"(?:{rule.pattern})" for rule in self.rules) if self.rules else r"$^"

    def host_regex(self, tier: str | None = None) -> str:
        """One case-insensitive regex matching the host rules' patterns (of one tier, or all)."""
        chosen = [rule.pattern for rule in self.host if tier is None or rule.tier == tier]
        return "(?i)" + "|".join(f"(?:{pattern})" for pattern in chosen) if chosen else r"$^"

    @property
    def fingerprint(self) -> str:
        """A short digest of what the rules call communication (stored with figures made under them)."""
        host = [f"{rule.tier}:{rule.kind}:{rule.pattern}" for rule in self.host]
        text = "\n".join([self.regex, *self.categories, *host])
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


def _entries(path: Path, data: dict[str, Any], table: str, what: str) -> list[tuple[int, dict[str, Any], str]]:
    """The `[[table]]` entries of a rules file, numbered, each with its valid `pattern`."""
    entries = data.get(table, [])
    if not isinstance(entries, list):
        raise CommRulesError(f"{path}: '{table}' must be an array of tables ([[{table}]])")
    found = []
    for number, entry in enumerate(entries, start=1):
        pattern = entry.get("pattern") if isinstance(entry, dict) else None
        if not isinstance(pattern, str) or not pattern:
            raise CommRulesError(f"{path}: {what} {number} has no 'pattern' string")
        if not _valid_regex(pattern):
            raise CommRulesError(f"{path}: {what} {number} pattern {pattern!r} is not a valid regex")
        found.append((number, entry, pattern))
    return found


def _read_host(path: Path, data: dict[str, Any]) -> list[HostRule]:
    rules: list[HostRule] = []
    for number, entry, pattern in _entries(path, data, "host", "host rule"):
        tier = entry.get("tier", "range")
        if tier not in HOST_TIERS:
            raise CommRulesError(
                f"{path}: host rule {number} tier must be one of {', '.join(HOST_TIERS)}; got {tier!r}"
            )
        kind = entry.get("kind", "")
        if not isinstance(kind, str):
            raise CommRulesError(f"{path}: host rule {number} 'kind' must be a string")
        library = str(entry.get("library", "user"))
        rules.append(HostRule(library, pattern, str(path), tier, kind, str(entry.get("example", ""))))
    return rules


def _read(path: Path) -> tuple[list[CommRule], list[str], list[HostRule]]:
    try:
        data: dict[str, Any] = tomllib.loads(read_user_text(path))
    except OSError as exc:
        raise CommRulesError(f"{path}: cannot read communication rules ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CommRulesError(f"{path}: not a valid TOML rules file ({exc})") from None
    rules = [
        CommRule(str(entry.get("library", "user")), pattern, str(path), str(entry.get("example", "")))
        for _number, entry, pattern in _entries(path, data, "rule", "rule")
    ]
    categories = data.get("categories", [])
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise CommRulesError(f"{path}: 'categories' must be a list of strings")
    return rules, list(categories), _read_host(path, data)


@lru_cache(maxsize=8)
def _load(user_files: tuple[str, ...]) -> CommRules:
    rules, categories, host = _read(SHIPPED)
    for name in user_files:
        more_rules, more_categories, more_host = _read(Path(name))
        rules.extend(more_rules)
        categories.extend(c for c in more_categories if c not in categories)
        host.extend(more_host)
    return CommRules(tuple(rules), tuple(categories), tuple(host))


def comm_rules(rules: Rules = SHIPPED_RULES) -> CommRules:
    """The shipped rules plus the user's files in `rules` (read once per distinct list of files)."""
    return _load(rules.comm_files)


def is_comm_kernel(rules: Rules) -> pl.Expr:
    """True for a kernel row that the rules call communication: its name, or collective args on it."""
    comm = comm_rules(rules)
    name = pl.col("name").cast(pl.Utf8)
    by_name = name.str.contains(comm.regex).fill_null(False)
    by_args = pl.col("collective_name").is_not_null()
    return by_name | by_args


def comm_categories(rules: Rules) -> list[str]:
    """Event categories whose every row is communication (empty in the shipped rules)."""
    return list(comm_rules(rules).categories)


# (substring of the lower-cased name without '_', kind): first match wins, so longer names first.
_KINDS = (
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send/recv"),
    ("send", "send/recv"),
    ("recv", "send/recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)
_BACKEND_PREFIX = re.compile(r"^(gloo|nccl|mpi|ucc|xccl|hccl|mccl|c10d|_c)::?", re.IGNORECASE)


def kind_from_name(name: str) -> str | None:
    """all_reduce, all_gather, … read from a kernel or op name ('nccl:_all_gather_base',
    'ncclDevKernel_AllReduce_…', '_C::shm_allreduce'); None when the name says no kind."""
    squashed = _BACKEND_PREFIX.sub("", name).lower().replace("_", "")
    for needle, kind in _KINDS:
        if needle in squashed:
            return kind
    return None


def cpu_collective(name: str, rules: Rules = SHIPPED_RULES) -> CpuCollective | None:
    """Whether a host event (op or annotation) of this name is a CPU collective by the rules, and
    which: the first matching host rule's library, tier and kind (its own `kind`, else the name's).

    The one answer every reader of host collectives shares: the Ranks views' meeting points,
    stragglers, `check`, and the step model's collective edges.
    """
    return _cpu_collective(name, comm_rules(rules))


@lru_cache(maxsize=4096)
def _cpu_collective(name: str, rules: CommRules) -> CpuCollective | None:
    for rule in rules.host:
        if pl.Series([name]).str.contains(f"(?i){rule.pattern}")[0]:
            kind = rule.kind or kind_from_name(name) or _BACKEND_PREFIX.sub("", name)
            return CpuCollective(rule.library, kind, rule.tier)
    return None


def cpu_collective_names(names: pl.Series, rules: Rules, tier: str | None = None) -> pl.Series:
    """The names among `names` (text; distinct ones are enough) that are CPU collectives by the
    rules, of one tier or any."""
    text = names.cast(pl.Utf8)
    return text.filter(text.str.contains(comm_rules(rules).host_regex(tier)).fill_null(False))


def is_cpu_collective(rules: Rules, tier: str | None = None) -> pl.Expr:
    """True for a row whose `name` is a CPU collective by the rules (any category: callers pick
    the host rows)."""
    return pl.col("name").cast(pl.Utf8).str.contains(comm_rules(rules).host_regex(tier)).fill_null(False)
