"""Argument parsing shared by the subcommands (kept apart from cli/main.py so subcommand modules need not import it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from htatui.analysis.core.rules import Rules
    from htatui.analysis.core.scope import Scope


class Parser(argparse.ArgumentParser):
    """argparse that takes no abbreviation of a flag (`--job` is never read as `--jobs`); the
    subcommands' parsers are made of this class too (argparse makes them of their parent's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def parse_ranks(text: str | None) -> tuple[int, ...] | None:
    """'0,3' → (0, 3); 'all' or None → None (every rank)."""
    if text is None or text.strip().lower() == "all":
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ranks: expected 'all' or numbers like 0,3, got {text!r}") from None


STEPS_HELP = (
    "which steps the numbers count: default (every step but the last; the one step of a "
    "one-step trace; the whole trace without steps), all (the whole trace), steady (the default's "
    "without warm-up and graph capture), or steps like 3, 2-4, 2-4,7"
)


def add_load_option_flags(parser: argparse.ArgumentParser) -> None:
    """`--steps-from REGEX` (the host ranges that are the steps: each row's step is set as the file
    is parsed) and `--capture FILE` (a graph-capture trace for the replays)."""
    parser.add_argument(
        "--capture",
        action="append",
        default=[],
        metavar="FILE",
        help="a graph-capture trace: graph-replayed kernels get their ops, shapes and call stacks from it "
        "(also found as a capture_traces/ folder or *capture* files beside the traces)",
    )
    parser.add_argument(
        "--steps-from",
        metavar="REGEX",
        default=None,
        help="steps are the host ranges whose name matches REGEX, numbered 1, 2, … by start (default: "
        "ProfilerStep, else vLLM/SGLang/ATOM/xDiT iteration annotations)",
    )


def use_load_options(args: argparse.Namespace) -> str | None:
    """Set `--steps-from` and `--capture` for every load of this process and its workers; the
    problem in one line, or None."""
    import os

    captures = getattr(args, "capture", None) or []
    if captures:
        os.environ["HTATUI_CAPTURES"] = os.pathsep.join(str(path) for path in captures)
    pattern = getattr(args, "steps_from", None)
    if pattern is None:
        return None
    from htatui.trace.step_sources import STEPS_FROM_ENV, StepsFromError, check_steps_from

    try:
        os.environ[STEPS_FROM_ENV] = check_steps_from(pattern)
    except StepsFromError as exc:
        return str(exc)
    return None


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
    return Scope(ranks=ranks, steps=steps, hta_compat=bool(args.hta_compat), rules=rules_from_args(args))


def rules_from_args(args: argparse.Namespace) -> Rules:
    """The rules this process's numbers are made under, chosen once: the files the environment
    names (HTATUI_COMM_RULES, HTATUI_DEVICE_PEAKS, HTATUI_DIAGNOSIS_RULES, read here and nowhere
    else), then those of `--comm-rules`, `--device-peaks` and `--diagnosis-rules`. Each file is
    read now: a bad one raises the HtatuiError naming it before any trace is loaded."""
    import os

    from htatui.analysis.core.rules import from_settings

    rules = from_settings(
        os.environ,
        getattr(args, "comm_rules", None) or (),
        getattr(args, "device_peaks", None) or (),
        getattr(args, "diagnosis_rules", None) or (),
    )
    # Each kind's reader is imported only when a user file names it: the diagnosis package is a slow import.
    if rules.comm_files:
        from htatui.analysis.core.comm_rules import comm_rules

        comm_rules(rules)
    if rules.peaks_files:
        from htatui.analysis.perf.peaks import devices

        devices(rules)
    if rules.diagnosis_files:
        from htatui.analysis.diagnosis.settings import settings

        settings(rules)
    return rules
