"""SIGTERM or SIGHUP while worker processes parse (issue 35): the command unwinds, its pool shuts
down, and multiprocessing's tracker has no "leaked semaphore objects" to warn about."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kineto_util import kernel, runtime, step, write_trace

ROOT = Path(__file__).resolve().parents[2]


def _pool_workers(pid: int) -> list[int]:
    """The spawned worker processes of `pid` (their command line runs multiprocessing's spawn_main)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:
                found.append(int(child))
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_a_load_leaks_no_semaphore(tmp_path: Path, signum: int) -> None:
    for rank in range(2):
        events = [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)]
        write_trace(tmp_path / "job" / f"rank-{rank}.json", events, rank=rank)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HTATUI_CACHE_DIR=str(tmp_path / "cache"))
    command = [sys.executable, "-m", "htatui", "info", str(tmp_path / "job"), "--no-cache", "--jobs", "2"]
    # The child starts with the signal's default action: under `nohup` (SIGHUP ignored) htatui
    # rightly leaves an ignored signal ignored, and the test would see exit 0.
    child = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while not _pool_workers(child.pid) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None, "the load ended before its pool was seen"
        child.send_signal(signum)
        _out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 128 + signum
    assert "leaked semaphore" not in err and "Traceback" not in err, err
