"""Tests of fixtures/: the generated traces look like Kineto output, and every hand-derived
number in fixtures/expected.py is recomputed here, independently, from the generated events
(a small pure-Python re-implementation of HTA's rules; no htatui, no pandas)."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from fixtures.expected import DIFF_EXPECTED, EDGE_EXPECTED, SMALL_EXPECTED
from fixtures.generate import build_scenario, main, write_scenario
from fixtures.kineto import BASE_TIME_NS, LEGACY_ORIGIN_US, ORIGIN_US
from fixtures.scale import write_scale

ROOT = Path(__file__).resolve().parents[1]
COMP, COMM, MEM, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
TYPE_ORDER = (COMP, COMM, MEM)
IDLE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
LAUNCH_STATS_NAMES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
QUEUE_NAMES = LAUNCH_STATS_NAMES | {
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
}
STEP_RE = re.compile(r"ProfilerStep\s*#\s*(\d+)")
RANK_RE = re.compile(r'"rank":\s+(\d+)')


# ---- loading ----------------------------------------------------------------------------
def read_text(path: Path) -> str:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def load(path: Path) -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(read_text(path))
    return trace


@dataclass
class Row:
    """One X event; times in integer ns of scenario time."""

    cat: str
    name: str
    ts: int
    dur: int
    stream: int
    corr: int
    pid: Any
    tid: Any
    args: dict[str, Any] = field(repr=False)

    @property
    def end(self) -> int:
        return self.ts + self.dur


def ns(x: float) -> int:
    return round(x * 1000)


def rows_of(trace: dict[str, Any]) -> list[Row]:
    origin = ORIGIN_US if "baseTimeNanoseconds" in trace else LEGACY_ORIGIN_US
    out = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") == "Trace":
            continue
        a = e.get("args", {})
        stream = a.get("stream", -1)
        out.append(
            Row(
                e["cat"],
                e["name"],
                ns(e["ts"] - origin),
                ns(e["dur"]),
                stream if isinstance(stream, int) else -1,
                a.get("correlation", -1),
                e["pid"],
                e["tid"],
                a,
            )
        )
    return out


# ---- a tiny independent HTA --------------------------------------------------------------
def is_gpu_s2(r: Row) -> bool:
    return (r.stream >= 0 and r.corr >= 0) or r.name in ("Event Sync", "Context Sync")


def hta_filter(rows: list[Row], include_last: bool) -> list[Row]:
    steps = [r for r in rows if STEP_RE.fullmatch(r.name)]
    if len({r.name for r in steps}) < 2:
        return rows
    last = max(steps, key=lambda r: r.ts)
    cpu = [r for r in rows if not is_gpu_s2(r) and (r.ts <= last.end if include_last else r.ts < last.ts)]
    corrs = {r.corr for r in cpu if r.corr >= 0}
    return cpu + [r for r in rows if is_gpu_s2(r) and r.corr in corrs]


def kernel_type(name: str) -> str:
    if name.startswith(("nccl", "hip", "hccl")) or "ncclKernel" in name:
        return COMM
    if name.startswith(("Memcpy", "hipMemcpy", "Memset", "hipMemset", "dma")):
        return MEM
    excluded = (
        "Memcpy" in name
        or "Memset" in name
        or "dma" in name
        or "Sync" in name
        or name.startswith("Stream Wait Event")
        or (name.startswith("cuda") and "LaunchKernel" in name[4:])
        or name.startswith(
            (
                "nccl",
                "runFunction",
                "hip",
                "job_exe",
                "packet",
                "pe_exe",
                "cpum_exe_subgraph",
                "hccl",
                "collective_subgraph_execution",
            )
        )
    )
    return OTHER if excluded else COMP


def merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def busy(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merge(iv))


def gpu(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.stream != -1]


def temporal(rows: list[Row]) -> dict[str, float]:
    g = gpu(rows)
    m = merge([(r.ts, r.end) for r in g])
    kt = m[-1][1] - m[0][0]
    idle = kt - sum(e - s for s, e in m)
    comp = busy([(r.ts, r.end) for r in g if kernel_type(r.name) == COMP])
    nc = kt - comp - idle
    return {
        "idle_time": idle / 1000,
        "compute_time": comp / 1000,
        "non_compute_time": nc / 1000,
        "kernel_time": kt / 1000,
        "idle_time_pctg": round(100 * idle / kt, 2),
        "compute_time_pctg": round(100 * comp / kt, 2),
        "non_compute_time_pctg": round(100 * nc / kt, 2),
    }


IdleSums = dict[int, dict[str, float]]
IdleCounts = dict[int, dict[str, int]]


def idle(rows: list[Row], delay_us: float = 30) -> tuple[IdleSums, IdleCounts]:
    """stream -> category -> idle µs, and stream -> category -> number of gaps."""
    rt = {r.corr: r.ts for r in rows if r.stream == -1 and r.corr >= 0}
    sums: dict[int, dict[str, float]] = defaultdict(dict)
    counts: dict[int, Counter[str]] = defaultdict(Counter)
    by_stream: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r.stream != -1 and r.cat in IDLE_CATS:
            by_stream[r.stream].append(r)
    for s, rs in by_stream.items():
        rs.sort(key=lambda r: r.ts)
        sums[s]["other"] = 0.0
        for prev, cur in pairwise(rs):
            gap = cur.ts - prev.end
            t_rt = rt.get(cur.corr)
            if t_rt is not None and t_rt > prev.end:
                cat = "host_wait"
            elif gap < delay_us * 1000:
                cat = "kernel_wait"
            else:
                cat = "other"
            sums[s][cat] = sums[s].get(cat, 0.0) + gap / 1000
            counts[s][cat] += 1
    return dict(sums), {s: dict(c) for s, c in counts.items()}


def kernel_types(rows: list[Row]) -> dict[str, float]:
    merged = {t: merge([(r.ts, r.end) for r in gpu(rows) if kernel_type(r.name) == t]) for t in TYPE_ORDER}
    points = sorted({p for iv in merged.values() for se in iv for p in se})
    out: dict[str, float] = defaultdict(float)
    for a, b in pairwise(points):
        active = [t for t in TYPE_ORDER if any(s <= a and b <= e for s, e in merged[t])]
        if active:
            out[" overlapping ".join(active)] += (b - a) / 1000
    return dict(out)


def overlap(rows: list[Row]) -> tuple[float, float]:
    comp = merge([(r.ts, r.end) for r in gpu(rows) if kernel_type(r.name) == COMP])
    comm = merge([(r.ts, r.end) for r in gpu(rows) if kernel_type(r.name) == COMM])
    both = sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in comp for s2, e2 in comm)
    return both / 1000, sum(e - s for s, e in comm) / 1000


def launch_stats(rows: list[Row]) -> dict[int, tuple[float, float, float]]:
    cpu = {r.corr: r for r in rows if r.stream == -1 and r.name in LAUNCH_STATS_NAMES}
    out = {}
    for g in gpu(rows):
        c = cpu.get(g.corr)
        if c is not None:
            out[g.corr] = (c.dur / 1000, g.dur / 1000, max(0, g.ts - c.end) / 1000)
    return out


def queue_length(rows: list[Row]) -> dict[int, list[tuple[float, int]]]:
    gpu_by_corr = {r.corr: r for r in gpu(rows) if r.corr >= 0}
    enq = [r for r in rows if r.stream == -1 and r.name in QUEUE_NAMES and r.corr in gpu_by_corr]
    enq_corrs = {r.corr for r in enq}
    deltas = [(r.ts, gpu_by_corr[r.corr].stream, 1) for r in enq]
    deltas += [(r.ts, r.stream, -1) for r in gpu(rows) if r.corr in enq_corrs]
    out: dict[int, list[tuple[float, int]]] = defaultdict(list)
    level: Counter[int] = Counter()
    for t, s, d in sorted(deltas):
        level[s] += d
        out[s].append((t / 1000, level[s]))
    return dict(out)


def memory_bw(rows: list[Row]) -> dict[str, list[tuple[float, float]]]:
    deltas = []
    for r in gpu(rows):
        if kernel_type(r.name) != MEM:
            continue
        kind = (
            r.name[:11]
            if r.name.startswith("Memcpy")
            else ("Memset" if r.name.startswith("Memset") else "Memcpy Unknown")
        )
        bw = r.args.get("memory bandwidth (GB/s)", 0.0)
        deltas += [(r.ts, kind, bw), (r.ts + max(r.dur, 1000), kind, -bw)]
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    level: dict[str, float] = defaultdict(float)
    for t, kind, d in sorted(deltas):
        level[kind] += d
        out[kind].append((t / 1000, round(level[kind], 9)))
    return dict(out)


def kernel_stats(rows: list[Row]) -> dict[str, dict[str, float]]:
    durs: dict[str, list[float]] = defaultdict(list)
    for r in gpu(rows):
        durs[r.name].append(r.dur / 1000)
    return {
        n: {
            "count": len(d),
            "sum": sum(d),
            "mean": sum(d) / len(d),
            "min": min(d),
            "max": max(d),
            "std": statistics.stdev(d) if len(d) > 1 else 0.0,
        }
        for n, d in durs.items()
    }


def sums_by_name(rows: list[Row], cat: str) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for r in rows:
        if r.cat == cat:
            c, s = out.get(r.name, (0, 0.0))
            out[r.name] = (c + 1, s + r.dur / 1000)
    return out


def steps_of(rows: list[Row]) -> list[int]:
    return sorted({int(m.group(1)) for r in rows if (m := STEP_RE.fullmatch(r.name))})


# ---- fixtures ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixtures")
    for name in ("small", "diff", "edge", "demo"):
        write_scenario(name, root / name)
    return root


@pytest.fixture(scope="module")
def small_rows(out: Path) -> dict[int, list[Row]]:
    return {r: rows_of(load(out / "small" / f"rank-{r}.json.gz")) for r in (0, 1)}


MODES = [("kept", False), ("all", True)]


# ---- small: every expected number recomputed ---------------------------------------------
@pytest.mark.parametrize(("mode", "include_last"), MODES)
def test_small_temporal_idle_types(small_rows: dict[int, list[Row]], mode: str, include_last: bool) -> None:
    exp = SMALL_EXPECTED
    total: dict[str, float] = defaultdict(float)
    for rank, rows in small_rows.items():
        kept = hta_filter(rows, include_last)
        assert temporal(kept) == pytest.approx(exp["temporal"][mode][rank])
        sums, counts = idle(kept)
        assert sums == exp["idle"][mode][rank]
        assert counts == exp["idle_count"][mode][rank]
        for stream, cats in sums.items():
            tot = sum(cats.values())
            ratios = {c: round(v / tot, 2) for c, v in cats.items()}
            assert ratios == exp["idle_ratio"][mode][rank][stream]
        kt = kernel_types(kept)
        assert kt == exp["kernel_types"][mode][rank]
        for k, v in kt.items():
            total[k] += v
        both, comm = overlap(kept)
        assert (both, comm) == exp["overlap_us"][mode][rank]
        assert round(100 * both / comm, 2) == exp["overlap_pctg"][rank]
    assert dict(total) == exp["kernel_types"][mode]["total"]
    grand = sum(total.values())
    assert {k: round(100 * v / grand, 1) for k, v in total.items()} == exp["kernel_types"][mode]["percentage"]


@pytest.mark.parametrize(("mode", "include_last"), MODES)
def test_small_kernels_launch_queue_bw(small_rows: dict[int, list[Row]], mode: str, include_last: bool) -> None:
    exp = SMALL_EXPECTED
    for rank, rows in small_rows.items():
        kept = hta_filter(rows, include_last)
        stats = kernel_stats(kept)
        assert stats.keys() == exp["kernels"][mode][rank].keys()
        for name, st in stats.items():
            assert st == pytest.approx(exp["kernels"][mode][rank][name]), name
            assert kernel_type(name) == exp["kernel_type_of"][name]
        assert launch_stats(kept) == exp["launch"][mode][rank]
        q = queue_length(kept)
        assert q == exp["queue_length"][mode]
        for stream, series in q.items():
            vals = [v for _, v in series]
            summ = exp["queue_summary"][mode][stream]
            assert len(vals) == summ["count"]
            assert statistics.mean(vals) == pytest.approx(summ["mean"])
            assert statistics.stdev(vals) == pytest.approx(summ["std"])
            assert (min(vals), max(vals)) == (summ["min"], summ["max"])
            integral = sum((t2 - t1) * v for (t1, v), (t2, _) in pairwise(series))
            assert integral == exp["queue_integral"][mode][stream]
        bw = memory_bw(kept)
        assert bw == exp["memory_bw"][mode]
        for kind, bw_series in bw.items():
            pos = [v for _, v in bw_series if v > 0]
            summ = exp["memory_bw_summary"][mode][kind]
            assert (len(pos), statistics.mean(pos), min(pos), max(pos)) == (
                summ["count"],
                summ["mean"],
                summ["min"],
                summ["max"],
            )
        assert sums_by_name(kept, "gpu_user_annotation") == exp["gpu_annotations"][mode][rank]
        assert sums_by_name(kept, "user_annotation") == exp["cpu_annotations"][mode]
        counts = {
            "gpu": len(gpu(kept)),
            "runtime": sum(r.cat == "cuda_runtime" for r in kept),
            "cpu_op": sum(r.cat == "cpu_op" for r in kept),
        }
        assert counts == exp["counts"][mode]
        assert steps_of(kept) == exp["steps"][mode]


def test_small_steps_and_bytes(out: Path) -> None:
    exp = SMALL_EXPECTED
    for rank in exp["ranks"]:
        trace = load(out / "small" / f"rank-{rank}.json.gz")
        steps = {e["name"]: e for e in trace["traceEvents"] if STEP_RE.fullmatch(e["name"])}
        for k in exp["steps"]["all"]:
            ev = steps[f"ProfilerStep#{k}"]
            assert ev["ts"] == exp["steps"]["start_us"][k]
            assert ev["ts"] - ORIGIN_US == exp["steps"]["start_t"][k]
            assert ev["dur"] == exp["steps"]["dur"][k]
        for e in trace["traceEvents"]:
            if e.get("cat") in ("gpu_memcpy", "gpu_memset"):
                assert e["args"]["bytes"] == exp["memcpy_bytes"][e["name"]]
        assert trace["baseTimeNanoseconds"] == exp["base_time_ns"]
        assert {e["tid"] for e in trace["traceEvents"] if e.get("cat") == "kernel"} == set(exp["streams"])


# ---- Kineto layout -----------------------------------------------------------------------
def all_files(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.name.endswith((".json", ".json.gz")))


def test_layout_like_kineto(out: Path) -> None:
    files = all_files(out)
    assert len(files) == 2 + 2 + 7 + 4
    for path in files:
        text = read_text(path)
        trace = json.loads(text)
        lines = text.splitlines()
        assert lines[0] == "{" and lines[1] == '  "schemaVersion": 1,'
        legacy = "old_caps" in str(path)
        keys = list(trace)
        if legacy:
            assert keys == ["schemaVersion", "deviceProperties", "traceEvents", "distributedInfo"]
        else:
            assert keys == [
                "schemaVersion",
                "deviceProperties",
                "distributedInfo",
                "traceEvents",
                "traceName",
                "displayTimeUnit",
                "baseTimeNanoseconds",
            ]
            assert trace["displayTimeUnit"] == "ms"
            assert trace["baseTimeNanoseconds"] % (7_889_238 * 10**9) == 0
        # HTA's rank detection: first line matching "rank": <spaces> digits.
        rank_lines = [m for line in lines if (m := RANK_RE.search(line))]
        assert rank_lines and int(rank_lines[0].group(1)) == trace["distributedInfo"]["rank"]
        # One event per line.
        start = lines.index('  "traceEvents": [')
        end = lines.index("  ]", start) if "  ]" in lines[start:] else lines.index("  ],", start)
        body = lines[start + 1 : end]
        assert len(body) == len(trace["traceEvents"])
        for line in body:
            assert line.startswith("  {")
            json.loads(line.strip().rstrip(","))
            if not legacy:
                assert re.search(r'"ts": \d+\.\d{3}[,}]', line), line
        if trace["deviceProperties"]:
            assert all("numSms" in d for d in trace["deviceProperties"])
        evs = trace["traceEvents"]
        spans = [e for e in evs if e.get("cat") == "Trace"]
        assert len(spans) == 1 and spans[0]["pid"] == "Spans"
        assert spans[0]["name"] == "PyTorch Profiler (0)"
        meta = {(e["name"], json.dumps(e["args"])) for e in evs if e["ph"] == "M"}
        assert ("process_labels", '{"labels": "CPU"}') in meta
        if any(e.get("cat") in ("kernel", "Kernel") for e in evs):
            assert any(n == "process_labels" and "GPU" in a for n, a in meta)
            assert any(n == "thread_name" and "stream" in a for n, a in meta)


def test_flows_link_runtime_to_gpu(out: Path) -> None:
    for path in all_files(out):
        evs = load(path)["traceEvents"]
        flows_s = {(e["id"], e["pid"], e["tid"], e["ts"]) for e in evs if e["ph"] == "s"}
        flows_f = {(e["id"], e["pid"], e["tid"], e["ts"]): e for e in evs if e["ph"] == "f"}
        runtime = {}
        for e in evs:
            if e.get("cat") in ("cuda_runtime", "Runtime"):
                runtime[e["args"]["correlation"]] = e
        for e in evs:
            if e.get("ph") != "X" or "stream" not in e.get("args", {}) or e["cat"] not in IDLE_CATS:
                continue
            a = e["args"]
            assert e["pid"] == a["device"] and e["tid"] == a["stream"]
            f = flows_f[(a["correlation"], e["pid"], e["tid"], e["ts"])]
            assert f["bp"] == "e"
            rt = runtime[a["correlation"]]
            assert (a["correlation"], rt["pid"], rt["tid"], rt["ts"]) in flows_s
            if "memory bandwidth (GB/s)" in a:
                assert a["memory bandwidth (GB/s)"] == pytest.approx(a["bytes"] / (e["dur"] * 1000))


def test_streams_never_overlap_and_cpu_ops_nest(out: Path) -> None:
    for path in all_files(out):
        rows = rows_of(load(path))
        lanes: dict[tuple[str, Any, Any], list[Row]] = defaultdict(list)
        for r in rows:
            if r.cat in IDLE_CATS:
                lanes[("gpu", r.pid, r.tid)].append(r)
            elif r.cat not in ("gpu_user_annotation",):
                lanes[("cpu", r.pid, r.tid)].append(r)
        for key, rs in lanes.items():
            rs.sort(key=lambda r: (r.ts, -r.dur))
            if key[0] == "gpu":
                for a, b in pairwise(rs):
                    assert a.end <= b.ts, (path, a.name, b.name)
            else:
                stack: list[Row] = []
                for r in rs:
                    while stack and stack[-1].end <= r.ts:
                        stack.pop()
                    assert not stack or r.end <= stack[-1].end, (path, stack[-1].name, r.name)
                    stack.append(r)


def test_no_htatui_or_third_party_import() -> None:
    code = (
        "import sys, fixtures.generate, fixtures.expected; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('htatui', 'polars', 'orjson', 'msgspec', 'numpy', 'pandas')); print(bad)"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"


# ---- diff --------------------------------------------------------------------------------
def per_step_summary(rows: list[Row], step: int) -> dict[str, dict[str, tuple[int, float]]]:
    """name -> (count, total µs) of one step: CPU rows by start, GPU rows by correlation."""
    st = next(r for r in rows if r.name == f"ProfilerStep#{step}")
    cpu = [r for r in rows if r.stream == -1 and st.ts <= r.ts < st.end]
    corrs = {r.corr for r in cpu}
    g = [r for r in gpu(rows) if r.corr in corrs]
    out: dict[str, dict[str, tuple[int, float]]] = {"kernels": {}, "cpu_ops": {}, "runtime": {}}
    for key, rs in (
        ("kernels", g),
        ("cpu_ops", [r for r in cpu if r.cat == "cpu_op"]),
        ("runtime", [r for r in cpu if r.cat == "cuda_runtime"]),
    ):
        for r in rs:
            c, s = out[key].get(r.name, (0, 0.0))
            out[key][r.name] = (c + 1, s + r.dur / 1000)
    return out


def test_diff_expected(out: Path) -> None:
    exp = DIFF_EXPECTED
    rows = {side: rows_of(load(out / "diff" / side / "rank-0.json.gz")) for side in ("base", "test")}
    totals: dict[str, dict[str, dict[str, tuple[int, float]]]] = {}
    for side, rs in rows.items():
        assert steps_of(rs) == exp["steps"]
        tot: dict[str, dict[str, tuple[int, float]]] = defaultdict(dict)
        for k in exp["steps"]:
            summ = per_step_summary(rs, k)
            assert summ == exp["per_step"][side], (side, k)
            for key, d in summ.items():
                for name, (c, s) in d.items():
                    c0, s0 = tot[key].get(name, (0, 0.0))
                    tot[key][name] = (c0 + c, s0 + s)
            st = next(r for r in rs if r.name == f"ProfilerStep#{k}")
            assert st.ts / 1000 == exp["step_start_t"][side][k]
            assert st.dur / 1000 == exp["step_dur"][side]
        assert dict(tot) == exp["steps_1_3"][side]
        totals[side] = tot
        for mode, include_last in MODES:
            kept = hta_filter(rs, include_last)
            t = temporal(kept)
            assert {k: t[k] for k in exp["temporal"][side][mode]} == exp["temporal"][side][mode]
            assert idle(kept)[0][7] == exp["idle"][side][mode]
        g = sorted(
            gpu([r for r in rs if r.corr in {x.corr for x in rs if x.stream == -1 and x.ts < 2000_000}]),
            key=lambda r: r.ts,
        )
        assert (g[-1].end - g[0].ts - busy([(r.ts, r.end) for r in g])) / 1000 == exp["idle_within_step"][side]
    flat = {side: {n: v for d in totals[side].values() for n, v in d.items()} for side in totals}
    names = flat["base"].keys() | flat["test"].keys()
    delta = {
        n: (
            flat["test"].get(n, (0, 0.0))[0] - flat["base"].get(n, (0, 0.0))[0],
            flat["test"].get(n, (0, 0.0))[1] - flat["base"].get(n, (0, 0.0))[1],
        )
        for n in names
    }
    assert delta == exp["delta_1_3"]
    one = {side: {n: v for d in per_step_summary(rows[side], 1).values() for n, v in d.items()} for side in rows}
    diff: dict[str, list[str]] = {"added": [], "deleted": [], "increased": [], "decreased": [], "unchanged": []}
    for n in sorted(one["base"].keys() | one["test"].keys()):
        n_ctl, n_test = one["base"].get(n, (0, 0))[0], one["test"].get(n, (0, 0))[0]
        key = (
            "added"
            if n_ctl == 0
            else "deleted"
            if n_test == 0
            else "increased"
            if n_test > n_ctl
            else "decreased"
            if n_test < n_ctl
            else "unchanged"
        )
        diff[key].append(n)
    assert diff == exp["ops_diff"]


# ---- edge variants -----------------------------------------------------------------------
def edge(out: Path, name: str) -> tuple[dict[str, Any], list[Row]]:
    path = out / "edge" / name / ("rank-0.json" if name == "old_caps" else "rank-0.json.gz")
    trace = load(path)
    return trace, rows_of(trace)


def test_edge_cpu_only(out: Path) -> None:
    exp = EDGE_EXPECTED["cpu_only"]
    trace, rows = edge(out, "cpu_only")
    assert steps_of(rows) == exp["steps"]
    assert not gpu(rows) and not [r for r in rows if r.cat == "cuda_runtime"]
    assert Counter(r.name for r in rows if r.cat == "cpu_op") == exp["cpu_ops"]
    assert trace["distributedInfo"]["backend"] == exp["backend"]
    assert trace["deviceProperties"] == exp["deviceProperties"]
    assert not [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]


def test_edge_no_steps_and_no_comm(out: Path) -> None:
    exp = EDGE_EXPECTED["no_steps"]
    _, rows = edge(out, "no_steps")
    assert steps_of(rows) == exp["steps"] and len(gpu(rows)) == exp["gpu_events"]
    assert hta_filter(rows, False) == rows
    t = temporal(rows)
    assert {k: t[k] for k in exp["temporal"]} == exp["temporal"]
    assert idle(rows)[0] == exp["idle"]
    exp = EDGE_EXPECTED["no_comm"]
    _, rows = edge(out, "no_comm")
    assert steps_of(rows) == exp["steps"] and len(gpu(rows)) == exp["gpu_events"]
    kept = hta_filter(rows, False)
    t = temporal(kept)
    assert {k: t[k] for k in exp["temporal_kept"]} == exp["temporal_kept"]
    assert idle(kept)[0] == exp["idle_kept"]
    assert kernel_types(kept) == exp["kernel_types_kept"]
    assert overlap(kept)[1] == 0 and exp["overlap_pctg"] is None
    assert not [r for r in rows if kernel_type(r.name) == COMM]


def test_edge_amd(out: Path) -> None:
    exp = EDGE_EXPECTED["amd"]
    trace, rows = edge(out, "amd")
    g = gpu(rows)
    assert {r.stream for r in g} == {exp["stream"]} and len(g) == exp["gpu_events"]
    assert {r.tid for r in g} == {0}
    assert sorted({r.name for r in rows if r.cat == "cuda_runtime"}) == exp["runtime_names"]
    rt = [e for e in trace["traceEvents"] if e.get("cat") == "cuda_runtime"]
    assert all(e["args"]["stream"] == "0x0" for e in rt)
    assert exp["gemm"] in {r.name for r in g}
    assert not any("memory bandwidth (GB/s)" in r.args or "bytes" in r.args for r in g)
    assert trace["deviceProperties"][0]["warpSize"] == 64
    kept = hta_filter(rows, False)
    t = temporal(kept)
    assert {k: t[k] for k in exp["temporal_kept"]} == exp["temporal_kept"]
    assert idle(kept)[0] == exp["idle_kept"]
    assert len(launch_stats(kept)) == exp["hta_launch_stats_rows"]
    assert {k: v for k, v in memory_bw(kept).items() if any(x > 0 for _, x in v)} == exp["memory_bw_summary"]
    assert queue_length(kept)[0]  # hip* launches do count for queue length


def test_edge_old_caps(out: Path) -> None:
    exp = EDGE_EXPECTED["old_caps"]
    trace, rows = edge(out, "old_caps")
    assert "baseTimeNanoseconds" not in trace
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(type(e["ts"]) is exp["ts_type"] and type(e["dur"]) is int for e in xs)
    assert all(e["ts"] > 1.6e15 for e in xs)
    assert sorted({e["cat"] for e in xs} - {"Trace"}) == exp["cats"]
    assert steps_of(rows) == exp["steps"] and len(gpu(rows)) == exp["gpu_events"]
    t = temporal(hta_filter(rows, False))
    assert {k: t[k] for k in exp["temporal_kept"]} == exp["temporal_kept"]


def test_edge_cuda_graph(out: Path) -> None:
    exp = EDGE_EXPECTED["cuda_graph"]
    trace, rows = edge(out, "cuda_graph")
    g = gpu(rows)
    assert len(g) == exp["gpu_events"] and steps_of(rows) == exp["steps"]
    assert sum(r.corr == exp["graph_correlation"] for r in g) == exp["graph_kernels"]
    launch = [r for r in rows if r.name == "cudaGraphLaunch"]
    assert len(launch) == 1 and launch[0].corr == exp["graph_correlation"]
    t = temporal(rows)
    assert {k: t[k] for k in exp["temporal"]} == exp["temporal"]
    assert idle(rows)[0] == exp["idle"]
    assert launch_stats(rows) == exp["hta_launch_stats"]
    assert queue_length(rows) == exp["hta_queue_length"]
    f_ids = Counter(e["id"] for e in trace["traceEvents"] if e["ph"] == "f")
    assert f_ids[exp["graph_correlation"]] == exp["graph_kernels"]


def test_edge_sub_us(out: Path) -> None:
    exp = EDGE_EXPECTED["sub_us"]
    trace, rows = edge(out, "sub_us")
    g = sorted(gpu(rows), key=lambda r: r.ts)
    assert [(r.ts, r.dur) for r in g] == exp["kernel_ns"]
    assert steps_of(rows) == exp["steps"]
    m = merge([(r.ts, r.end) for r in g])
    assert sum(e - s for s, e in m) == exp["busy_ns"]
    assert m[-1][1] - m[0][0] == exp["kernel_time_ns"]
    assert m[-1][1] - m[0][0] - exp["busy_ns"] == exp["idle_ns"]
    assert busy([(r.ts, r.end) for r in g if kernel_type(r.name) == COMP]) == exp["compute_ns"]
    assert idle(rows)[0][7]["kernel_wait"] * 1000 == pytest.approx(exp["idle_kernel_wait_ns"])
    rt = {r.corr: r for r in rows if r.cat == "cuda_runtime"}
    assert [r.ts - rt[r.corr].end for r in g] == exp["launch_delay_ns"]
    per: dict[str, tuple[int, int]] = {}
    for r in g:
        c, s = per.get(r.name, (0, 0))
        per[r.name] = (c + 1, s + r.dur)
    assert per == exp["kernels_ns"]
    raw = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    rounded = [math.floor(e["ts"] + e["dur"]) - math.ceil(e["ts"]) for e in raw]
    assert rounded == exp["hta_rounded_dur"]


# ---- demo --------------------------------------------------------------------------------
def test_demo_is_interesting(out: Path) -> None:
    paths = sorted((out / "demo").glob("rank-*.json.gz"))
    assert [p.name for p in paths] == [f"rank-{r}.json.gz" for r in range(4)]
    compute, comm = {}, {}
    for r, p in enumerate(paths):
        assert p.stat().st_size < 200_000
        trace = load(p)
        assert trace["distributedInfo"]["world_size"] == 4
        assert 2000 < len(trace["traceEvents"]) < 10000
        rows = rows_of(trace)
        assert steps_of(rows) == [10, 11, 12, 13, 14]
        kept = hta_filter(rows, False)
        t = temporal(kept)
        assert 0 < t["idle_time"] < t["kernel_time"]
        compute[r] = t["compute_time"]
        both, comm[r] = overlap(kept)
        assert 0 < both < comm[r]
        cats = idle(kept)[0][7]
        assert all(cats.get(c, 0) > 0 for c in ("host_wait", "kernel_wait", "other")), cats
        kinds = {k[:11] for k in memory_bw(kept)}
        assert {"Memcpy HtoD", "Memcpy DtoD", "Memcpy DtoH", "Memset"} <= kinds
        names = {r.name for r in gpu(rows)}
        assert any(n.startswith("void at::native::") and "<" in n for n in names)
        assert len(names) >= 15
        assert sums_by_name(kept, "gpu_user_annotation")
        assert max(q for s in queue_length(kept).values() for _, q in s) >= 2
    straggler = max(compute, key=lambda r: compute[r])
    assert straggler == 2 and min(comm, key=lambda r: comm[r]) == 2


def test_demo_deterministic_and_committed_copy_current(out: Path) -> None:
    assert build_scenario("demo") == build_scenario("demo")
    committed = ROOT / "fixtures" / "demo"
    if not committed.exists():
        pytest.skip("fixtures/demo not generated yet")
    for p in sorted((out / "demo").glob("*.json.gz")):
        assert read_text(committed / p.name) == read_text(p), p.name


# ---- scale and CLI -----------------------------------------------------------------------
def test_scale_streams_valid_multi_rank_traces(tmp_path: Path) -> None:
    paths = write_scale(tmp_path, ranks=2, events=3000, layers=2)
    for r, p in enumerate(paths):
        text = read_text(p)
        trace = json.loads(text)
        m = RANK_RE.search(text)
        assert m is not None and int(m.group(1)) == r
        assert len(trace["traceEvents"]) >= 3000
        assert trace["baseTimeNanoseconds"] == BASE_TIME_NS
        rows = rows_of(trace)
        assert len(steps_of(rows)) >= 2
        assert temporal(rows)["compute_time"] > 0
    sized = write_scale(tmp_path / "mb", target_mb=0.5, layers=2)
    assert len(read_text(sized[0])) >= 500_000


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", "small", "--out", str(tmp_path / "s")]) == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["rank-0.json.gz", "rank-1.json.gz"]
    assert main(["--scale", "1500", "--ranks", "2", "--layers", "1", "--out", str(tmp_path / "big")]) == 0
    assert len(list((tmp_path / "big").glob("rank-*.json.gz"))) == 2
    assert "rank-1.json.gz" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown scenario"):
        write_scenario("nope", tmp_path)
