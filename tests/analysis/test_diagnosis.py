"""The Diagnosis: its thresholds as data the user extends, its table's shape and order, the
evidence rows it names, and its first finding on the bundled demo and the shared real traces."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.diagnosis import FINDING_COLUMNS, SUMMARY_COLUMNS, DiagnosisOptions, DiagnosisRulesError
from htatui.analysis.diagnosis.rules import RULES
from htatui.analysis.diagnosis.settings import Family, settings
from htatui.analysis.registry import BY_ID, PAGE_BY_ID, frame_of, make_table
from htatui.analysis.views.critical_path import Change, CriticalPathOptions, what_if_savings
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

ROOT = Path(__file__).resolve().parents[2]


def diagnosis(traces: TraceSet, scope: Scope | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    view = BY_ID["diagnosis"]
    options = DiagnosisOptions(scope or Scope())
    found = frame_of(make_table(view.main, traces, options))[0]
    return found, frame_of(make_table(view.table("summary"), traces, options))[0]


def table(traces: TraceSet, view_id: str, name: str = "main", **knobs: object) -> pl.DataFrame:
    view = BY_ID[view_id]
    return frame_of(make_table(view.table(name), traces, view.options(**knobs)))[0]


# ---- thresholds as data ------------------------------------------------------------------------
def test_every_rule_has_its_thresholds_and_a_docs_page() -> None:
    shipped = settings()
    assert set(shipped.rules) == set(RULES)
    for rule in RULES:
        assert shipped.enabled(rule)
        page = ROOT / "docs" / "diagnosis" / f"{rule}.md"
        assert page.is_file(), page
        text = page.read_text(encoding="utf-8")
        for key in shipped.rules[rule]:
            assert f"`{key}`" in text, (rule, key)  # each threshold explained on the rule's page


def test_a_user_file_changes_numbers_adds_to_lists_and_turns_rules_off(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(
        '[data_loader]\nmin_pct = 1\nnames = ["my_batches"]\n[memory]\nenabled = false\n'
        '[[family]]\nname = "mine"\npattern = "^my_kernel"\n'
    )
    changed = settings(Rules(diagnosis_files=(str(mine),)))
    assert changed.number("data_loader", "min_pct") == 1.0
    assert changed.names("data_loader", "names")[-1] == "my_batches"
    assert "DataLoader" in changed.names("data_loader", "names")  # the shipped ones stay
    assert not changed.enabled("memory")
    assert changed.families[0] == Family("mine", "^my_kernel")  # tried first


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[nosuch]\nmin_pct = 1\n", "no rule 'nosuch'"),
        ("[sync]\nmin_pc = 1\n", "rule 'sync' has no key 'min_pc'"),
        ('[sync]\nmin_pct = "a lot"\n', "sync.min_pct must be a number, true/false or a list of strings"),
        ("[sync]\nnames = 3\n", "sync.names must be a list of strings, like the shipped value"),
        ('[sync]\nnames = ["("]\n', "sync.names: '(' is not a valid regex"),
        ("[sync\n", "not a valid TOML rules file"),
        ('[[family]]\nname = "x"\n', "family 1 needs a 'name' and a 'pattern' string"),
    ],
)
def test_a_bad_rules_file_is_one_line_naming_it(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(DiagnosisRulesError) as caught:
        settings(Rules(diagnosis_files=(str(bad),)))
    message = str(caught.value)
    assert message.startswith(f"{bad}: ") and problem in message and "\n" not in message


# ---- the table ---------------------------------------------------------------------------------
def test_hta_compat_has_no_diagnosis(small_demo: TraceSet) -> None:
    view = BY_ID["diagnosis"]
    result = make_table(view.main, small_demo, DiagnosisOptions(Scope(hta_compat=True)))
    frame, message = frame_of(result)
    assert frame.height == 0 and dict(frame.schema) == FINDING_COLUMNS
    assert message is not None and "--hta-compat" in message


@pytest.fixture(scope="module")
def small_demo() -> TraceSet:
    return load_traces([ROOT / "fixtures" / "demo"], use_cache=False, max_workers=1)


def test_demo_first_finding_is_rank_2s_gpu_compute_as_the_ranks_page_says(small_demo: TraceSet) -> None:
    """fixtures/demo (rank 2's kernels 1.35× slower): the stragglers table's rank 2, 12,728.85 µs of
    delay over steps 10-13 (3,182.21 µs a step), GPU compute +14,492 µs; the mean step 16,110.42 µs.
    Its saving is the step model's straggler what-if: rank 2 at the median's pace, over the 4 steps."""
    found, summary = diagnosis(small_demo)
    assert dict(found.schema) == FINDING_COLUMNS and dict(summary.schema) == SUMMARY_COLUMNS
    first = found.row(0, named=True)
    (saving,) = what_if_savings(small_demo, CriticalPathOptions(), [Change("rank", "2", to_median=True)])
    assert first["saved_pct"] == pytest.approx(saving.saved_pct) and first["saved_pct"] > 15
    assert first["saved_us"] == pytest.approx(saving.saved_us / 4)
    assert first["what_if"] == "rank 2 at the median's pace"
    assert summary["bound_by"][0].startswith("gpu_compute_bound")
    stragglers = table(small_demo, "stragglers").row(0, named=True)
    assert (first["rule"], first["rank"], stragglers["rank"]) == ("straggler", 2, 2)
    assert first["estimate_us"] == pytest.approx(stragglers["delay_us"] / 4)
    assert first["what"] == "rank 2 holds up the other ranks: its GPU compute runs 14,492 µs past theirs"
    assert first["where"] == "rank 2 · steps 10-13 · GPU compute"
    steps = table(small_demo, "steps").filter("used")
    mean_step = steps.group_by("rank").agg(pl.col("dur_us").mean())["dur_us"].mean()
    assert summary["step_us"][0] == pytest.approx(mean_step)
    assert first["estimate_pct"] == pytest.approx(100 * first["estimate_us"] / mean_step)
    assert (summary["ranks"][0], summary["steps"][0], summary["findings"][0]) == (4, "10-13", found.height)


def test_findings_are_ranked_and_their_evidence_rows_are_on_the_named_pages(small_demo: TraceSet) -> None:
    """Modelled savings first, largest first; each saving the step model's what-if of its change."""
    found, _summary = diagnosis(small_demo)
    assert found["rule"].to_list() == ["straggler", "data_loader", "gpu_compute"]
    data_loader = found.row(1, named=True)
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    (saving,) = what_if_savings(small_demo, CriticalPathOptions(), [Change("annotation", loader, 0.0)])
    assert data_loader["saved_pct"] == pytest.approx(saving.saved_pct)
    assert data_loader["what_if"] == f"annotation {loader} removed"
    modelled = found.filter(pl.col("saved_us").is_not_null())
    assert modelled["saved_us"].to_list() == sorted(modelled["saved_us"].to_list(), reverse=True)
    rest = found.filter(pl.col("saved_us").is_null())
    assert rest["estimate_us"].to_list() == sorted(rest["estimate_us"].to_list(), reverse=True)
    for row in found.iter_rows(named=True):
        page = PAGE_BY_ID[row["page"]]
        view_id, _, name = row["table"].partition(" --")
        assert (view_id, name or "main") in {(t.view, t.table) for t in page.tables}, row["table"]
        key = json.loads(row["row"])
        shown = table(small_demo, view_id, name or "main")
        match = pl.all_horizontal([pl.col(column).cast(pl.Utf8) == str(value) for column, value in key.items()])
        assert shown.filter(match).height >= 1, (row["rule"], key)


def test_resnet_eager_is_host_bound_first(load_shared) -> None:  # type: ignore[no-untyped-def]
    """ResNet-18 eager, step 2-3: the GPU is idle 62 % of its span, 97 % of that waiting for
    launches (host wait 21,768 of 22,419 µs on stream 7): 10,884 µs a step, halved: an estimate of 5,442 µs."""
    traces = load_shared("h100_resnet_eager")
    found, _summary = diagnosis(traces)
    first = found.row(0, named=True)
    assert first["rule"] == "host_bound"
    temporal = table(traces, "temporal").row(0, named=True)
    stream = table(traces, "idle", "by-stream").filter(pl.col("stream") == 7).row(0, named=True)
    steps = table(traces, "steps").filter("used").height
    waited = temporal["idle_us"] * stream["host_wait_pct"] / 100 / steps
    assert first["estimate_us"] == pytest.approx(waited * 0.5)
    assert json.loads(first["row"]) == {"rank": 0, "stream": 7}
    (saving,) = what_if_savings(traces, CriticalPathOptions(), [Change("bound_by", "cpu_bound", 0.5)])
    assert first["saved_pct"] == pytest.approx(saving.saved_pct) and first["saved_us"] == pytest.approx(
        saving.saved_us / steps
    )


def test_gpt_compile_is_gpu_compute_in_its_largest_kernel_family_first(load_shared) -> None:  # type: ignore[no-untyped-def]
    """The compiled GPT: the GPU computes 83 % of its span; the GEMM kernels (nvjet_*) take
    9,208 µs over steps 3-4, 4,604 µs a step; 20 % faster: estimate 921 µs."""
    traces = load_shared("h100_gpt_compile")
    found, _summary = diagnosis(traces)
    first = found.row(0, named=True)
    assert first["rule"] == "gpu_compute"
    assert "GEMM kernels take the most of it" in first["what"]
    kernels = table(traces, "kernels", top_k=None)
    gemm = kernels.filter(pl.col("name").str.starts_with("nvjet_"))["sum_us"].sum()
    assert first["estimate_us"] == pytest.approx(float(gemm) / 2 * 0.2)
    top = json.loads(first["row"])["name"]
    assert top.startswith("nvjet_sm90_tst_192x128")
    (saving,) = what_if_savings(traces, CriticalPathOptions(), [Change("name", top, 0.8)])
    assert first["saved_pct"] == pytest.approx(saving.saved_pct) and first["saved_pct"] > 0


def test_gloo_2rank_straggler_matches_the_ranks_page(load_shared) -> None:  # type: ignore[no-untyped-def]
    """Two gloo ranks on one GPU: the stragglers table names rank 0 (16,236 µs, 67 % of the waiting)
    and rank 1 (8,101 µs); no phase explains either. The findings say the same, per step."""
    traces = load_shared("h100_ddp_gloo_2rank")
    found, _summary = diagnosis(traces)
    stragglers = table(traces, "stragglers").filter("is_straggler")
    mine = found.filter(pl.col("rule") == "straggler")
    assert mine["rank"].to_list() == stragglers["rank"].to_list() == [0, 1]
    assert mine["estimate_us"].to_list() == pytest.approx([d / 2 for d in stragglers["delay_us"].to_list()])
    assert mine["what"][0] == "rank 0 holds up the other ranks, and none of its phases explains why"
    # gloo communicates on the host: the exposed-communication finding says to use NCCL.
    comm = found.filter(pl.col("rule") == "exposed_comm").row(0, named=True)
    assert "NCCL backend" in comm["change"] and comm["page"] == "ranks"
