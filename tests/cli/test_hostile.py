"""Hostile and odd input (issue #9): one line naming the file, exit 2, no traceback, no hang,
bounded memory, inputs untouched. Every bad input is generated here, in tmp_path."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kineto_util import kernel, runtime, step, write_trace

from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.trace import LoadCancelled
from htatui.trace.parallel import decode_columns_parallel

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process CLI calls parse here instead of spawning workers (fast, and tracebacks surface)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def events(kernel_dur: float = 30) -> list[dict[str, Any]]:
    return [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, kernel_dur, corr=1)]


def digests(folder: Path) -> dict[str, str]:
    """Every regular file under `folder` and its hash, to show that inputs are untouched."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, err: str, name: str, *words: str) -> None:
    """Exit 2 and exactly one stderr line, naming the file and the problem."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert name in lines[0] and lines[0].startswith("htatui: "), err
    for word in words:
        assert word in lines[0], err
    assert "Traceback" not in err


def run_cli(*args: str | Path, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "htatui", *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


# ---------------------------------------------------------------- 1. gzip in bounded memory

# VmHWM, not ru_maxrss: a child forked from a big pytest process inherits the parent's ru_maxrss,
# while exec gives it a new address space whose high-water mark is its own.
_PEAK_RSS_SCRIPT = """
import sys
from htatui.cli.main import main
code = main(["info", sys.argv[1]])
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024)
sys.exit(code)
"""


@pytest.mark.parametrize("size", ["tiny", "truncated"])
def test_forged_gzip_trailer_is_refused_in_bounded_memory(tmp_path: Path, size: str) -> None:
    body = json.dumps({"traceEvents": events() * (1 if size == "tiny" else 500)}).encode()
    whole = gzip.compress(body)
    # The last 4 bytes (ISIZE) claim 4 GiB; the deflate stream is cut short.
    cut = whole[:14] if size == "tiny" else whole[: len(whole) // 2]
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(cut + b"\x00\x00\x00\x00" + (0xFFFFFFF0).to_bytes(4, "little"))
    before = digests(tmp_path)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
        check=False,
    )
    assert time.monotonic() - started < 20
    assert_refused(result.returncode, result.stderr, "rank-0.json.gz", "corrupt or truncated gzip")
    peak_mb = int(result.stdout.strip())
    assert peak_mb < 300, f"peak RSS {peak_mb} MB"
    assert digests(tmp_path) == before


def test_gzip_expansion_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "rank-0.json.gz", events())
    monkeypatch.setenv("HTATUI_MAX_TRACE_BYTES", "100")
    code, _, err = cli(capsys, "info", path)
    assert_refused(code, err, "rank-0.json.gz", "expands past 100 bytes")


# ---------------------------------------------------------------- 2. cache staleness


def _kernel_time(path: Path) -> float:
    traces = load_traces([path], use_cache=True, max_workers=1)
    frame = traces.ranks[0].events
    return float(frame.filter(frame["cat"] == "kernel")["dur"].sum())


def test_same_size_rewrite_with_restored_mtime_is_not_served_from_cache(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank-0.json", events(kernel_dur=30))
    stat = path.stat()
    assert _kernel_time(path) == 30
    path.write_bytes(path.read_bytes().replace(b'"dur": 30', b'"dur": 90'))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # touch -r: same size, same mtime
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert _kernel_time(path) == 90


def test_file_replaced_during_parse_is_not_cached_under_the_new_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from htatui.trace import loader

    path = write_trace(tmp_path / "rank-0.json", events(kernel_dur=30))
    replacement = tmp_path / "next.json"
    write_trace(replacement, events(kernel_dur=70))
    real_decode = decode_columns_parallel

    def decode_then_replace(raw: Any, *args: Any, **kwargs: Any) -> Any:
        result = real_decode(raw, *args, **kwargs)
        if replacement.exists():
            os.replace(replacement, path)  # the file changes while it is being parsed
        return result

    monkeypatch.setattr(loader, "decode_columns_parallel", decode_then_replace)
    assert _kernel_time(path) == 30  # what was read
    monkeypatch.setattr(loader, "decode_columns_parallel", real_decode)
    assert _kernel_time(path) == 70  # the old content was not stored under the new identity


def test_no_cache_refreshes_the_entry(tmp_path: Path, isolated_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank-0.json", events())
    assert cli(capsys, "info", path)[0] == 0
    (entry,) = isolated_cache.glob("*.json")
    stale = json.loads(entry.read_bytes())
    stale["warnings"] = ["STALE ENTRY"]
    entry.write_text(json.dumps(stale))
    assert "STALE ENTRY" in cli(capsys, "info", path, "--format", "csv")[1]
    assert cli(capsys, "info", path, "--no-cache")[0] == 0
    assert "STALE ENTRY" not in cli(capsys, "info", path, "--format", "csv")[1]


def test_cache_is_evicted_past_its_size_cap(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTATUI_CACHE_MAX_BYTES", "1")
    for name in ("a", "b", "c"):
        load_traces([write_trace(tmp_path / f"{name}.json", events())], max_workers=1)
    assert len(list(isolated_cache.glob("*.arrow"))) == 1  # only the newest entry stays
    assert len(list(isolated_cache.glob("*.json"))) == 1


def test_cache_metadata_with_wrong_types_is_rebuilt(
    tmp_path: Path, isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "rank-0.json", events())
    assert cli(capsys, "info", path)[0] == 0
    (entry,) = isolated_cache.glob("*.json")
    broken = json.loads(entry.read_bytes())
    broken.update(device_properties=["not an object"], process_names=[1, 2], warnings="x")
    entry.write_text(json.dumps(broken))
    code, out, err = cli(capsys, "info", path, "--format", "csv")
    assert code == 0 and "Test GPU" in out and "Traceback" not in err


def test_fifo_in_the_cache_folder_does_not_hang(tmp_path: Path, isolated_cache: Path) -> None:
    path = write_trace(tmp_path / "rank-0.json", events())
    assert run_cli("info", path, HTATUI_CACHE_DIR=str(isolated_cache)).returncode == 0
    for entry in list(isolated_cache.iterdir()):
        entry.unlink()
        os.mkfifo(entry)
    result = run_cli("info", path, "--format", "csv", HTATUI_CACHE_DIR=str(isolated_cache))
    assert result.returncode == 0 and "Test GPU" in result.stdout and "Traceback" not in result.stderr


# ---------------------------------------------------------------- 3. tracebacks


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("where", ["args", "events", "top"])
def test_deep_nesting_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    ev = json.dumps(events())
    deep = _deep(5000)
    head = '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"x": '
    text = {
        "args": head + deep + "}}]}",
        "events": '{"traceEvents": ' + ev[:-1] + ", " + deep + "]}",
        "top": '{"traceEvents": ' + ev + ', "x": ' + deep + "}",
    }[where]
    path = tmp_path / "rank-0.json"
    path.write_text(text)
    before = digests(tmp_path)
    code, _, err = cli(capsys, "info", path)
    assert_refused(code, err, "rank-0.json", "nested too deeply")
    assert digests(tmp_path) == before


def test_deep_nesting_beside_cached_good_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "rank-0.json", events(), rank=0)
    (tmp_path / "rank-1.json").write_text('{"traceEvents": ' + _deep(5000) + "}")
    for _ in range(2):  # the second run takes rank 0 from the cache and parses rank 1 in-process
        code, out, err = cli(capsys, "info", tmp_path, "--format", "csv")
        assert code == 0 and "Traceback" not in err
        assert "rank-1.json: JSON nested too deeply" in err


def test_rank_beyond_32_bits_and_huge_base_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "trace.json", events(), rank=2**40, base_ns=2**70)
    before = digests(tmp_path)
    for _ in range(2):  # parsed, then from the cache (which must be able to store it)
        code, out, err = cli(capsys, "info", path, "--format", "csv")
        assert code == 0 and "Traceback" not in err
        assert "distributedInfo.rank 1099511627776 is not a rank number" in out
        assert "baseTimeNanoseconds 1180591620717411303424 is out of range; ignored" in out
    assert digests(tmp_path) == before


def test_rank_in_file_name_beyond_32_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank99999999999.json", events())
    code, out, err = cli(capsys, "info", path, "--format", "csv")
    assert code == 0 and "using rank 0" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads folders whatever their mode")
def test_unreadable_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "job"
    write_trace(folder / "rank-0.json", events())
    folder.chmod(0o000)
    try:
        code, _, err = cli(capsys, "info", folder)
    finally:
        folder.chmod(0o755)
    assert_refused(code, err, "job", "permission denied")


# ---------------------------------------------------------------- 4. export into the input folder


def test_export_into_the_input_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "rank-0.json", events(), rank=0)
    before = digests(tmp_path)
    code, _, err = cli(capsys, "export", "counters", tmp_path, "-o", tmp_path)
    assert_refused(code, err, str(tmp_path), "holds the input trace rank-0.json")
    assert digests(tmp_path) == before
    assert cli(capsys, "info", tmp_path)[0] == 0


# ---------------------------------------------------------------- 5. impossible values


def test_negative_and_absurd_times_are_dropped_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [kernel("neg", 50, -20146, corr=2), kernel("far", 2**70, 5, corr=3), kernel("long", 60, 2**70, corr=4)]
    path = write_trace(tmp_path / "rank-0.json", events() + bad)
    code, out, err = cli(capsys, "report", path, "--view", "temporal", "--format", "json")
    assert code == 0
    warnings = [line for line in err.splitlines() if "impossible times" in line]
    assert len(warnings) == 1 and "rank-0.json" in warnings[0] and "3 event(s)" in warnings[0]
    (row,) = json.loads(out)
    assert row["compute_us"] == 30 and row["span_us"] == 30  # the good kernel only; no -20,146 µs
    traces = load_traces([path], use_cache=False, max_workers=1)
    assert traces.ranks[0].events["end"].max() == 100  # no 1e21 µs span


# ---------------------------------------------------------------- 6. export: all ranks or none


@pytest.mark.parametrize("phase", ["_write_temp", "_commit"])
def test_export_failure_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], phase: str
) -> None:
    from htatui.analysis.export import traces as export

    job, out_dir = tmp_path / "job", tmp_path / "out"
    out_dir.mkdir()
    write_trace(job / "rank-0.json", events(), rank=0)
    write_trace(job / "rank-1.json", events(), rank=1)
    real = getattr(export, phase)
    calls = []

    def second_fails(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise export.ExportError(
                f"{args[1] if phase == '_commit' else args[0]}: cannot be written (No space left on device)"
            )
        return real(*args)

    monkeypatch.setattr(export, phase, second_fails)
    code, out, err = cli(capsys, "export", "counters", job, "-o", out_dir)
    assert_refused(code, err, "rank-1_with_counters.json", "No space left", "no rank was exported")
    assert list(out_dir.iterdir()) == []  # neither rank 0's file nor any temp file
    monkeypatch.setattr(export, phase, real)
    code, out, err = cli(capsys, "export", "counters", job, "-o", out_dir)  # a rerun is not refused
    assert code == 0 and len(list(out_dir.iterdir())) == 2


# ---------------------------------------------------------------- 7. huge names


def test_huge_kernel_name_is_shortened_in_tables_and_whole_in_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from htatui.tui.widgets.table import Column

    name = "void k<" + "x" * 4_000_000 + ">(float*)"
    path = write_trace(tmp_path / "rank-0.json", [step(1, 0, 100), kernel(name, 20, 30)])
    started = time.monotonic()
    code, out, _ = cli(capsys, "report", path, "--view", "kernels")
    assert code == 0 and len(out.splitlines()) < 60 and max(map(len, out.splitlines())) < 3000
    code, out, _ = cli(capsys, "report", path, "--view", "kernels", "--format", "csv")
    assert code == 0 and name in out
    # Nested templates make shortening by meaning quadratic: 40,000 levels must not stall a cell.
    nested = "void f<" * 40_000 + ">" * 40_000 + "()"
    cell = Column("name", "Name", fmt="text", short_names=True).cell(nested)
    assert len(cell.plain) <= 60
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- 8. FIFOs, devices, pipes, cancel


def test_named_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "rank-0.json"
    os.mkfifo(fifo)
    result = run_cli("info", fifo)
    assert_refused(result.returncode, result.stderr, "rank-0.json", "named pipe (FIFO)")


def test_dev_zero_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "info", "/dev/zero")
    assert_refused(code, err, "/dev/zero", "is a device")


def _pipe_holding(data: bytes) -> tuple[int, threading.Thread]:
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as handle:
            try:
                handle.write(data)
            except BrokenPipeError:
                pass

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return read_end, thread


def test_pipe_given_directly_is_read_as_a_bounded_stream(tmp_path: Path) -> None:
    """`htatui info <(zcat x.gz)`: the shell passes /dev/fd/N; it is read, not refused."""
    source = write_trace(tmp_path / "rank-0.json", events(), rank=0)
    read_end, feeder = _pipe_holding(source.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "htatui", "info", f"/dev/fd/{read_end}", "--format", "csv"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30, pass_fds=(read_end,))
    os.close(read_end)
    assert result.returncode == 0, result.stderr
    assert f"0,{read_end},distributedInfo,Test GPU" in result.stdout and "pipe:[" not in result.stderr
    read_end, feeder = _pipe_holding(b"[" + b" " * 3_000_000)
    env["HTATUI_MAX_TRACE_BYTES"] = "1000000"
    command[4] = f"/dev/fd/{read_end}"
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30, pass_fds=(read_end,))
    os.close(read_end)
    assert_refused(result.returncode, result.stderr, f"/dev/fd/{read_end}", "stream is larger than 1000000 bytes")


def test_cancel_stops_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # real cpu_count: this test wants the process pool
    for rank in range(2):
        write_trace(tmp_path / f"rank-{rank}.json", events(), rank=rank)
    cancel = threading.Event()
    cancel.set()
    started = time.monotonic()
    with pytest.raises(LoadCancelled):
        load_traces([tmp_path], use_cache=False, cancel=cancel, max_workers=2)
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- 9. messages


def test_utf8_bom_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank-0.json", events())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, out, err = cli(capsys, "info", path, "--format", "csv")
    assert code == 0 and "Test GPU" in out


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_utf16_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    path = tmp_path / "rank-0.json"
    path.write_bytes(json.dumps({"traceEvents": events()}).encode(encoding))
    code, _, err = cli(capsys, "info", path)
    assert_refused(code, err, "rank-0.json", "is UTF-16 text")


def test_nan_and_infinity_are_read_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank-0.json", events())
    text = path.read_text().replace('"numSms": 108', '"numSms": NaN, "x": Infinity')
    path.write_text(text.replace('"ts": 20', '"ts": NaN'))
    code, out, err = cli(capsys, "report", path, "--view", "temporal", "--format", "csv")
    assert code == 0
    assert "NaN or Infinity" in err and "1 event(s) with impossible times dropped" in err


def test_folder_with_only_a_fifo_or_a_link_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo_dir, loop_dir = tmp_path / "fifo", tmp_path / "loop"
    fifo_dir.mkdir()
    loop_dir.mkdir()
    os.mkfifo(fifo_dir / "rank-0.json")
    (loop_dir / "a.json").symlink_to(loop_dir / "b.json")
    (loop_dir / "b.json").symlink_to(loop_dir / "a.json")
    for folder in (fifo_dir, loop_dir):
        code, _, err = cli(capsys, "info", folder)
        assert_refused(code, err, str(folder), "no regular files here")


@pytest.mark.parametrize(("rank", "note"), [("1", "rank is text ('1'); read as rank 1"), (-3, "-3 is not a rank")])
def test_odd_rank_values_are_mentioned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rank: object, note: str
) -> None:
    path = write_trace(tmp_path / "trace.json", events(), extra={"distributedInfo": {"rank": rank}})
    code, _, err = cli(capsys, "report", path, "--view", "temporal")
    assert code == 0 and note in err and "trace.json" in err


# ---------------------------------------------------------------- 10. silent failures


def test_closed_stdout_is_quiet_but_other_broken_pipes_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from htatui.jobs import load as loader

    path = write_trace(tmp_path / "rank-0.json", events())

    def broken(*_: Any, **__: Any) -> Any:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(loader, "discover", broken)
    code, _, err = cli(capsys, "info", path)
    assert code == 2 and "broken pipe" in err and "Traceback" not in err
    monkeypatch.undo()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen(
        [sys.executable, "-m", "htatui", "report", str(path), "--view", "kernels", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader goes away, as with `| head -0`
        err_bytes = process.stderr.read()
        assert process.wait(timeout=30) == 0
    assert b"Traceback" not in err_bytes


def test_report_and_export_print_per_file_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_trace(tmp_path / "rank-0.json", events() + [kernel("junk", 1, 1) | {"ts": "soon"}], rank=0)
    code, _, err = cli(capsys, "report", path, "--view", "temporal")
    assert code == 0 and f"htatui: warning: {path}:" in err
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, _, err = cli(capsys, "export", "counters", path, "-o", out_dir)
    assert code == 0 and f"htatui: warning: {path}:" in err
    code, _, err = cli(capsys, "info", path)
    assert "warning:" not in err  # info shows them in its table instead


def test_one_malformed_device_properties_item_keeps_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_trace(tmp_path / "trace.json", events(), rank=3)
    doc = json.loads(path.read_text())
    doc["deviceProperties"].append("junk")
    path.write_text(json.dumps(doc))
    code, out, err = cli(capsys, "info", path, "--format", "csv")
    assert code == 0
    assert out.splitlines()[1].startswith("3,trace.json,distributedInfo,Test GPU")
    assert "1 malformed deviceProperties item(s) ignored" in out


def test_progress_marks_a_file_that_failed(tmp_path: Path) -> None:
    """The loading screen shows ✗ failed, not ✓ parsed, for a gzip that does not load."""
    write_trace(tmp_path / "rank-0.json", events(), rank=0)
    (tmp_path / "rank-1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])
    updates: list[Any] = []
    load_traces([tmp_path], use_cache=False, max_workers=1, progress=updates.append)
    assert {u.path.name: u.failed for u in updates} == {"rank-0.json": False, "rank-1.json.gz": True}


def test_folder_that_cannot_be_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root no mode stops a read, so the listing itself is made to fail as it would for a user."""
    folder = tmp_path / "job"
    write_trace(folder / "rank-0.json", events())

    def denied(self: Path) -> Any:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)
    code, _, err = cli(capsys, "info", folder)
    assert_refused(code, err, "job", "permission denied")


def test_workers_that_cannot_start_fall_back_to_parsing_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from htatui.trace import loader

    class NoWorkers:
        def __init__(self, **_: Any) -> None:
            self._processes: dict[int, Any] = {}

        def submit(self, *_: Any) -> Any:
            raise BrokenPipeError(32, "Broken pipe")

        def shutdown(self, **_: Any) -> None:
            pass

    monkeypatch.setattr(loader, "ProcessPoolExecutor", NoWorkers)
    for rank in range(2):
        write_trace(tmp_path / f"rank-{rank}.json", events(), rank=rank)
    traces = load_traces([tmp_path], use_cache=False, max_workers=2)
    assert traces.rank_ids == [0, 1] and not traces.problems


def test_stopping_the_pool_ends_busy_workers() -> None:
    """Cancel must not wait for a worker in the middle of a long file (the app did not exit)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from htatui.trace.workers import stop_pool

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    busy = pool.submit(time.sleep, 60)
    deadline = time.monotonic() + 90
    # Spawning is slow on a busy machine: wait until the worker process is up and has the task.
    while time.monotonic() < deadline and not (
        busy.running() and pool._processes and all(p.is_alive() for p in pool._processes.values())
    ):
        time.sleep(0.05)
    time.sleep(0.5)
    processes = list(pool._processes.values())
    assert processes and all(process.is_alive() for process in processes), "the worker never started"
    manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
    started = time.monotonic()
    stop_pool(pool)
    assert time.monotonic() - started < 10
    # Its manager thread is over too: left running, it raced the exit hook over a pipe (CI, stop 45).
    assert manager is not None and not manager.is_alive()
    # The task sleeps 60 s, so a worker gone within 30 s was ended, not waited for (slack for a loaded machine).
    gone_by = time.monotonic() + 30
    while time.monotonic() < gone_by and not all(_ended(process) for process in processes):
        time.sleep(0.05)
    assert all(_ended(process) for process in processes)


def _ended(process: Any) -> bool:
    """Whether a worker process has ended. Asked of the kernel where it can be: the pool's own
    thread may reap the worker first, and `is_alive()` then reports a reaped child as alive."""
    stat = Path(f"/proc/{process.pid}/stat")
    if not Path("/proc/self/stat").exists():
        return not process.is_alive()
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_an_export_never_replaces_a_fifo_even_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`export slice … -o FIFO --force` (and counters into a folder where the output name is a FIFO)
    refuse in one line; the FIFO stays a FIFO."""
    import stat

    path = write_trace(tmp_path / "job" / "rank-0.json", events(), rank=0)
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    code, _, err = cli(capsys, "export", "slice", path.parent, "--start", "0", "--end", "100", "-o", fifo, "--force")
    assert (
        code == 2 and err.strip() == f"htatui: {fifo}: is a FIFO, not a regular file; exports write regular files only"
    )
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    os.mkfifo(out_dir / "rank-0_with_counters.json")
    code, _, err = cli(capsys, "export", "counters", path.parent, "-o", out_dir, "--force")
    assert code == 2 and "is a FIFO, not a regular file" in err and "Traceback" not in err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and stat.S_ISFIFO(
        (out_dir / "rank-0_with_counters.json").lstat().st_mode
    )


def test_a_damaged_or_borrowed_cache_entry_is_rebuilt(tmp_path: Path, isolated_cache: Path) -> None:
    """A flipped byte in an entry's events, a link to another entry, or another entry's files copied
    under this key: none is served; the trace is parsed again and the numbers are its own."""
    from htatui.trace import cache

    first = write_trace(tmp_path / "a" / "rank-0.json", events(), rank=0)
    second = write_trace(tmp_path / "b" / "rank-3.json", [*events(), kernel("extra", 900, 10, corr=9)], rank=3)
    fresh = load_traces([first], use_cache=True, max_workers=1).ranks[0].events
    load_traces([second], use_cache=True, max_workers=1)
    key_a, key_b = cache.cache_key(first), cache.cache_key(second)
    arrow_a, json_a = isolated_cache / f"{key_a}.arrow", isolated_cache / f"{key_a}.json"
    assert cache.load_cached(first) is not None

    data = bytearray(arrow_a.read_bytes())
    data[len(data) // 3] ^= 0xFF
    arrow_a.write_bytes(bytes(data))
    assert cache.load_cached(first) is None  # checksum
    assert load_traces([first], use_cache=True, max_workers=1).ranks[0].events.equals(fresh)

    for suffix in (".arrow", ".json"):  # another entry's files copied under this key
        (isolated_cache / f"{key_a}{suffix}").write_bytes((isolated_cache / f"{key_b}{suffix}").read_bytes())
    assert cache.load_cached(first) is None  # the record names key b
    assert load_traces([first], use_cache=True, max_workers=1).ranks[0].events.equals(fresh)

    arrow_a.unlink()
    arrow_a.symlink_to(isolated_cache / f"{key_b}.arrow")
    assert cache.load_cached(first) is None  # a link is not this entry
    json_a.unlink()
    json_a.symlink_to(isolated_cache / f"{key_b}.json")
    assert cache.load_cached(first) is None


@pytest.mark.parametrize("kind", ["device", "socket"])
def test_an_export_never_replaces_a_device_node_or_a_socket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Before: `export slice … -o /dev/full --force`, as root, replaced the device node with a
    regular file and printed success. Made here on a node of its own (char 1,7, as /dev/full),
    never on the system's, and on a Unix socket: one line, exit 2, the node left as it was."""
    import socket
    import stat

    path = write_trace(tmp_path / "job" / "rank-0.json", events(), rank=0)
    target = tmp_path / "full"
    if kind == "device":
        try:
            os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
        except (PermissionError, AttributeError):
            pytest.skip("making a device node needs root (CAP_MKNOD)")
    else:
        listener = socket.socket(socket.AF_UNIX)
        try:
            listener.bind(str(target))
        except OSError:
            pytest.skip("cannot bind a Unix socket here (path too long)")
    before = target.lstat()
    code, out, err = cli(
        capsys, "export", "slice", path.parent, "--start", "0", "--end", "100", "-o", target, "--force"
    )
    assert_refused(code, err, str(target), f"is a {kind}, not a regular file; exports write regular files only")
    assert out == "" and (target.lstat().st_mode, target.lstat().st_ino) == (before.st_mode, before.st_ino)
    if kind == "socket":
        listener.close()


def test_a_cache_entry_that_panics_polars_or_holds_impossible_times_is_rebuilt(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A polars panic (pyo3's PanicException derives from BaseException) while reading an entry, or
    an entry rewritten with a kernel of 10**13 µs and a record forged to match: neither is served;
    the trace is parsed again and the numbers are its own."""
    from htatui.trace import cache

    first = write_trace(tmp_path / "a" / "rank-0.json", events(), rank=0)
    fresh = load_traces([first], use_cache=True, max_workers=1).ranks[0].events

    class PanicException(BaseException):
        pass

    def panic(*_: object, **__: object) -> None:
        raise PanicException("called `Option::unwrap()` on a `None` value")

    with monkeypatch.context() as patched:
        patched.setattr("htatui.trace.cache.pl.read_ipc", panic)
        assert cache.load_cached(first) is None
    key = cache.cache_key(first)
    arrow, record = isolated_cache / f"{key}.arrow", isolated_cache / f"{key}.json"
    import polars as pl

    forged = pl.read_ipc(arrow).with_columns(dur=pl.when(pl.col("cat") == "kernel").then(1e13).otherwise(pl.col("dur")))
    forged.write_ipc(arrow)
    data = arrow.read_bytes()
    meta = json.loads(record.read_bytes())
    meta["entry"] = {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    record.write_bytes(json.dumps(meta).encode())
    assert cache.load_cached(first) is None
    assert load_traces([first], use_cache=True, max_workers=1).ranks[0].events.equals(fresh)
