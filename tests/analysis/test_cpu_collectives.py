"""CPU collectives as data (issue 37, item 3): the host rules of the communication rules name the
collectives that run on the CPU (gloo ranges, vLLM's shared-memory ops, c10d ops, a user's own),
and the Ranks views, `check` and the step model read them through `comm_rules.cpu_collective`."""

from __future__ import annotations

from pathlib import Path

import pytest
from kineto_util import traces_of
from ranks_jobs import SLOW_SHM_RANK, shm_rank

from htatui.analysis.core import comm_rules
from htatui.analysis.core.rules import Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.health import capabilities
from htatui.analysis.views import ranks
from htatui.analysis.views.ranks import RanksOptions, meeting


@pytest.mark.parametrize(
    ("name", "library", "kind", "tier"),
    [
        ("gloo:all_reduce", "process group", "all_reduce", "range"),
        ("nccl:_all_gather_base", "process group", "all_gather", "range"),
        ("_C::shm_allreduce", "vLLM shared memory", "all_reduce", "range"),
        ("_C::shm_all_gather", "vLLM shared memory", "all_gather", "range"),
        ("_C::shm_send_tensor_list", "vLLM shared memory", "send/recv", "range"),
        ("c10d::allreduce_", "c10d", "all_reduce", "c10d"),
        ("c10d::_reduce_scatter_base_", "c10d", "reduce_scatter", "c10d"),
    ],
)
def test_shipped_host_rules(name: str, library: str, kind: str, tier: str) -> None:
    assert comm_rules.cpu_collective(name) == comm_rules.CpuCollective(library, kind, tier)


@pytest.mark.parametrize("name", ["aten::mm", "_C::shm_allreduce_x", "record_param_comms", "ProfilerStep#3"])
def test_other_host_events_are_not_collectives(name: str) -> None:
    assert comm_rules.cpu_collective(name) is None


def test_shm_allreduce_names_its_straggler(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(shm_rank(r) for r in range(2)))
    result = ranks.analyse(traces, RanksOptions())
    assert result.source == meeting.CPU_OPS
    # Steps 1 and 2: rank 0 reaches the first shm_allreduce at B+200, rank 1 at B+500: 300 µs a
    # step, all exposed (no GPU). Rank 1's aten::mm: 2 × (500 + 200) = 1400 vs 2 × 400 = 800.
    (row,) = result.stragglers.to_dicts()
    assert (row["rank"], row["steps"], row["delay_us"], row["calls_last"]) == (SLOW_SHM_RANK, "1,2", 600.0, 2)
    assert row["cause"] == "aten::mm: 100 % of the delay (+600 µs, 1,400 µs vs median 800 µs)"
    coll = result.collectives.to_dicts()
    # Both calls of a step are one all_reduce group: 2 ranks × 2 per step × 2 steps; mean duration
    # (400 + 100 + 100 + 100) / 4 = 175; skew 300 on the first call, 0 on the second.
    assert [(c["kind"], c["ranks"], c["calls"], c["dur_us"], c["skew_max_us"]) for c in coll] == [
        ("all_reduce", 2, 4, 175.0, 300.0)
    ]


def test_check_counts_shm_collectives(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, *(shm_rank(r) for r in range(2)))
    table = capabilities(traces, read_shapes=False)
    assert table["cpu_collectives"].to_list() == [6, 6]


def test_a_user_host_rule_adds_a_cpu_collective(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "again").mkdir()
    traces = traces_of(tmp_path / "job", *(shm_rank(r, "mylib::ring_allreduce") for r in range(2)))
    assert ranks.analyse(traces, RanksOptions()).source is None
    rules = tmp_path / "mine.toml"
    rules.write_text('[[host]]\nlibrary = "mylib"\npattern = "^mylib::ring_"\nkind = "all_reduce"\n')
    mine = Rules(comm_files=(str(rules),))
    assert comm_rules.cpu_collective("mylib::ring_allreduce", mine) == comm_rules.CpuCollective(
        "mylib", "all_reduce", "range"
    )
    traces = traces_of(tmp_path / "again", *(shm_rank(r, "mylib::ring_allreduce") for r in range(2)))
    result = ranks.analyse(traces, RanksOptions(Scope(rules=mine)))
    assert result.source == meeting.CPU_OPS
    assert result.stragglers["rank"].to_list() == [SLOW_SHM_RANK]
    assert result.stragglers["delay_us"].to_list() == [600.0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[[host]]\nlibrary = 'x'\n", "host rule 1 has no 'pattern' string"),
        ("[[host]]\npattern = '('\n", "host rule 1 pattern '\\(' is not a valid regex"),
        ("[[host]]\npattern = 'x'\ntier = 'kernel'\n", "tier must be one of range, c10d"),
        ("host = 'x'\n", "'host' must be an array of tables"),
    ],
)
def test_bad_host_rule_names_the_file(tmp_path: Path, text: str, problem: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(comm_rules.CommRulesError, match=problem) as error:
        comm_rules.comm_rules(Rules(comm_files=(str(bad),)))
    assert str(bad) in str(error.value)


def test_report_comm_rules_flag_adds_a_host_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli_util import cli
    from kineto_util import write_trace

    for rank in range(2):
        write_trace(tmp_path / "job" / f"rank-{rank}.json", shm_rank(rank, "mylib::ring_allreduce"), rank=rank)
    rules = tmp_path / "mine.toml"
    rules.write_text('[[host]]\nlibrary = "mylib"\npattern = "^mylib::ring_"\n')
    command = ("report", str(tmp_path / "job"), "--view", "stragglers", "--format", "csv")
    plain = cli(capsys, *command)
    assert plain.returncode == 0 and len(plain.stdout.splitlines()) == 1  # the header alone
    assert "no CPU collectives by the communication rules" in plain.stderr
    taught = cli(capsys, *command, "--comm-rules", str(rules))
    assert taught.returncode == 0, taught.stderr
    header, row = taught.stdout.splitlines()[:2]
    assert dict(zip(header.split(","), row.split(","), strict=False))["rank"] == str(SLOW_SHM_RANK)
