"""The one way screens run work in the background: request → thread worker → typed result message.

A screen mixes in `JobRunner` and calls `start_job(name, work)`; `work` runs on a thread worker
(exclusive per screen and job name, so a new request supersedes the old one) and gets the
worker's cancel event, which it hands down to the loader or the analysis so Esc stops it. The
result comes back as `JobDone` or `JobFailed` with the request id; a result whose id is not the
latest for that job is dropped; `job_done` / `job_failed` are the screen's two hooks, and a
failure the screen does not handle becomes one notification (never a traceback).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from textual import on
from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

from htatui.trace.errors import EventsUnavailable

ResultT = TypeVar("ResultT")
"""What a runner's jobs return (a union when it runs jobs of several kinds)."""

Work = Callable[[threading.Event], ResultT]
"""A job's body: gets the cancel event (set when the user cancels) and returns the result."""


@dataclass
class JobDone(Message, Generic[ResultT]):
    """A job finished with `result`."""

    job: str
    request_id: int
    result: ResultT


@dataclass
class JobFailed(Message):
    """A job raised `error` (not sent for a cancelled job)."""

    job: str
    request_id: int
    error: BaseException


class JobRunner(Generic[ResultT], Widget):
    """Mixin for screens and widgets: named background jobs with stale-result dropping; `ResultT`
    is what its jobs return, the type `job_done` gets."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._job_requests: dict[str, int] = {}
        self._job_workers: dict[str, Worker[None]] = {}

    def start_job(self, job: str, work: Work[ResultT], description: str = "") -> int:
        """Run `work` in the background; any earlier run of the same job is cancelled and ignored."""
        request_id = self._job_requests.get(job, 0) + 1
        self._job_requests[job] = request_id

        def run() -> None:
            worker = get_current_worker()
            try:
                result = work(worker.cancelled_event)
            except Exception as exc:  # noqa: BLE001 - every failure becomes a message, never a crash
                if not worker.is_cancelled:
                    self.post_message(JobFailed(job, request_id, exc))
                return
            if not worker.is_cancelled:
                self.post_message(JobDone(job, request_id, result))

        self._job_workers[job] = self.run_worker(
            run,
            thread=True,
            exclusive=True,
            exit_on_error=False,
            group=f"job:{job}",
            description=description or job,
        )
        return request_id

    def job_running(self, job: str) -> bool:
        worker = self._job_workers.get(job)
        return worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    def cancel_job(self, job: str) -> bool:
        """Cancel a running job (its cancel event is set); True when one was running."""
        running = self.job_running(job)
        if running:
            self._job_workers[job].cancel()
        self._job_requests[job] = self._job_requests.get(job, 0) + 1
        return running

    def job_title(self) -> str:
        """How failures are titled in notifications (a screen's view title)."""
        return ""

    def job_done(self, job: str, result: ResultT) -> None:
        """The latest run of `job` finished (main thread)."""

    def job_failed(self, job: str, error: BaseException) -> None:
        """The latest run of `job` failed (main thread); the default says so in one notification."""
        title = f"{self.job_title()} failed" if self.job_title() else "Failed"
        # A rank that cannot be read says so in a line naming its file; other errors name their type.
        text = str(error) if isinstance(error, EventsUnavailable) else f"{type(error).__name__}: {error}"
        self.notify(text, title=title, severity="error")

    @on(JobDone)
    def _deliver_job(self, message: JobDone[ResultT]) -> None:
        message.stop()
        if message.request_id == self._job_requests.get(message.job):
            self.job_done(message.job, message.result)

    @on(JobFailed)
    def _deliver_failure(self, message: JobFailed) -> None:
        message.stop()
        if message.request_id == self._job_requests.get(message.job):
            self.job_failed(message.job, message.error)
