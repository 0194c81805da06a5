"""Errors every layer may raise and every face reports as one line; this module imports nothing heavy."""

from __future__ import annotations

from htatui.errors import HtatuiError


class EventsUnavailable(HtatuiError):
    """A rank's stored events could not be read when first asked for; the message is one line."""
