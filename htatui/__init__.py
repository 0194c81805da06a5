"""htatui: Holistic Trace Analysis for PyTorch Profiler traces, in the terminal."""

from __future__ import annotations

__version__ = "0.1.0"
