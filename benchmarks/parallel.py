"""One big file decoded on 1 and on N processes (trace/parallel.py): the speed-up and what bounds it.

    python -m fixtures.generate --scale 1000000 --ranks 1 --out /tmp/big    # 237 MB of JSON, gzip
    python benchmarks/parallel.py --trace /tmp/big/rank-0.json.gz --workers 1 2 --repeat 3

Prints, for the trace: the wall seconds of `parse_file` with each worker count (alternating, the
median of --repeat), and the parts that one process does alone whatever the worker count, which
bound the speed-up on many cores: reading and gunzipping the file, cutting it into pieces, handing
a piece to a worker (its bytes for gzip; for plain JSON a byte range the worker reads) and taking
its columns back (pickle, lz4 Arrow IPC), and the frame's finishing
steps after the pieces (`finish_pieces`, the validity checks). Run on a quiet machine: the workers
compete with everything else for the cores.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import resource
import statistics
import time
from pathlib import Path

from htatui.trace.chunks import CHUNK_BYTES, Window, cut_window, locate_in, opening_of
from htatui.trace.columns import decode_columns
from htatui.trace.frame import finish_pieces
from htatui.trace.loader import parse_file
from htatui.trace.parallel import decode_piece, decode_piece_to_send, decode_span_to_send
from htatui.trace.ranges import spans_of
from htatui.trace.read import open_trace
from htatui.trace.validate import drop_duplicate_events, drop_impossible_events


def serial_parts(path: Path) -> dict[str, float]:
    """CPU seconds of the parts one process does (read+gunzip, cut, hand-over) and of decoding."""
    gc.disable()
    start = time.process_time()
    with open_trace(path) as source:
        json_bytes = sum(len(block) for block in source.blocks())
    read = time.process_time() - start
    start = time.process_time()
    with open_trace(path) as source:
        window = Window(source.blocks())
        span = locate_in(window)
        window.at = span.start
        pieces = sum(1 for _ in cut_window(window, span))
    cut = max(0.0, time.process_time() - start - read)
    # The hand-over, measured on the first ten pieces and scaled to the file: a plain file's
    # pieces are named as byte ranges (read by the worker), a gzip file's are sent.
    with open_trace(path) as source:
        window = Window(source.blocks())
        span = locate_in(window)
        window.at = span.start
        sample = [piece for piece, _ in zip(cut_window(window, span), range(10), strict=False)]
        bom, identity = source.plain_start(), source.identity
    start = time.process_time()
    for piece in sample:
        decode_piece(piece, span.list_form)
    decode_sample = time.process_time() - start
    start = time.process_time()
    if bom is not None and identity is not None:
        spans = spans_of(str(path), identity, span.start + bom, opening_of(span), CHUNK_BYTES)[: len(sample)]
        for named in spans:
            sent_span = pickle.loads(pickle.dumps(named))
            pickle.loads(pickle.dumps(decode_span_to_send(sent_span, span.list_form))).received()
    else:
        for piece in sample:
            sent = pickle.loads(pickle.dumps(piece))
            pickle.loads(pickle.dumps(decode_piece_to_send(sent, span.list_form))).received()
    hand_over = (time.process_time() - start - decode_sample) * pieces / len(sample)
    start = time.process_time()
    with open_trace(path) as source:
        columns, _, _ = decode_columns(source, [])
    decode = time.process_time() - start
    start = time.process_time()
    events = finish_pieces(columns)
    events, _ = drop_impossible_events(events)
    drop_duplicate_events(events)
    finish = time.process_time() - start
    gc.enable()
    return {
        "json_mb": json_bytes / 1e6,
        "pieces": pieces,
        "read_gunzip_s": read,
        "cut_s": cut,
        "hand_over_s": hand_over,
        "decode_s": decode,
        "finish_s": finish,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    parse_file(args.trace)  # warm-up: imports, the page cache
    walls: dict[int, list[float]] = {n: [] for n in args.workers}
    cpus: dict[int, list[tuple[float, float]]] = {n: [] for n in args.workers}
    for _ in range(args.repeat):
        for workers in args.workers:
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            start, cpu = time.perf_counter(), time.process_time()
            parse_file(args.trace, workers=workers)
            walls[workers].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            worker_cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
            cpus[workers].append((time.process_time() - cpu, worker_cpu))
    one = statistics.median(walls[args.workers[0]])
    for workers, times in walls.items():
        median = statistics.median(times)
        here = statistics.median(c[0] for c in cpus[workers])
        away = statistics.median(c[1] for c in cpus[workers])
        print(
            f"parse_file, {workers} process(es): {median:.2f} s wall (runs {', '.join(f'{t:.2f}' for t in times)})"
            f"  speed-up {one / median:.2f}x; CPU s: this process {here:.2f}, the workers {away:.2f}"
        )
    parts = serial_parts(args.trace)
    print(
        "one process, CPU s: read+gunzip {read_gunzip_s:.2f}, cutting beyond the read {cut_s:.2f}, "
        "hand-over (piece or byte range out, read there, lz4 IPC frame back) "
        "{hand_over_s:.2f}, decode {decode_s:.2f}, finish+checks {finish_s:.2f}; {json_mb:.0f} MB of JSON "
        "in {pieces} pieces".format(**parts)
    )


if __name__ == "__main__":
    main()
