"""A seeded, bounded structured fuzzer over a small generated trace (issue 35).

Each case takes a small two-step trace (steps, ops with shapes and flops, launches, kernels, an
NCCL collective with its args, a copy, a sync, a CUPTI range), breaks a few of its events or its
header in a way seen in real or hostile files (fields missing or of the wrong type, times and
counters out of every range, names long or full of control characters, a file cut short), and
runs a few commands on it in this process. Every run must end in one of three ways: the answer
(exit 0, or 1 for `check` with findings), or one line on stderr and exit 2. Never a traceback,
a hang (each run is stopped by an alarm) or a signal, and no table with a time below zero.

The seed list is fixed, so a failure replays exactly: `pytest tests/cli/test_fuzz.py -k 'seed-17'`.
"""

from __future__ import annotations

import copy
import csv
import functools
import gzip
import io
import json
import math
import os
import random
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kineto_util import context_sync, cpu_op, kernel, runtime, step

from htatui.cli.main import main

SEEDS = range(int(os.environ.get("HTATUI_FUZZ_SEEDS", "40")))
"""40 cases in CI (about 30 s of CPU); `HTATUI_FUZZ_SEEDS=500` for a longer search."""
RUN_LIMIT_S = 20
"""Seconds one command may take on a trace of ~30 events before it counts as a hang."""

Event = dict[str, Any]


def base_events() -> list[Event]:
    """Two steps of a tiny training loop on one GPU, with one all_reduce and one CUPTI range."""
    events: list[Event] = []
    for n in (1, 2):
        base = (n - 1) * 1000.0
        corr = 10 * n
        mm = cpu_op("aten::mm", base + 10, 60)
        mm["args"] = {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"], "flops": 4194304}
        events += [
            step(n, base, 1000),
            mm,
            runtime("cudaLaunchKernel", base + 20, 5, corr),
            kernel("sm80_xmma_gemm_f32", base + 100, 200, corr=corr),
            runtime("cudaLaunchKernel", base + 30, 5, corr + 1),
            kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                base + 300,
                300,
                corr=corr + 1,
                **{  # type: ignore[arg-type]
                    "Collective name": "allreduce",
                    "In msg nelems": 1024,
                    "Out msg nelems": 1024,
                    "Group size": 2,
                    "dtype": "Float",
                    "Process Group Name": "0",
                },
            ),
            runtime("cudaMemcpyAsync", base + 40, 5, corr + 2),
            {**kernel("Memcpy DtoH (Device -> Pinned)", base + 620, 20, corr=corr + 2), "cat": "gpu_memcpy"},
            runtime("cudaDeviceSynchronize", base + 700, 50, corr + 3),
            context_sync(base + 640, 105, corr + 3),
            {
                "ph": "X",
                "cat": "cuda_profiler_range",
                "name": "sm80_xmma_gemm_f32",
                "pid": 0,
                "tid": 0,
                "ts": base + 800,
                "dur": 20,
                "args": {"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 1000},
            },
        ]
    return events


def base_header(rank: int) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
    }


HOSTILE_NUMBERS: list[Any] = [
    0,
    -1,
    -1e12,
    1e-9,
    1e17 + 1,
    10**17 + 1,
    2**63,
    2**70,
    1e300,
    -1e300,
    "12",
    "x",
    None,
    True,
    [],
    {},
    [1, 2],
]
HOSTILE_NAMES: list[Any] = [
    "",
    "A" * 20_000,
    "a\nb\x1b[2Jc\x00",
    "ProfilerStep#x",
    "ProfilerStep#99999999999999999999",
    7,
    None,
]
HOSTILE_DIMS: list[Any] = [[[-1, 5]], [[10**18]], [[2 * 10**19]], [[8192, 8192], [8192, 8192]], "bad", [[]], [["a"]]]


def _break_event(event: Event, rng: random.Random) -> None:
    """One structured change to one event: a field removed, replaced or out of range."""
    choice = rng.randrange(9)
    args = event.setdefault("args", {}) if isinstance(event.get("args"), dict) else event
    if choice == 0:
        event.pop(rng.choice(["ts", "dur", "ph", "name", "cat", "args", "pid", "tid"]), None)
    elif choice == 1:
        event[rng.choice(["ts", "dur"])] = rng.choice(HOSTILE_NUMBERS)
    elif choice == 2:
        event["ph"] = rng.choice(["B", "E", "i", "f", "s", "Z", "", 3])
    elif choice == 3:
        event["name"] = rng.choice(HOSTILE_NAMES)
    elif choice == 4:
        args[rng.choice(["correlation", "stream", "device", "External id"])] = rng.choice(HOSTILE_NUMBERS)
    elif choice == 5:
        args["Input Dims"] = rng.choice(HOSTILE_DIMS)
        args["flops"] = rng.choice(HOSTILE_NUMBERS)
    elif choice == 6:
        for key in list(args):
            if key.startswith(("In msg", "Out msg", "Group size", "smsp__")):
                args[key] = rng.choice(HOSTILE_NUMBERS)
    elif choice == 7:
        event["args"] = rng.choice([None, [], "args", 3])
    else:
        event["cat"] = rng.choice(["kernel", "cuda_runtime", "cpu_op", "gpu_memcpy", "cuda_sync", "", None])


def _break_header(doc: dict[str, Any], rng: random.Random) -> None:
    key = rng.choice(["deviceProperties", "distributedInfo", "baseTimeNanoseconds", "schemaVersion"])
    doc[key] = rng.choice(
        [
            None,
            "x",
            -1,
            2**70,
            int("9" * 320),
            [{"id": "x", "name": None, "numSms": -1}],
            {"rank": rng.choice(HOSTILE_NUMBERS), "world_size": rng.choice(HOSTILE_NUMBERS)},
        ]
    )


def hostile_job(folder: Path, seed: int) -> Path:
    """Two ranks of the base trace, each broken by `seed` in its own way."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(2):
        events = copy.deepcopy(base_events())
        for _ in range(rng.randint(1, 4)):
            _break_event(rng.choice(events), rng)
        if rng.random() < 0.2:
            events.append(copy.deepcopy(rng.choice(events)))  # a repeated event
        if rng.random() < 0.1:
            rng.shuffle(events)
        doc: dict[str, Any] = {**base_header(rank), "traceEvents": events}
        if rng.random() < 0.25:
            _break_header(doc, rng)
        text = json.dumps(doc).encode()
        if rng.random() < 0.05:
            text = text[: rng.randrange(len(text))]  # a file cut short
        name = f"rank-{rank}.json" + (".gz" if rng.random() < 0.3 else "")
        (folder / name).write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return folder


COMMANDS: list[list[str]] = [
    ["info"],
    ["check", "--quick"],
    ["check"],
    ["report", "--view", "temporal"],
    ["report", "--view", "kernels"],
    ["report", "--view", "ops", "--flops", "--group-by", "shape"],
    ["report", "--view", "critical-path"],
    ["report", "--view", "critical-path", "--job-edges"],
    ["report", "--view", "stragglers"],
    ["report", "--view", "collectives"],
    ["report", "--view", "rank-steps"],
    ["report", "--view", "cupti"],
    ["report", "--view", "launch", "--full"],
    ["report", "--view", "idle"],
]


class Hang(Exception):
    """A command ran past RUN_LIMIT_S."""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def stop(_signum: int, _frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _times_below_zero(csv_text: str, warnings: str) -> list[str]:
    """Cells of `_us` columns under zero (a time no GPU can produce), unless a warning gives the
    reason. A launch delay is negative when the work starts before the call returns (real: a
    synchronous copy); past the call's own length, the work started before its launch."""
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    early = "start before the call that launched them" in warnings
    bad = []
    for row in rows:
        for column, value in row.items():
            if not column or not column.endswith("_us") or value in ("", None):
                continue
            number = float(value)
            if not math.isfinite(number) or number >= 0 or column.startswith(("delta", "offset", "shift")):
                continue
            if column == "launch_delay_us" and (early or number >= -float(row.get("cpu_duration_us") or 0)):
                continue
            bad.append(f"{column}={value}")
    return bad


def classify(run: Callable[[], int], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run one command: its exit code, stdout and stderr; a traceback or hang fails the test."""
    with time_limit(RUN_LIMIT_S):
        code = run()
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{seed}" for seed in SEEDS])
def test_a_hostile_trace_gets_an_answer_or_one_line(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTATUI_JOBS", "1")  # parse in this process: the alarm reaches it
    monkeypatch.setenv("HTATUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "120")
    job = hostile_job(tmp_path / "job", seed)
    rng = random.Random(seed * 7919)
    for command in rng.sample(COMMANDS, 3):
        fmt = ["--format", "csv"] if command[0] == "report" else []
        argv = [command[0], str(job), *command[1:], *fmt]
        code, out, err = classify(functools.partial(main, argv), capsys)
        said = f"htatui {' '.join(argv)} (seed {seed}) → {code}\n{err}"
        assert "Traceback" not in err and "Error:" not in err.replace("htatui: ", ""), said
        if code == 2:
            problems = [line for line in err.splitlines() if not line.startswith("htatui: warning:")]
            assert problems and problems[-1].startswith("htatui: "), said
            assert "\n" not in problems[-1], said
        else:
            assert code in ((0, 1) if command[0] == "check" else (0,)), said
            assert out, said
            if command[0] == "report":
                assert not _times_below_zero(out, err), f"{said}\n{_times_below_zero(out, err)}"


def test_the_unbroken_base_trace_gives_the_right_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fuzzer's starting point, measured by hand: each step's GPU work is the gemm [100, 300),
    the all_reduce [300, 600) and the copy [620, 640): 520 µs busy over 540 µs; the default scope
    keeps step 1 (step 2 is the last)."""
    monkeypatch.setenv("HTATUI_JOBS", "1")
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in range(2):
        (folder / f"rank-{rank}.json").write_text(json.dumps({**base_header(rank), "traceEvents": base_events()}))
    code, out, _ = classify(lambda: main(["report", str(folder), "--view", "temporal", "--format", "json"]), capsys)
    assert code == 0
    rows = json.loads(out)
    assert [(r["rank"], r["span_us"], r["idle_us"], r["compute_us"], r["non_compute_us"]) for r in rows] == [
        (0, 540.0, 20.0, 200.0, 320.0),
        (1, 540.0, 20.0, 200.0, 320.0),
    ]
