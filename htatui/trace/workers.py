"""Worker processes that die with their parent.

A pool worker whose parent is killed (`kill -9`, an out-of-memory kill) would otherwise go on
parsing, holding hundreds of MB and writing into a staging folder nobody will commit. Each
worker asks Linux to send it SIGKILL when its parent dies (PR_SET_PDEATHSIG), and a watcher
thread checks the parent's pid every half second where that call is unavailable.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import threading
import time

_PR_SET_PDEATHSIG = 1
_WATCH_INTERVAL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: end this process when the process `parent_pid` ends."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watcher alone
        pass
    if os.getppid() != parent_pid:  # the parent died before the request above was made
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid,), name="htatui-parent-watch", daemon=True).start()


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_WATCH_INTERVAL_S)
    os._exit(1)


def start_piece_worker(parent_pid: int) -> None:
    """Initializer of the workers that decode a big file's pieces (parallel.py), run before the
    worker imports polars (this module does not): polars on one thread, since the workers and
    this process are already one per core (more polars threads only spin on cores the other
    processes are decoding on); no cyclic GC (events.py); and an end with the parent, which may
    leave by os._exit while a file is decoded (the app, cancelled)."""
    os.environ["POLARS_MAX_THREADS"] = "1"
    gc.disable()
    die_with_parent(parent_pid)
