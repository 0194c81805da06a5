"""`htatui PATH` opens the app only in a terminal; a missing path or a mistyped subcommand is one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_without_terminal(*args: str, tmp_path: Path) -> tuple[int, str, str]:
    """Run `htatui ARGS < /dev/null > FILE` as a script or CI job would; a hang fails by timeout."""
    out = tmp_path / "out.txt"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(os.devnull) as stdin, out.open("w") as stdout:
        result = subprocess.run(
            [sys.executable, "-m", "htatui", *args],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    return result.returncode, out.read_text(), result.stderr


def test_no_terminal_points_to_report(tmp_path: Path) -> None:
    code, out, err = run_without_terminal(str(ROOT / "fixtures" / "demo"), tmp_path=tmp_path)
    assert code == 2
    assert out == ""  # no escape sequences written into the file
    assert err.count("\n") == 1 and "needs a terminal" in err and "htatui report PATH" in err


def test_missing_path_is_one_line_before_any_screen(tmp_path: Path) -> None:
    code, out, err = run_without_terminal("/no/such/path", tmp_path=tmp_path)
    assert (code, out, err) == (2, "", "htatui: /no/such/path: no such file or folder\n")


def test_mistyped_subcommand_lists_the_commands(tmp_path: Path) -> None:
    code, out, err = run_without_terminal(
        "reprot", str(ROOT / "fixtures" / "demo"), "--view", "idle", tmp_path=tmp_path
    )
    assert code == 2 and out == ""
    assert "invalid choice: 'reprot'" in err and "'report'" in err and "'info'" in err


def test_a_file_named_like_a_word_is_still_a_path(tmp_path: Path) -> None:
    """A trace folder called `trace` (no slash, no dot) in the working folder opens; only no terminal stops it."""
    (tmp_path / "trace").mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "htatui", "trace"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "needs a terminal" in result.stderr
