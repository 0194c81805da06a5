"""Settings files the user names (--device-peaks, --comm-rules, the keymap, themes) are refused
unless regular and under the size cap: a FIFO used to block forever, /dev/zero to grow to a
MemoryError traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.sources.user_file import USER_FILE_MAX_BYTES, UserFileError, read_user_text
from htatui.tui.base.keymap import load_keymap
from htatui.tui.theming import ThemeFileError, load_theme_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "settings.toml"
    os.mkfifo(path)
    return path


def run_report(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`report` in a child process: before the fix a FIFO blocked it for ever, so a timeout fails the test."""
    write_trace(
        tmp_path / "job" / "rank-0.json",
        [step(1, 0, 100), runtime("cudaLaunchKernel", 1, 1, 1), kernel("k", 5, 50, corr=1)],
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), HTATUI_COMM_RULES="", HTATUI_DEVICE_PEAKS="")
    command = [sys.executable, "-m", "htatui", "report", str(tmp_path / "job"), "--view", "temporal", *flags]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("flag", ["--device-peaks", "--comm-rules"])
@pytest.mark.parametrize("named", ["fifo", "/dev/zero"])
def test_report_refuses_a_fifo_or_device_in_one_line(tmp_path: Path, flag: str, named: str) -> None:
    path = str(tmp_path / "p.toml") if named == "fifo" else named
    if named == "fifo":
        os.mkfifo(path)
    result = run_report(tmp_path, flag, path)
    said = "is a named pipe (FIFO), not a regular file" if named == "fifo" else "is a device, not a regular file"
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and path in result.stderr and said in result.stderr, result.stderr


def test_a_settings_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "big.toml"
    rules.write_text("# padding\n" * (USER_FILE_MAX_BYTES // 10 + 1))
    result = run_report(tmp_path, "--comm-rules", str(rules))
    assert result.returncode == 2
    assert f"big.toml: cannot read communication rules (is larger than {USER_FILE_MAX_BYTES:,} bytes" in result.stderr


def test_the_helper_reads_a_regular_file_and_refuses_the_rest(tmp_path: Path, fifo: Path) -> None:
    plain = tmp_path / "ok.toml"
    plain.write_text("x = 1\n")
    assert read_user_text(plain) == "x = 1\n"
    assert read_user_text(plain, max_bytes=6) == "x = 1\n"
    with pytest.raises(UserFileError, match="is larger than 5 bytes"):
        read_user_text(plain, max_bytes=5)
    with pytest.raises(UserFileError, match="named pipe"):
        read_user_text(fifo)
    with pytest.raises(UserFileError, match="is a folder"):
        read_user_text(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_user_text(tmp_path / "missing.toml")


@pytest.mark.parametrize("named", ["fifo", "/dev/zero"])
def test_the_keymap_names_a_fifo_or_device_and_keeps_the_default_keys(fifo: Path, named: str) -> None:
    """Before, `is_file()` was False for both and the file was ignored without a word."""
    path = fifo if named == "fifo" else Path(named)
    loaded = load_keymap(path)
    assert loaded.keymap == {} and len(loaded.problems) == 1
    assert loaded.problems[0].startswith(f"{path}: cannot read it (") and "default keys used" in loaded.problems[0]


def test_a_theme_file_that_is_a_fifo_is_skipped_with_its_reason(fifo: Path) -> None:
    with pytest.raises(ThemeFileError, match="named pipe"):
        load_theme_file(fifo)
