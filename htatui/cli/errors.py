"""The CLI's one error path: `htatui: MESSAGE` on stderr, exit 2.

Every refused input ends here: a runner returns `fail(message)` for a problem it finds itself,
and `main` catches any `HtatuiError` (htatui/errors.py) a runner lets through and prints it the same way.
"""

from __future__ import annotations

import sys

REFUSED = 2
"""The exit status of input htatui refuses (a file, a flag's value, a rank that is not there)."""


def fail(message: object) -> int:
    """Print one line, `htatui: MESSAGE`, on stderr; the exit status to return (2)."""
    print(f"htatui: {message}", file=sys.stderr)
    return REFUSED
