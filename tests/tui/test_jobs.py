"""The one worker pattern: the latest request wins, failures arrive as messages, cancel reaches the work."""

from __future__ import annotations

import threading
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Static

from htatui.tui.base.jobs import JobRunner


class Runner(JobRunner[Any], Static):
    def __init__(self) -> None:
        super().__init__()
        self.done: list[tuple[str, Any]] = []
        self.failed: list[tuple[str, str]] = []

    def job_done(self, job: str, result: Any) -> None:
        self.done.append((job, result))

    def job_failed(self, job: str, error: BaseException) -> None:
        self.failed.append((job, str(error)))


async def until(pilot: Any, condition: Any, seconds: float = 5.0) -> bool:
    """Let the app run until `condition()` holds (never block its event loop)."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return True
        await pilot.pause(0.02)
    return bool(condition())


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Runner()


async def test_a_newer_request_supersedes_the_older_one() -> None:
    release = threading.Event()
    running = threading.Event()
    seen_cancel: list[bool] = []

    def slow(cancel: threading.Event) -> str:
        running.set()
        release.wait(5)
        seen_cancel.append(cancel.is_set())
        return "old"

    app = Host()
    async with app.run_test() as pilot:
        runner = app.query_one(Runner)
        first = runner.start_job("analysis", slow)
        assert await until(pilot, running.is_set)
        second = runner.start_job("analysis", lambda _cancel: "new")
        assert second == first + 1
        release.set()
        assert await until(pilot, lambda: seen_cancel and not runner.job_running("analysis"))
        await pilot.pause()
        assert runner.done == [("analysis", "new")]
        assert seen_cancel == [True], "the superseded work was told to stop"


async def test_a_failure_is_a_message_and_cancel_sets_the_event() -> None:
    started = threading.Event()
    stopped = threading.Event()

    def boom(_cancel: threading.Event) -> None:
        raise ValueError("no such column")

    def waits(cancel: threading.Event) -> str:
        started.set()
        cancel.wait(5)
        stopped.set()
        return "late"

    app = Host()
    async with app.run_test() as pilot:
        runner = app.query_one(Runner)
        runner.start_job("load", boom)
        assert await until(pilot, lambda: runner.failed)
        assert runner.failed == [("load", "no such column")]
        runner.start_job("load", waits)
        assert await until(pilot, started.is_set)
        assert runner.job_running("load")
        assert runner.cancel_job("load")
        assert await until(pilot, stopped.is_set), "cancel reached the work through its event"
        assert await until(pilot, lambda: not runner.job_running("load"))
        await pilot.pause()
        assert runner.done == []
