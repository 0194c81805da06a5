"""Helpers for the tests that run the CLI: in this process (`cli`), as its own process (`run_cli`), or
on a pseudo-terminal (`run_in_pty`)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from htatui.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "htatui", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def run_in_pty(args: list[str], columns: int = 80) -> str:
    """Run the CLI with its stdout on a pseudo-terminal `columns` wide; returns what it printed."""
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns), LINES="24", TERM="dumb", NO_COLOR="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "htatui", *args], stdout=follower, stderr=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """`htatui ARGS` run in this process (`main`, what `python -m htatui` runs): its exit code, stdout
    and stderr. The tests below are about what the CLI says, not the process (test_version starts one)."""
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["htatui", *args], code, out.out, out.err)
