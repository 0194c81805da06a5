"""Argument parsing shared by the subcommands (kept apart from cli/main.py so subcommand modules need not import it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from htatui.analysis.core.scope import Scope


def parse_ranks(text: str | None) -> tuple[int, ...] | None:
    """'0,3' → (0, 3); 'all' or None → None (every rank)."""
    if text is None or text.strip().lower() == "all":
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ranks: expected 'all' or numbers like 0,3, got {text!r}") from None


STEPS_HELP = (
    "which ProfilerSteps the numbers count: default (every step but the last; the one step of a "
    "one-step trace; the whole trace without steps), all (the whole trace), or steps like 3, 2-4, 2-4,7"
)


def add_scope_flags(parser: argparse.ArgumentParser, *, ranks: bool = True) -> None:
    """The scope's flags (--ranks, --steps, --hta-compat), the same on every command that analyses."""
    if ranks:
        parser.add_argument("--ranks", default="all", help="ranks to analyse: all (default) or e.g. 0,3")
    parser.add_argument("--steps", default="default", help=STEPS_HELP)
    parser.add_argument(
        "--include-last-step",
        dest="steps",
        action="store_const",
        const="all",
        help="the same as --steps all (kept for scripts written for older versions)",
    )
    parser.add_argument("--hta-compat", action="store_true", help="reproduce HTA 0.6.1's numbers and quirks")


def scope_from_args(args: argparse.Namespace, *, ranks: tuple[int, ...] | None = None) -> Scope:
    """The scope the flags of `add_scope_flags` name; argparse.ArgumentTypeError on a bad value."""
    from htatui.analysis.core.scope import Scope, Steps

    if ranks is None and isinstance(getattr(args, "ranks", None), str):
        ranks = parse_ranks(args.ranks)
    try:
        steps = Steps.parse(str(args.steps))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Scope(ranks=ranks, steps=steps, hta_compat=bool(args.hta_compat))
