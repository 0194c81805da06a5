"""The one cache rule: an answer is kept under what it was made from, and served only for that.

What it was made from is the table (or derived value), its options, the rules (`core.rules`:
communication rules, device peaks, diagnosis thresholds) and htatui's code. Every layer keys by
all four: the job's derived values in memory (`memo.memoised`, the tables `registry.make_table`
made: the scope, and so its rules, is in each key), and on disk a trace folder's parse-cache
entries and a dataset (their tag or summary rows carry `made_with()`; what they store is the
default scope's, whose rules are the shipped ones, so the code's digest covers them). Memory is
looked in first, then disk; an answer made is kept in both.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from htatui.analysis.core.comm_rules import comm_rules
from htatui.analysis.core.rules import Rules
from htatui.trace.code import source_digest

ANSWER_CODE = ("analysis", "jobs", "sources", "store", "trace")
"""The code an answer depends on: the parser, the dataset, the analysis and the per-rank summaries."""


def code_digest() -> str:
    """The digest of the code every answer is made by (the shipped rules' TOML included)."""
    return source_digest(ANSWER_CODE)


def rules_key(rules: Rules) -> str:
    """What a number made under `rules` depends on: the communication rules' fingerprint and each
    user file by name, size and time (the shipped ones are code)."""
    files = []
    for name in rules.files():
        try:
            info = os.stat(name)
            files.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
        except OSError:
            files.append(f"{name}:absent")
    return f"comm {comm_rules(rules).fingerprint}|files {';'.join(files)}"


def made_with() -> str:
    """What every answer kept on disk records it was made with: a digest of the code (its rules
    are the shipped ones, `Scope.is_default`)."""
    return hashlib.sha256(code_digest().encode()).hexdigest()[:16]


def options_key(options: Any) -> str:
    """A view's options as a key: every field, the scope's included (a frozen dataclass's repr),
    and what the scope's user rule files hold now."""
    rules = options.scope.rules
    return repr(options) if not rules.files() else f"{options!r}|{rules_key(rules)}"
