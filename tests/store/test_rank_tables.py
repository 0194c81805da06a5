"""A dataset's cross-rank tables: the Ranks views over a dataset read them, not the ranks' events,
and print exactly what they print over the trace folder; a table changed since the ingest is one
line, as a changed rank file is."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from dataset_util import RANK_VIEWS, demo_job, generated_job, report_json
from kineto_util import traces_of
from ranks_jobs import gloo_rank, nccl_rank, skewed_rank

from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import BY_ID
from htatui.cli.main import main
from htatui.jobs.ingest import ingest
from htatui.jobs.load import load_traces
from htatui.store.dataset import store_digest
from htatui.store.layout import MANIFEST


def _planted(rank_events: Callable[[int], list[dict[str, object]]], ranks: int) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        folder.mkdir()
        traces_of(folder, *(rank_events(r) for r in range(ranks)))
        return folder

    return make


JOBS: dict[str, Callable[[Path], Path]] = {
    "demo": demo_job,
    "generated": generated_job,
    "gloo": _planted(gloo_rank, 4),  # meeting points: the gloo CPU ops
    "skewed": _planted(skewed_rank, 4),  # a rank on a clock of its own, realigned
    "nccl": _planted(nccl_rank, 3),  # message bytes from the kernels' args
}


@pytest.mark.parametrize("job", list(JOBS))
def test_ranks_views_on_a_dataset_are_the_folders(job: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = JOBS[job](tmp_path / "job")
    ingest([folder], tmp_path / "ds", max_workers=1)
    for view in RANK_VIEWS:
        stored = report_json(capsys, tmp_path / "ds", "--view", view)
        assert stored == report_json(capsys, folder, "--view", view), view
        assert json.loads(stored), view  # something to compare: not two empty answers
    # Another scope than the stored one computes from the events, and still agrees.
    assert report_json(capsys, tmp_path / "ds", "--view", "rank-steps", "--steps", "all") == report_json(
        capsys, folder, "--view", "rank-steps", "--steps", "all"
    )


def test_the_ranks_views_read_no_rank_of_a_dataset(tmp_path: Path) -> None:
    ingest([demo_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    traces = load_traces([tmp_path / "ds"])
    for view_id in RANK_VIEWS:
        view = BY_ID[view_id]
        for table in view.tables:
            table.compute(traces, view.options())
    assert not any(rank.loaded for rank in traces.ranks.values())


def test_the_manifest_records_each_tables_size_and_checksum(tmp_path: Path) -> None:
    ingest([demo_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    manifest = json.loads((tmp_path / "ds" / MANIFEST).read_text())
    assert manifest["code"] == store_digest()
    assert sorted(manifest["tables"]) == sorted(
        ["calls", "cpu_phases", "gpu_phases", "gpu_steps", "late_kernels", "late_spans", "rank_steps", "steps"]
    )
    # `busy` grows with the kernel count: a file per rank, read a rank at a time.
    assert sorted(manifest["busy"]) == ["0", "1", "2", "3"]
    for entry in [*manifest["tables"].values(), *manifest["busy"].values()]:
        data = (tmp_path / "ds" / entry["file"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())


def test_a_changed_table_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ingest([demo_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    calls = tmp_path / "ds" / "tables" / "calls.arrow"
    data = bytearray(calls.read_bytes())
    data[len(data) // 2] ^= 0xFF
    calls.write_bytes(bytes(data))
    # The views that do not read it still answer.
    assert main(["report", str(tmp_path / "ds"), "--view", "temporal"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "ds"), "--view", "stragglers"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == f"htatui: {calls}: changed since it was ingested (size or checksum differs); ingest again"


def test_a_dataset_written_by_other_code_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ingest([demo_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    manifest = json.loads((tmp_path / "ds" / MANIFEST).read_text())
    manifest["code"] = "0" * 32  # what another htatui's parser and store wrote
    for rank in manifest["ranks"]:
        del rank["details"], rank["details_size"], rank["details_sha256"]
    (tmp_path / "ds" / MANIFEST).write_text(json.dumps(manifest))
    assert main(["info", str(tmp_path / "ds")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"htatui: {tmp_path / 'ds'}: written by another htatui version; ingest the traces again"


def test_a_changed_busy_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ingest([demo_job(tmp_path / "job")], tmp_path / "ds", max_workers=1)
    busy = tmp_path / "ds" / "tables" / "busy" / "00001.arrow"
    busy.write_bytes(busy.read_bytes()[:-1])
    assert main(["report", str(tmp_path / "ds"), "--view", "stragglers"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"htatui: {busy}: changed since it was ingested (size or checksum differs); ingest again"


@pytest.mark.parametrize("job", list(JOBS))
def test_late_starts_from_the_tables_are_the_events_late_starts(job: str, tmp_path: Path) -> None:
    """The `late-starts` view reads the ranks' tables (a dataset's stored ones: no rank read, where
    the events' method held every rank at once) and scores exactly as the method over the events."""
    from htatui.analysis.views import steps

    folder = JOBS[job](tmp_path / "job")
    ingest([folder], tmp_path / "ds", max_workers=1)
    view = BY_ID["late-starts"]
    direct = load_traces([folder], use_cache=False, max_workers=1)
    heights = []
    for options in (view.options(), view.options().with_ranks((0, 2)), view.options(Scope(hta_compat=True))):
        expected = steps.stragglers(direct, options)
        stored = load_traces([tmp_path / "ds"])
        made = view.main.compute(stored, options)
        assert isinstance(made, NotedTable) and isinstance(expected, NotedTable)
        assert made.frame.equals(expected.frame) and made.message == expected.message, options
        assert view.main.compute(direct, options).frame.equals(made.frame)  # type: ignore[union-attr]
        heights.append(made.frame.height)
        if not options.hta_compat:
            assert not any(rank.loaded for rank in stored.ranks.values())
    assert heights[0] > 0 or job == "gloo"  # scores to compare (gloo's job has no communication kernels)
