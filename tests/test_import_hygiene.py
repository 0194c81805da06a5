"""The analysis core never imports Textual (or any UI module), so the CLI and tests stay headless."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import importlib, pkgutil, sys
import htatui.analysis as analysis
names = [m.name for m in pkgutil.iter_modules(analysis.__path__, "htatui.analysis.")]
for name in names:
    importlib.import_module(name)
import htatui.trace, htatui.tui
ui = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "textual_plotext", "plotext")
            or m.startswith("htatui.tui."))
print(len(names))
print(",".join(ui))
"""


def test_analysis_imports_no_textual() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    count, loaded = int(lines[0]), (lines[1] if len(lines) > 1 else "")
    assert count >= 5, "expected the analysis view modules to be importable"
    assert loaded == "", f"importing htatui.analysis pulled in UI modules: {loaded}"
