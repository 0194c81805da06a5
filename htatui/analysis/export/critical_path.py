"""`export critical-path`: a rank's trace with its critical path marked, as HTA's overlay writes it.

HTA 0.6.1's `overlay_critical_path_analysis`: every event with a node on the path gets
`args.critical = 1`, and each path edge of the linked kinds (dependency, kernel launch delay, sync
dependency) becomes a flow (`ph` s/f, cat and name `critical_path`, args weight/critical/type)
from its source event to its destination event, so Perfetto draws the path as arrows. The flow
times are the events' own (`ts`, or the end, a device event's end less up to 1 µs so the arrow
lands inside it), as whole µs like HTA's. Only the marked events are re-encoded; the rest stay
byte for byte. `only_critical` keeps, as HTA's default does, only complete events on the path
and the user annotations and python functions. Written through export's temp-then-rename writer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import polars as pl

from htatui.analysis.export.traces import (
    ExportError,
    check_out_dir,
    join_document,
    output_path,
    read_source,
    reencode_event,
    split_document,
    write_atomic,
)
from htatui.analysis.views import critical_path
from htatui.analysis.views.critical_path.overlay import LINK_SCHEMA, PathMarks, path_marks
from htatui.sources import SourcePath
from htatui.trace.model import TraceSet

KEPT_CATS = ("user_annotation", "python_function")
"""Complete events `only_critical` keeps off the path (HTA keeps them too)."""


def overlay_file_name(path: SourcePath) -> str:
    """HTA's name: "overlaid_critical_path_" + the original file name."""
    return f"overlaid_critical_path_{path.name}"


def _decoded(raw: msgspec.Raw) -> dict[str, Any] | None:
    try:
        event = orjson.loads(bytes(raw))
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def flow_event(
    event: dict[str, Any], at_start: bool, flow_id: int, link: dict[str, Any], start: bool
) -> dict[str, Any]:
    """One end of a path edge's arrow, on `event` (HTA's `get_flow_event`)."""
    ts = _number(event.get("ts")) or 0.0
    dur = _number(event.get("dur")) or 0.0
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    end = ts + dur
    device = _number(args.get("device")) if isinstance(args, dict) else None
    if device is not None and device >= 0:
        end -= min(1.0, dur)
    flow: dict[str, Any] = {
        "ph": "s" if start else "f",
        "id": flow_id,
        "pid": event.get("pid"),
        "tid": event.get("tid"),
        "ts": int(ts if at_start else end),
        "cat": "critical_path",
        "name": "critical_path",
        "args": {"weight": int(link["weight_us"]), "critical": True, "type": link["edge_type"]},
    }
    if not start:
        flow["bp"] = "e"
    return flow


def _mark(event: dict[str, Any]) -> None:
    args = event.get("args")
    if not isinstance(args, dict):
        args = {}
    args["critical"] = 1
    event["args"] = args


def _flows(raw_events: list[msgspec.Raw], marks: PathMarks, path: SourcePath) -> list[dict[str, Any]]:
    flows: list[dict[str, Any]] = []
    for flow_id, link in enumerate(marks.links.iter_rows(named=True)):
        ends = []
        for index, at_start in ((link["src_index"], link["src_is_start"]), (link["dst_index"], link["dst_is_start"])):
            event = _decoded(raw_events[index]) if 0 <= index < len(raw_events) else None
            if event is None:
                raise ExportError(f"{path}: event {index} of the path is not in the file any more; reload it")
            ends.append((event, at_start))
        flows.append(flow_event(*ends[0], flow_id, link, start=True))
        flows.append(flow_event(*ends[1], flow_id, link, start=False))
    return flows


def _rank_marks(traces: TraceSet, options: critical_path.CriticalPathOptions) -> PathMarks:
    g, found = critical_path.rank_graph(traces, options)
    if g is None or found.frame.height == 0:
        raise ExportError(f"no critical path to export: {found.message or 'the path is empty'}")
    return path_marks(g)


def _job_marks(traces: TraceSet, options: critical_path.CriticalPathOptions, rank: int) -> PathMarks:
    """The events of `rank` that the job's path charges time to."""
    found = critical_path.job_edges(traces, options)
    if found.frame.height == 0:
        raise ExportError(f"no job path to export: {found.message or 'the path is empty'}")
    mine = found.frame.filter((pl.col("rank") == rank) & pl.col("index").is_not_null())
    if mine.height == 0:
        ranks = ", ".join(map(str, found.frame["rank"].unique().sort().to_list()))
        raise ExportError(f"the job's path does not run through rank {rank} (it runs through rank {ranks})")
    return PathMarks(frozenset(int(i) for i in mine["index"].to_list()), pl.DataFrame(schema=LINK_SCHEMA))


class _Head(msgspec.Struct):
    ph: Any = None
    cat: Any = None


def export_critical_path(
    traces: TraceSet,
    options: critical_path.CriticalPathOptions,
    out: Path | str,
    force: bool = False,
    *,
    only_critical: bool = False,
    job: bool = False,
) -> tuple[Path, int, int]:
    """Write the chosen rank's trace with its path marked to the file `out`; return it, the
    number of events marked and the number of arrows. Raises ExportError with a one-line message.

    `job`: mark the job's path (the scope's ranks joined at their collectives, `report --view
    critical-path --job-edges`) where it runs through the rank, event by event (no arrows: the
    job's path crosses to other ranks' files)."""
    rank = critical_path.chosen_rank(traces, options)
    if rank is None:
        raise ExportError(f"rank {options.rank} is not loaded (loaded: {', '.join(map(str, traces.rank_ids))})")
    marks = _job_marks(traces, options, rank) if job else _rank_marks(traces, options)
    target_path = Path(out).expanduser()
    folder = check_out_dir(target_path.parent)
    target = output_path(folder, target_path.name, traces, force)
    rank_trace = traces.ranks[rank]
    data = read_source(rank_trace)
    top, array = split_document(data, rank_trace.path)
    try:
        raw_events = msgspec.json.decode(array, type=list[msgspec.Raw])
        heads = msgspec.json.decode(array, type=list[_Head]) if only_critical else []
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ExportError(f"{rank_trace.path}: traceEvents holds something other than events") from None
    flows = _flows(raw_events, marks, rank_trace.path)
    out_events: list[bytes | msgspec.Raw] = []
    for index, raw in enumerate(raw_events):
        if index in marks.events:
            out_events.append(reencode_event(raw, _mark))
        elif not only_critical or heads[index].ph != "X" or heads[index].cat in KEPT_CATS:
            out_events.append(raw)
    out_events.extend(orjson.dumps(flow) for flow in flows)
    joined = b"[\n" + b",\n".join(out_events) + b"\n]" if out_events else b"[]"
    payload = join_document(top, [joined])
    del data, top, array, raw_events, out_events
    write_atomic(target, payload, force)
    return target, len(marks.events), len(flows) // 2
