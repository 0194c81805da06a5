"""Where an allocation came from, read from its stack (docs/semantics-memory.md, allocation sites)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from htatui.trace.memory_recording import UNKNOWN_SITE

# Frames from the allocator, the unwinder and tensor factories say nothing about who asked.
_PLUMBING_PREFIXES = (
    "torch::unwind",
    "torch::CapturedTraceback",
    "torch::cuda::",
    "c10::",
    "at::detail::",
    "at::empty",
    "at::native::empty",
    "at::(anonymous namespace)",
    "at::TensorIteratorBase",
    "at::meta::",
    "at::_ops::empty",
    "at::TensorBase::",
    "std::",
    "torch::autograd::Engine::",
    "torch::autograd::python::",
    "torch::autograd::Node::",
    "??",
    "_Py",
    "Py",
)
_LIBRARY_PATH_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen ", "/torch/")


def site_of(frames: Any, stacks: dict[str, tuple[str, ...]] | None = None) -> str:
    """Where an allocation came from: the first user Python frame, else the C++ frame that asked.

    Frames are innermost first. A user Python frame is a `.py` file outside site-packages and the
    standard library. Without one (autograd's backward thread has none) the innermost autograd
    backward formula is taken, else the innermost frame that is not allocator, unwinder, factory
    or interpreter plumbing; C++ names lose their argument lists.
    """
    if not isinstance(frames, list) or not frames:
        return UNKNOWN_SITE
    first_python: str | None = None
    first_cpp: str | None = None
    backward_formula: str | None = None
    for frame in frames:
        if type(frame) is not dict:
            continue
        filename = frame.get("filename")
        name = frame.get("name")
        if type(filename) is str and filename.endswith(".py"):
            if not any(marker in filename for marker in _LIBRARY_PATH_MARKERS):
                first_python = f"{name} ({filename}:{frame.get('line', 0)})"
                break
            continue
        if type(name) is not str or not name:
            continue
        if backward_formula is None and name.startswith("torch::autograd::generated::"):
            backward_formula = name
        if first_cpp is None and not name.startswith(_PLUMBING_PREFIXES):
            first_cpp = name
    cpp = backward_formula or first_cpp
    site = first_python or (_function_name(cpp) if cpp else UNKNOWN_SITE)
    if stacks is not None and site not in stacks:
        stacks[site] = tuple(_frame_text(f) for f in frames if isinstance(f, dict))
    return site


@lru_cache(maxsize=65536)
def _function_name(name: str) -> str:
    """`ns::f(int, long)` → `ns::f`: the argument list of a C++ signature is noise in a site name."""
    depth = 0
    for position, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and position > 0 and not name[:position].endswith("(anonymous namespace"):
            if name[position:].startswith("(anonymous namespace)"):
                continue
            return name[:position]
    return name


def _frame_text(frame: dict[str, Any]) -> str:
    filename = frame.get("filename") or "??"
    line = frame.get("line") or 0
    return f"{frame.get('name', '??')} {filename}:{line}" if line else f"{frame.get('name', '??')} {filename}"
