"""HTA's short kernel names (templates and argument lists dropped)."""

from __future__ import annotations

import re

_TEMPLATE_OR_ARGS = r"<[^<>]*>|\([^()]*\)"


def shorten_name(name: str) -> str:
    """HTA's shorten_name: drop '->', balanced <…> and (…) groups, keep the last word."""
    if name.startswith(("Memcpy", "Memset")) or ("<" not in name and "(" not in name):
        return name

    text = name.replace("->", "")
    previous = None
    while previous != text:
        previous = text
        text = re.sub(_TEMPLATE_OR_ARGS, "", text)
    parts = text.split()
    return parts[-1] if parts else name


_EMPTY_SCOPE = re.compile(r"(::)+(?=::)")


def tidy_scopes(text: str) -> str:
    """'at::native::::fill' or '::fill' (an anonymous namespace dropped) → 'at::native::fill', 'fill'."""
    return _EMPTY_SCOPE.sub("", text).strip().removeprefix("::")


def readable_name(name: str) -> str:
    """HTA's short name as people read it: `(anonymous namespace)` leaves no `::::` behind
    (issue 38 #6); `shorten_name` itself stays HTA's, for the compat mode's tables."""
    return tidy_scopes(shorten_name(name)) or name
