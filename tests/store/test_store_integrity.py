"""Stored data is verified on read: a dataset's files are read only when they are regular files
inside the folder with the size and sha256 its manifest gives. Every case: exit code, one line
naming the file, no traceback, no hang (the FIFO case would block a plain read)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest
from dataset_util import tiny_job

from htatui.cli.main import main
from htatui.jobs.ingest import ingest
from htatui.jobs.load import load_traces
from htatui.store.layout import MANIFEST, SUMMARY
from htatui.trace.errors import EventsUnavailable


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    ingest([tiny_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    return tmp_path / "ds"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def edit_manifest(folder: Path, change: object) -> None:
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps(change(manifest) if callable(change) else change))


def test_the_manifest_records_each_files_size_and_checksum(dataset: Path) -> None:
    manifest = json.loads((dataset / MANIFEST).read_text())
    import hashlib

    for entry in manifest["ranks"]:
        data = (dataset / entry["events"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
        details = (dataset / entry["details"]).read_bytes()
        assert (entry["details_size"], entry["details_sha256"]) == (len(details), hashlib.sha256(details).hexdigest())
    summary = (dataset / SUMMARY).read_bytes()
    assert manifest["summary"] == {"size": len(summary), "sha256": hashlib.sha256(summary).hexdigest()}


@pytest.mark.parametrize("path", ["../elsewhere/00000.arrow", "/etc/passwd", "ranks/../../x.arrow", ""])
def test_a_path_out_of_the_folder_is_refused(dataset: Path, path: str, capsys: pytest.CaptureFixture[str]) -> None:
    def point_out(manifest: dict[str, object]) -> dict[str, object]:
        manifest["ranks"][0]["events"] = path  # type: ignore[index]
        return manifest

    edit_manifest(dataset, point_out)
    code, err = run(capsys, "info", dataset)
    assert (
        code == 2 and err.strip() == f"htatui: {dataset}: the manifest names {path!r}, a path out of the dataset folder"
    )


def test_a_manifest_that_is_not_an_object(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_manifest(dataset, [])
    code, err = run(capsys, "info", dataset)
    assert (
        code == 2 and err.strip() == f"htatui: {dataset}: the manifest is not an htatui dataset manifest; ingest again"
    )


def test_an_edited_summary_is_refused(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edited summary.arrow printed idle_us 1.0 next to idle_pct 90.45; now it is not read."""
    data = bytearray((dataset / SUMMARY).read_bytes())
    data[len(data) // 2] ^= 0x01
    (dataset / SUMMARY).write_bytes(bytes(data))
    code, err = run(capsys, "report", dataset, "--view", "temporal")
    assert code == 2
    assert (
        err.strip()
        == f"htatui: {dataset / SUMMARY}: changed since it was ingested (size or checksum differs); ingest again"
    )


def test_swapped_rank_files_are_not_taken_for_each_other(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = dataset / "ranks" / "00000.arrow", dataset / "ranks" / "00001.arrow"
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    code, err = run(capsys, "report", dataset, "--view", "kernels")
    # Same sizes (two tiny ranks): the first read finds rank 0's file is rank 1's, by its checksum.
    assert code == 2 and err.strip() == (
        f"htatui: {first}: changed since it was ingested (size or checksum differs); ingest again"
    )


def test_an_edited_detail_table_is_refused_when_read(dataset: Path) -> None:
    """A rank's detail table is verified like its events: a flipped byte is one line naming the file."""
    details = dataset / "ranks" / "00001.details.arrow"
    data = bytearray(details.read_bytes())
    data[len(data) // 2] ^= 0x01
    details.write_bytes(bytes(data))
    traces = load_traces([dataset])
    with pytest.raises(EventsUnavailable) as raised:
        _ = traces.ranks[1].details
    assert str(raised.value) == f"{details}: changed since it was ingested (size or checksum differs); ingest again"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_link_in_a_rank_files_place(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rank_file = dataset / "ranks" / "00001.arrow"
    elsewhere = tmp_path / "elsewhere.arrow"
    elsewhere.write_bytes(rank_file.read_bytes())
    rank_file.unlink()
    os.mkfifo(rank_file)
    code, err = run(capsys, "report", dataset, "--view", "kernels", "--format", "csv")
    assert code == 0 and f"{rank_file}: not the file that was ingested (its type or size differs)" in err
    rank_file.unlink()
    rank_file.symlink_to(elsewhere)  # the same bytes, but out of the folder
    code, err = run(capsys, "report", dataset, "--view", "kernels", "--format", "csv")
    assert code == 0 and f"{rank_file}: not the file that was ingested (its type or size differs)" in err


def test_a_panic_inside_polars_is_one_line(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyo3's PanicException derives from BaseException, which `except Exception` lets through."""

    class PanicException(BaseException):
        pass

    def panic(*_: object, **__: object) -> pl.DataFrame:
        raise PanicException("called `Option::unwrap()` on a `None` value")

    traces = load_traces([dataset], use_cache=False, max_workers=1)
    monkeypatch.setattr("htatui.store.dataset.pl.read_ipc", panic)
    with pytest.raises(EventsUnavailable, match=r"00000\.arrow: unreadable \(PanicException\)$"):
        _ = traces.ranks[0].events


def test_single_byte_flips_in_a_rank_file_are_all_refused(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: of 300 random single-byte flips, 188 read back "fine" with changed values (one gave
    kernel totals of 1.19e117 µs, exit 0). Now each of 24 flips, spread over the file, is exit 2
    and one line naming the file; the other rank and the summary are untouched."""
    import random

    rank_file = dataset / "ranks" / "00000.arrow"
    original = rank_file.read_bytes()
    others = {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file() and p != rank_file}
    line = f"htatui: {rank_file}: changed since it was ingested (size or checksum differs); ingest again"
    for offset in random.Random(22).sample(range(len(original)), 24):
        flipped = bytearray(original)
        flipped[offset] ^= 1 << random.Random(offset).randrange(8)
        rank_file.write_bytes(bytes(flipped))
        code, err = run(capsys, "report", dataset, "--view", "kernels", "--format", "csv")
        assert (code, err.strip()) == (2, line), offset
    assert {p: p.read_bytes() for p in others} == others


def test_a_forged_rank_file_with_impossible_times_is_refused(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The loader's rules apply to what is read back: a rank file rewritten with a kernel of 10**13 µs
    (over a week) and a manifest forged to match its size and checksum is refused, not summed."""
    import hashlib

    rank_file = dataset / "ranks" / "00000.arrow"
    frame = pl.read_ipc(rank_file)
    frame = frame.with_columns(dur=pl.when(pl.col("cat") == "kernel").then(1e13).otherwise(pl.col("dur")))
    frame.write_ipc(rank_file)
    data = rank_file.read_bytes()

    def forge(manifest: dict[str, object]) -> dict[str, object]:
        manifest["ranks"][0].update(size=len(data), sha256=hashlib.sha256(data).hexdigest())  # type: ignore[index]
        return manifest

    edit_manifest(dataset, forge)
    code, err = run(capsys, "report", dataset, "--view", "kernels", "--format", "csv")
    assert (code, err.strip()) == (2, f"htatui: {rank_file}: holds events with impossible times; ingest again")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("command", [["info"], ["report", "--view", "kernels", "--format", "csv"]])
def test_a_fifo_in_a_rank_files_place_does_not_hang_a_process(dataset: Path, command: list[str]) -> None:
    """Before: `info`, `report` and the app hung on the FIFO. Now the rank is skipped in one line
    (a subprocess with a timeout, so a regression fails instead of hanging the suite)."""
    import subprocess
    import sys

    rank_file = dataset / "ranks" / "00001.arrow"
    rank_file.unlink()
    os.mkfifo(rank_file)
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "htatui", command[0], str(dataset), *command[1:]],
        env={**os.environ, "PYTHONPATH": str(repo), "HTATUI_CACHE_DIR": str(dataset.parent / "cache")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr
    skipped = (
        f"skipped {dataset.parent / 'job' / 'rank-1.json.gz'}: {rank_file}: not the file that was ingested "
        "(its type or size differs)"
    )
    # A table's notes are said once: under `info`'s table, on stderr beside CSV (issue 38).
    if command == ["info"]:
        assert done.stderr == "" and re.sub(r"\s", "", skipped) in re.sub(r"\s", "", done.stdout)
    else:
        assert done.stderr.strip().splitlines() == [f"htatui: {skipped}"]
