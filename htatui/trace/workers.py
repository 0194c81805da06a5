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
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

_PR_SET_PDEATHSIG = 1
_WATCH_INTERVAL_S = 0.5
_MANAGER_JOIN_S = 10.0


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


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread so that worker pools are stopped and shut
    down as on Ctrl-C (dying at once left their semaphores to multiprocessing's tracker, which
    printed "leaked semaphore objects")."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_deferred = threading.local()
_pending_signal: list[int] = []


def _raise_terminated(signum: int, _frame: object) -> None:
    if getattr(_deferred, "depth", 0):
        _pending_signal.append(signum)  # raised when the spawn in progress is complete
        return
    raise Terminated(signum)


def catch_termination() -> dict[int, Any]:
    """Raise Terminated on SIGTERM/SIGHUP from now on; returns the handlers replaced, for
    `restore_handlers`. A signal the parent ignores (nohup) stays ignored."""
    replaced: dict[int, Any] = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) is signal.SIG_DFL:
                replaced[signum] = signal.signal(signum, _raise_terminated)
        except (ValueError, OSError):  # not the main thread
            break
    return replaced


def restore_handlers(replaced: dict[int, Any]) -> None:
    for signum, handler in replaced.items():
        signal.signal(signum, handler)


@contextmanager
def termination_deferred() -> Iterator[None]:
    """Hold Terminated back while a pool spawns a worker: a parent leaving mid-spawn made the
    half-started child print an EOFError traceback."""
    _deferred.depth = getattr(_deferred, "depth", 0) + 1
    try:
        yield
    finally:
        _deferred.depth -= 1
    if not _deferred.depth and _pending_signal:
        signum = _pending_signal[-1]
        _pending_signal.clear()
        raise Terminated(signum)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel queued work and end the running workers now instead of waiting for their files."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    # The pool's manager thread closes its wake-up pipe as it ends; left running, that close can
    # race the interpreter's exit hook writing to the same pipe ("Bad file descriptor", CPython
    # 3.11), so the thread is let finish here, which takes milliseconds once the workers are gone.
    if manager is not None and manager is not threading.current_thread():
        manager.join(timeout=_MANAGER_JOIN_S)
