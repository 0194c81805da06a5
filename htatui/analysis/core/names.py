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
