"""A digest of htatui's own source: what every kept answer records it was made by.

Kept things (a parse-cache entry, a dataset, a rank's kept tables, the job's derived values)
carry the digest of the code that made them and are served only to the same code, so an edit
is never answered from yesterday's rows and no version number is bumped by hand.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
"""The `htatui` package folder."""

_SOURCE_SUFFIXES = (".py", ".toml")
"""Code, and the data shipped beside it (the communication rules, the device peaks)."""


@functools.cache
def source_digest(packages: tuple[str, ...]) -> str:
    """A digest of the source files of these subpackages of htatui (`("trace", "sources")`)."""
    digest = hashlib.sha256()
    for package in sorted(packages):
        for path in sorted((PACKAGE / package).rglob("*")):
            if path.suffix in _SOURCE_SUFFIXES and path.is_file():
                digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:32]


PARSER_CODE = ("sources", "trace")
"""What turns a trace file into a rank's frame: a parse-cache entry is made by it."""


def parser_digest() -> str:
    """The digest of the code that parses a trace file (a parse-cache entry's key holds it)."""
    return source_digest(PARSER_CODE)
