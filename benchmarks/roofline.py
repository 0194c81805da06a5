"""The performance model against AMD TraceLens on TraceLens's own test traces (issue 34).

    python benchmarks/roofline.py --tracelens DIR [--traces DIR …] [--shared ../shared/traces]

DIR is a checkout of github.com/AMD-AGI/TraceLens (its `tests/traces/**/*_perf_report_csvs` and
`perf_csvs`); each `--traces` folder is one extracted test trace (the .json.gz alone in a folder,
named like the path under tests/traces with "/" as "__", e.g. `h100__Qwen_Qwen1.5-0.5B-Chat__1016005`).
Nothing of TraceLens is imported or copied: its published CSVs are read as numbers.

Two tables:
1. **Formulas per call group.** Every `unified_perf_summary.csv` row with TraceLens's model is
   one call group (name, Input Dims, Input type, Concrete Inputs); htatui's formula is run on the
   same arguments (`dispatch.estimate`) and GFLOPS and Data Moved (MiB) compared: within 1 %,
   one of the documented differences (docs/semantics-perf-model.md), or other.
2. **Coverage.** htatui's coverage sentence (`ops.main`, the whole trace) beside TraceLens's:
   Σ Kernel Time of its rows with a model ÷ its gpu_timeline computation time.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from htatui.analysis.core.scope import Steps  # noqa: E402
from htatui.analysis.perf.call import parse_call  # noqa: E402
from htatui.analysis.perf.dispatch import estimate  # noqa: E402
from htatui.analysis.views import ops  # noqa: E402
from htatui.jobs.load import load_traces  # noqa: E402

MIB = 2**20


def _lists(text: str) -> object:
    """TraceLens writes arguments as Python tuples: as JSON lists."""
    value = ast.literal_eval(text) if text else []

    def listed(v: object) -> object:
        return [listed(x) for x in v] if isinstance(v, tuple | list) else v

    return listed(value)


def formula_rows(tracelens: Path) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path in sorted(tracelens.glob("tests/traces/**/unified_perf_summary*.csv")):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row.get("has_perf_model") != "True" or not row.get("GFLOPS"):
                    continue
                try:
                    dims, types = _lists(row["Input Dims"]), _lists(row["Input type"])
                    strides, concrete = _lists(row.get("Input Strides", "")), _lists(row["Concrete Inputs"])
                except (ValueError, SyntaxError):
                    continue
                call = parse_call(
                    row["name"], json.dumps(dims), json.dumps(types), json.dumps(strides), json.dumps(concrete)
                )
                found = estimate(call) if call is not None else None
                out.append(
                    {
                        "file": str(path.relative_to(tracelens)),
                        "name": row["name"],
                        "tl_gflop": float(row["GFLOPS"] or 0),
                        "tl_mib": float(row["Data Moved (MB)"] or 0),
                        "gflop": None if found is None else found.flops / 1e9,
                        "mib": None if found is None or found.bytes is None else found.bytes / MIB,
                    }
                )
    return out


def _close(a: float | None, b: float) -> bool:
    return a is not None and (abs(a - b) <= 0.01 * max(abs(b), 1e-12) or (a == 0 and b == 0))


def print_formulas(rows: list[dict[str, object]]) -> None:
    both = [r for r in rows if r["gflop"] is not None]
    agree = [r for r in both if _close(r["gflop"], r["tl_gflop"]) and _close(r["mib"], r["tl_mib"])]  # type: ignore[arg-type]
    print(
        f"call groups with TraceLens's model: {len(rows)}; with an htatui formula too: {len(both)}; "
        f"within 1 % on GFLOPS and MiB: {len(agree)}"
    )
    apart = Counter(str(r["name"]) for r in both if r not in agree)
    print("differing, by op (see docs/semantics-perf-model.md, 'Where htatui and TraceLens differ'):")
    for name, n in apart.most_common():
        sample = next(r for r in both if r["name"] == name and r not in agree)
        print(
            f"  {n:4d} {name}: e.g. GFLOPS {sample['tl_gflop']:.6g} vs {sample['gflop']:.6g}, "
            f"MiB {sample['tl_mib']:.6g} vs {sample['mib']}  ({sample['file']})"
        )
    missing = Counter(str(r["name"]) for r in rows if r["gflop"] is None)
    print("TraceLens models, htatui has no formula or no figure:", dict(missing.most_common()))


def tracelens_coverage(tracelens: Path, folder: str) -> str:
    """TraceLens's modelled share for a trace folder name, from its published CSVs (or "–")."""
    for csvs in tracelens.glob("tests/traces/**/*"):
        if not csvs.is_dir() or not (csvs / "unified_perf_summary.csv").is_file():
            continue
        relative = str(csvs.relative_to(tracelens / "tests/traces"))
        stem = relative.replace("_perf_report_csvs", "").replace("/perf_csvs", "").replace("/", "__")
        if not (folder == stem or folder.startswith(stem + "__")) or not (csvs / "gpu_timeline.csv").is_file():
            continue
        with (csvs / "gpu_timeline.csv").open(newline="") as fh:
            timeline = {r["type"]: float(r["time ms"]) for r in csv.DictReader(fh)}
        with (csvs / "unified_perf_summary.csv").open(newline="") as fh:
            kernel = sum(
                float(r["Kernel Time (µs)_sum"] or 0) for r in csv.DictReader(fh) if r.get("has_perf_model") == "True"
            )
        computation = timeline.get("computation_time", 0.0) * 1e3
        return f"{100 * kernel / computation:.1f} % of {computation / 1e3:,.1f} ms" if computation else "–"
    return "–"


def print_coverage(folders: list[Path], tracelens: Path | None) -> None:
    print(f"{'trace':<78} {'htatui':<48} TraceLens")
    options = ops.OpsOptions(group_by="shape", flops=True, kinds="op")
    options = replace(options, scope=replace(options.scope, steps=Steps.parse("all")))
    for folder in folders:
        traces = load_traces([folder], use_cache=True, max_workers=1)
        message = ops.main(traces, options).message or ""
        ours = "; ".join(p.removeprefix("coverage: ") for p in message.split("; ") if p.startswith("coverage"))
        theirs = tracelens_coverage(tracelens, folder.name) if tracelens else "–"
        print(f"{folder.name:<78} {ours:<48} {theirs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracelens", type=Path, help="a checkout of AMD-AGI/TraceLens")
    parser.add_argument("--traces", type=Path, nargs="*", default=[], help="extracted TraceLens test traces")
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "traces")
    args = parser.parse_args()
    if args.tracelens:
        print_formulas(formula_rows(args.tracelens))
        print()
    shared = sorted(p for p in args.shared.glob("h100_*") if p.is_dir()) if args.shared.is_dir() else []
    print_coverage([*shared, *args.traces], args.tracelens)


if __name__ == "__main__":
    main()
