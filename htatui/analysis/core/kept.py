"""The one cache rule: an answer is kept under what it was made from, and served only for that.

What it was made from is the table (or derived value), its options, the rules (communication
rules, device peaks) and htatui's code. Every layer keys by all four: the job's derived values in
memory (`memo.memoised`, the tables `registry.make_table` made), and on disk a trace folder's
parse-cache entries and a dataset (their tag or summary rows carry `made_with()`). Memory is
looked in first, then disk; an answer made is kept in both.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from htatui.analysis.core.comm_rules import comm_rules
from htatui.trace.code import source_digest

ANSWER_CODE = ("analysis", "jobs", "sources", "store", "trace")
"""The code an answer depends on: the parser, the dataset, the analysis and the per-rank summaries."""

_PEAKS_SETTING = "HTATUI_DEVICE_PEAKS"
"""`htatui.analysis.perf.peaks.ENV_VAR`, named here as core cannot import perf."""


def code_digest() -> str:
    """The digest of the code every answer is made by."""
    return source_digest(ANSWER_CODE)


def rules_key() -> str:
    """The rules every number is made under: the communication rules and the user's device peaks
    (each user file by name, size and time; the shipped ones are code). The one place the settings
    join a key."""
    peaks = []
    for name in os.environ.get(_PEAKS_SETTING, "").split(os.pathsep):
        if name.strip():
            try:
                info = os.stat(name)
                peaks.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")
            except OSError:
                peaks.append(f"{name}:absent")
    return f"comm {comm_rules().fingerprint}|peaks {';'.join(peaks)}"


def made_with() -> str:
    """What every kept answer records it was made with: a digest of the rules and the code."""
    return hashlib.sha256(f"{rules_key()}|{code_digest()}".encode()).hexdigest()[:16]


def options_key(options: Any) -> str:
    """A view's options as a key: every field, the scope's included (a frozen dataclass's repr)."""
    return repr(options)
