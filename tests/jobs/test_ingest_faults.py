"""`htatui ingest` under concurrency and faults (issue 22): a dataset written by another ingest
while this one ran is never replaced unseen; pool workers die with a killed ingest and its
staging folder is removed by the next run; `--force` replaces only an htatui dataset and names
the user's files it removed; a symlinked `-o` keeps its link and leaves nothing behind; a source
trace changed after ingest is refused by the exports that re-read it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from dataset_util import tiny_job
from kineto_util import kernel, runtime, step, write_trace

from htatui.cli.main import main
from htatui.jobs.ingest import ingest
from htatui.jobs.load import load_traces
from htatui.store.dataset import DatasetError
from htatui.store.layout import MANIFEST

REPO = Path(__file__).resolve().parents[2]


def leftovers(folder: Path) -> list[str]:
    """Hidden staging or replaced-dataset folders beside a dataset."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_dataset_written_by_another_ingest_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    target = tmp_path / "ds"
    other = tiny_job(tmp_path / "other")

    def second_ingest_lands_first(done: int, total: int, source: Path) -> None:
        if done == 1 and not target.exists():
            ingest([other / "rank-0.json.gz"], target, max_workers=1)

    with pytest.raises(DatasetError) as caught:
        ingest([job], target, max_workers=1, progress=second_ingest_lands_first)
    assert str(caught.value) == f"{target}: written by another ingest while this one ran; not replacing it"
    # The other ingest's dataset is intact (one rank), and this one left no staging folder.
    assert load_traces([target]).rank_ids == [0]
    assert leftovers(tmp_path) == []


def test_a_forced_ingest_does_not_replace_a_dataset_rewritten_meanwhile(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    target = tmp_path / "ds"
    ingest([job], target, max_workers=1)

    def rewritten(done: int, total: int, source: Path) -> None:
        if done == 1:
            ingest([job / "rank-1.json.gz"], target, max_workers=1, force=True)

    with pytest.raises(DatasetError, match="written by another ingest while this one ran"):
        ingest([job], target, max_workers=1, force=True, progress=rewritten)
    assert load_traces([target]).rank_ids == [1]
    assert leftovers(tmp_path) == []


SLOW_TASK = """
import time
from pathlib import Path
from htatui.jobs import ingest as real

def slow_ingest_file(index, source, folder):
    (Path(folder).parent / f"worker-{index}.pid").write_text(str(__import__("os").getpid()))
    time.sleep(120)  # a parse that outlasts its parent
    return real.ingest_file(index, source, folder)
"""

DRIVER = """
import sys
from pathlib import Path
import slow_task
from htatui.jobs import ingest as real
real.ingest_file = slow_task.slow_ingest_file
real.ingest([Path(sys.argv[1])], Path(sys.argv[2]), max_workers=2)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_killing_an_ingest_ends_its_workers_and_the_next_run_cleans_its_staging(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    (tmp_path / "slow_task.py").write_text(textwrap.dedent(SLOW_TASK))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(job), str(tmp_path / "out" / "ds")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    markers = [tmp_path / "out" / f"worker-{i}.pid" for i in (0, 1)]
    deadline = time.monotonic() + 60
    while not all(m.exists() and m.read_text() for m in markers):
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.1)
    workers = [int(m.read_text()) for m in markers]
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [pid for pid in workers if not _gone(pid)]
    for pid in alive:  # never leave them running, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert alive == [], "pool workers outlived their killed ingest"
    stale = [p for p in leftovers(tmp_path / "out") if ".staging-" in p]
    assert len(stale) == 1
    report = ingest([job], tmp_path / "out" / "ds", max_workers=1)
    assert [p.name for p in report.cleaned] == stale
    assert leftovers(tmp_path / "out") == []


def test_force_refuses_a_folder_that_only_looks_like_a_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tiny_job(tmp_path / "job")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / MANIFEST).write_text("{}")
    (mine / "thesis.tex").write_text("years of work")
    assert main(["ingest", str(job), "-o", str(mine), "--force", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"htatui: {mine}: exists and is not an htatui dataset; not replacing it"
    assert (mine / "thesis.tex").read_text() == "years of work"


def test_force_names_the_users_files_it_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tiny_job(tmp_path / "job")
    target = tmp_path / "ds"
    ingest([job], target, max_workers=1)
    (target / "my-notes.txt").write_text("notes")
    (target / "ranks" / "extra.arrow").write_bytes(b"x")
    capsys.readouterr()
    assert main(["ingest", str(job), "-o", str(target), "--force", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert err.strip() == (
        f"htatui: {target}: replaced; it also held 2 file(s) that ingest had not written, "
        "removed with it: my-notes.txt, ranks/extra.arrow"
    )
    assert not (target / "my-notes.txt").exists()


def test_a_symlinked_output_keeps_its_link_and_leaves_nothing_behind(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    real = tmp_path / "store" / "ds"
    ingest([job / "rank-0.json.gz"], real, max_workers=1)
    link = tmp_path / "ds-link"
    link.symlink_to(real)
    report = ingest([job], link, max_workers=1, force=True)
    assert report.ranks == 2 and report.removed == []
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert load_traces([link]).rank_ids == [0, 1]
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "store") == []


def test_export_refuses_a_source_changed_since_ingest(tmp_path: Path) -> None:
    job = tiny_job(tmp_path / "job")
    ingest([job], tmp_path / "ds", max_workers=1)
    source = job / "rank-0.json.gz"
    manifest = json.loads((tmp_path / "ds" / MANIFEST).read_text())
    assert manifest["ranks"][0]["source_size"] == source.stat().st_size
    # The trace is overwritten by a later run of the job: other kernels.
    write_trace(
        source,
        [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("conv", 20, 70, corr=1)],
        rank=0,
        base_ns=1_700_000_000_000_000_000,
    )
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "htatui", "export", "counters", str(tmp_path / "ds"), "-o", str(out)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "HTATUI_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"htatui: {source}: changed since it was ingested; its events are not the dataset's "
        "(ingest it again, or export from the trace files); no rank was exported (all or none)"
    )
    assert "Traceback" not in done.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("use_cache", [False, True])
def test_an_export_refuses_a_trace_file_changed_since_it_was_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_cache: bool
) -> None:
    """The app keeps a job loaded while its files are edited: an export that re-reads the file
    (counters, slice, patterns) refuses one whose size, mtime, ctime or inode changed since it
    was loaded (before: the new file's events were spliced with counters from the old ones). A
    rank served from the cache carries the identity its entry was keyed on."""
    from htatui.analysis.export.slice import export_slice
    from htatui.analysis.export.traces import ExportError, export_counters

    monkeypatch.setenv("HTATUI_CACHE_DIR", str(tmp_path / "cache"))
    job = tiny_job(tmp_path / "job")
    if use_cache:
        load_traces([job], use_cache=True, max_workers=1)  # fills the cache
    traces = load_traces([job], use_cache=use_cache, max_workers=1)
    source = job / "rank-0.json.gz"
    before = source.stat()
    # Rewritten in place with other kernels, its mtime put back: only ctime says it changed.
    write_trace(
        source,
        [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("conv", 20, 70, corr=1)],
        rank=0,
        base_ns=1_700_000_000_000_000_000,
    )
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    out = tmp_path / "out"
    out.mkdir()
    line = f"{source}: changed since it was loaded; its events are not the ones analysed (load it again)"
    with pytest.raises(ExportError) as counters:
        export_counters(traces, None, out)
    assert str(counters.value).splitlines() == [f"{line}; no rank was exported (all or none)"]
    with pytest.raises(ExportError, match=f"^{re.escape(line)}$"):
        export_slice(traces, [0], 0.0, 1e12, out / "slice.json")
    assert list(out.iterdir()) == []
    # The untouched rank still exports, and the job loaded again exports every rank.
    assert [p.name for p in export_counters(traces, [1], out)] == ["rank-1_with_counters.json.gz"]
    again = load_traces([job], use_cache=use_cache, max_workers=1)
    assert len(export_counters(again, None, tmp_path / "out", force=True)) == 2
