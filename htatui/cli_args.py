"""Argument parsing shared by the subcommands (kept apart from cli.py so subcommand modules need not import it)."""

from __future__ import annotations

import argparse


def parse_ranks(text: str | None) -> tuple[int, ...] | None:
    """'0,3' → (0, 3); 'all' or None → None (every rank)."""
    if text is None or text.strip().lower() == "all":
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ranks: expected 'all' or numbers like 0,3, got {text!r}") from None
