"""One cache rule: an answer is kept under its table, options, rules and the code's digest, in
every layer (the job's memory, a trace folder's parse cache and the summary rows its entries
keep, a dataset's summary and tables), so
an edit of what a view computes is answered anew everywhere, and no version number is bumped."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from dataset_util import demo_job

from htatui.analysis.core import kept
from htatui.analysis.core.intervals import busy_time
from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.registry import BY_ID, frame_of, make_table
from htatui.analysis.views import temporal
from htatui.analysis.views.ranks import tables
from htatui.analysis.views.ranks.phases import cpu_phase_times
from htatui.jobs.ingest import ingest
from htatui.jobs.load import load_traces
from htatui.trace.model import TraceSet

ANSWERS = (("temporal", "main"), ("rank-steps", "main"))
"""A table a dataset answers from its summary rows and a trace folder from the per-rank parts it
kept (temporal), and one the cross-rank tables make (rank-steps: their CPU phases)."""


def _answers(traces: TraceSet) -> dict[tuple[str, str], pl.DataFrame]:
    return {
        (view_id, name): frame_of(make_table(BY_ID[view_id].table(name), traces, BY_ID[view_id].options()))[0]
        for view_id, name in ANSWERS
    }


def _edit_the_views(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an edit does: the views compute something else, and the code's digest moves."""
    monkeypatch.setattr(temporal, "busy_time", lambda *args: busy_time(*args).with_columns(pl.col("busy_us") * 0.5))
    monkeypatch.setattr(
        tables, "cpu_phase_times", lambda *args: cpu_phase_times(*args).with_columns(pl.col("dur_us") * 2)
    )
    monkeypatch.setattr(kept, "code_digest", lambda: "edited")


def test_an_edited_view_is_answered_anew_by_every_cache_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = demo_job(tmp_path / "job")
    ingest([folder], tmp_path / "ds", max_workers=1)
    in_memory = load_traces([folder], max_workers=1)
    old = _answers(in_memory)  # made, and kept in memory and in the ranks' cache entries
    for traces in (load_traces([folder], max_workers=1), load_traces([tmp_path / "ds"], max_workers=1)):
        assert traces.summary is not None  # the folder's from its ranks' cache entries, the dataset's from ingest
        assert all(frame.equals(old[key]) for key, frame in _answers(traces).items())

    _edit_the_views(monkeypatch)
    new = _answers(load_traces([folder], use_cache=False, max_workers=1))
    assert all(not new[key].equals(old[key]) for key in ANSWERS)  # the edit changes every answer
    layers = {
        "memory": in_memory,
        "parse cache": load_traces([folder], max_workers=1),
        "dataset": load_traces([tmp_path / "ds"], max_workers=1),
    }
    assert layers["parse cache"].summary is None and layers["dataset"].summary is None  # rows of other code
    for layer, traces in layers.items():
        for key, frame in _answers(traces).items():
            assert frame.equals(new[key]), (layer, key)


def test_other_rules_are_another_key_in_memory_too(tmp_path: Path) -> None:
    """The memory layer keys by the scope's rules as the disk does: rules given later are not
    answered from what the job derived under the shipped ones, nor the other way round."""
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nlibrary = "mine"\npattern = "flash_fwd"\n')
    traces = load_traces([demo_job(tmp_path / "job")], use_cache=False, max_workers=1)
    view = BY_ID["kernel-types"]
    mine = view.options(scope=Scope(rules=Rules(comm_files=(str(rules),))))
    before = frame_of(make_table(view.main, traces, view.options()))[0]
    after = frame_of(make_table(view.main, traces, mine))[0]
    fresh = frame_of(make_table(view.main, load_traces([tmp_path / "job"], use_cache=False), mine))[0]
    assert not after.equals(before) and after.equals(fresh)
    assert frame_of(make_table(view.main, traces, view.options()))[0].equals(before)


def _diagnosis_rules(tmp_path: Path, off: str) -> Rules:
    path = tmp_path / f"no-{off}.toml"
    path.write_text(f"[{off}]\nenabled = false\n")
    return Rules(diagnosis_files=(str(path),))


def _found_rules(traces: TraceSet, rules: Rules) -> set[str]:
    view = BY_ID["diagnosis"]
    return set(frame_of(make_table(view.main, traces, view.options(scope=Scope(rules=rules))))[0]["rule"])


def test_two_rule_files_in_one_process_give_two_answers(tmp_path: Path) -> None:
    """One job asked under two diagnosis rule files in turn, each turning a different finding
    off: each answer is its own file's, as a job loaded afresh gives it, in memory and from the
    parse cache. (With the rules in environment variables, the table memo's key left the
    diagnosis files out and served the first file's findings under the second.)"""
    folder = demo_job(tmp_path / "job")
    no_straggler, no_loader = _diagnosis_rules(tmp_path, "straggler"), _diagnosis_rules(tmp_path, "data_loader")
    shipped = _found_rules(load_traces([folder], use_cache=False, max_workers=1), Rules())
    assert {"straggler", "data_loader"} <= shipped
    one_job = load_traces([folder], max_workers=1)
    first = _found_rules(one_job, no_straggler)
    second = _found_rules(one_job, no_loader)
    assert first == shipped - {"straggler"} and second == shipped - {"data_loader"}
    assert _found_rules(one_job, no_straggler) == first
    assert _found_rules(load_traces([folder], max_workers=1), no_loader) == second  # the parse cache's parts
