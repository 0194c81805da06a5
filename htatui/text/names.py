"""Kernel and operator names shortened by meaning to fit a width, kept distinct within a table.

A name loses, in order, its template arguments, its call arguments and return type (as HTA's
shorten_name does), then its namespaces; only a name still too long is cut in the middle.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Sequence

from htatui.analysis.core.names import readable_name, tidy_scopes

_TEMPLATE = re.compile(r"<[^<>]*>")


def middle_cut(text: str, width: int) -> str:
    """Shorten `text` to `width` cells by cutting its middle: kernel names differ at both ends."""
    if width <= 0 or len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return f"{text[:head]}…{text[-tail:]}"


def _drop_templates(name: str) -> str:
    previous = None
    text = name
    while previous != text:
        previous = text
        text = _TEMPLATE.sub("", text)
    return tidy_scopes(text) or name


def name_forms(name: str) -> list[str]:
    """The name from whole to shortest: templates dropped, HTA's short name, namespaces dropped."""
    short = readable_name(name)
    last = short.rsplit("::", 1)[-1] or short
    return [name, _drop_templates(name), short, last]


SHORT_LEVEL = 2
"""The level of HTA's short name in name_forms (for tables that always show short names)."""


def _at_level(name: str, level: int, width: int) -> str:
    return middle_cut(name_forms(name)[level], width)


def _fitting_level(name: str, width: int, start: int) -> int:
    forms = name_forms(name)
    for level in range(start, len(forms)):
        if len(forms[level]) <= width:
            return level
    return len(forms) - 1


def _around_difference(name: str, alike: Sequence[str], width: int) -> str:
    """The short name's start, then the text from where the alike names first differ."""
    differ = len(os.path.commonprefix(list(alike)))
    last = name_forms(name)[-1]
    room = max(1, width // 2 - 1)
    head = last if len(last) <= room else last[: room - 1] + "…"
    opening = max(name.rfind("<", 0, differ + 1), name.rfind("(", 0, differ + 1))
    room = max(1, width - len(head) - 1)
    # From the bracket that holds the difference, or from just before it when that is too far.
    start = opening if 0 <= opening and differ - opening < room - 4 else max(0, differ - room // 2)
    window = name[start:]
    return f"{head.removesuffix('…')}…{window if len(window) <= room else window[: room - 1] + '…'}"


def fit_names(names: Sequence[str], width: int, *, start: int = 0) -> list[str]:
    """Each name at the least-shortened form (from level `start`) that fits `width`.

    Different names that would look the same step back to longer forms (cut in the middle)
    until they differ; names still alike get a `#n` suffix.
    """
    levels = {name: _fitting_level(name, width, start) for name in set(names)}
    shown = {name: _at_level(name, level, width) for name, level in levels.items()}
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(shown):
        groups[shown[name]].append(name)
    for members in groups.values():
        if len(members) < 2:
            continue
        for level in range(max(levels[m] for m in members) - 1, -1, -1):
            candidates = {m: _at_level(m, min(level, levels[m]), width) for m in members}
            if len(set(candidates.values())) == len(members):
                shown.update(candidates)
                break
        else:
            candidates = {m: _around_difference(m, members, width) for m in members}
            if len(set(candidates.values())) == len(members):
                shown.update(candidates)
                continue
            for number, member in enumerate(members, start=1):
                suffix = f"#{number}"
                shown[member] = middle_cut(shown[member], max(1, width - len(suffix))) + suffix
    return [shown[name] for name in names]
