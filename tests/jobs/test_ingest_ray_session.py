"""`ingest --engine ray`: one Ray session for both rounds, the cluster's address when one is
given (the option, else RAY_ADDRESS), and Ray's start timed apart from the work.

A stand-in `ray` module runs the tasks in this process, so the driver's side is checked without
starting Ray (tests/store/test_store.py starts a real local Ray for the dataset's numbers).
"""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from dataset_util import tiny_job

from htatui.jobs.ingest import LOCAL_RAY_STORE_BYTES, ingest
from htatui.store.dataset import open_dataset

START_S = 0.3


class Ref:
    """A finished task's result (Ray's ObjectRef is hashable by identity too)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class FakeRay(types.ModuleType):
    """The calls of `ray` the ingest makes; `init` takes START_S, tasks run when submitted."""

    def __init__(self) -> None:
        super().__init__("ray")
        self.inits: list[dict[str, Any]] = []
        self.tasks = 0
        self.running = False

    def is_initialized(self) -> bool:
        return self.running

    def init(self, **kwargs: Any) -> None:
        time.sleep(START_S)
        self.inits.append(kwargs)
        self.running = True

    def shutdown(self) -> None:
        self.running = False

    def remote(self, work: Any) -> Any:
        fake = self

        class Remote:
            @staticmethod
            def remote(*args: Any) -> Ref:
                assert fake.running, "a task submitted without a Ray session"
                fake.tasks += 1
                return Ref(work(*args))

        return Remote

    def wait(self, refs: list[Any], num_returns: int = 1, **_: Any) -> tuple[list[Any], list[Any]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: Ref) -> Any:
        return ref.value


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return fake


def test_a_local_ray_is_started_once_for_both_rounds(tmp_path: Path, fake_ray: FakeRay) -> None:
    report = ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", engine="ray", max_workers=2)
    # One session: both rounds' 2 + 2 tasks ran in it, and it was closed after.
    assert len(fake_ray.inits) == 1 and fake_ray.tasks == 4 and not fake_ray.running
    # "local": this run's own Ray, never a cluster left on the machine; 2 CPUs, a small store.
    init = fake_ray.inits[0]
    assert init["address"] == "local" and init["num_cpus"] == 2
    assert init["object_store_memory"] == LOCAL_RAY_STORE_BYTES and init["include_dashboard"] is False
    # Ray's start is reported apart from the work: at least the stand-in's START_S, and not the
    # whole ingest's time (the tasks ran after it).
    assert START_S <= report.engine_start_s < START_S + 0.25
    assert report.ranks == 2 and open_dataset(tmp_path / "ds").summary().height == 2


def test_the_cluster_address_comes_from_the_option_else_ray_address(
    tmp_path: Path, fake_ray: FakeRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = tiny_job(tmp_path / "job")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    ingest([job], tmp_path / "env", engine="ray")
    ingest([job], tmp_path / "option", engine="ray", ray_address="auto")
    # Connecting to a cluster passes no resources (Ray refuses num_cpus for an existing cluster).
    assert [init["address"] for init in fake_ray.inits] == ["10.0.0.1:6379", "auto"]
    assert all("num_cpus" not in init and "object_store_memory" not in init for init in fake_ray.inits)


def test_a_running_session_is_used_and_left_running(tmp_path: Path, fake_ray: FakeRay) -> None:
    fake_ray.running = True  # the caller's own ray.init(): this process is already the driver
    report = ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", engine="ray")
    assert fake_ray.inits == [] and fake_ray.running and fake_ray.tasks == 4
    assert report.engine_start_s < START_S


def test_a_pool_reports_no_start(tmp_path: Path) -> None:
    report = ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", engine="local", max_workers=1)
    assert report.engine_start_s == 0.0
