"""The one error base and the one cancellation every layer may raise; this module imports nothing.

An `HtatuiError`'s message is one line naming the file or the value and the problem; the CLI
prints it once as `htatui: MESSAGE` with exit 2 (htatui/cli/errors.py), the app as a notification.
"""

from __future__ import annotations


class HtatuiError(Exception):
    """Input the user gave that htatui refuses; `str(error)` is the whole one-line message."""


class Cancelled(Exception):
    """The user cancelled the work; nothing is wrong and nothing is said."""
