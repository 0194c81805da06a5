"""Memory-snapshot speed: a synthetic 100,000-entry CUDA snapshot read and analysed.

    python benchmarks/memory.py [--entries 100000] [--frames 40] [--repeat 3]

The snapshot mimics a training loop: per step, activations allocated in forward (a user Python
frame under library frames under allocator C++ frames), freed in backward except one block per
step that is kept (a leak), gradients from autograd's backward thread (C++ frames only), and
Optimizer.step annotations. Every trace entry gets its own frame dicts, as in a real pickle.
Prints the pickle size, the read time (safe unpickle + normalise + sites) and the analysis time
(series, peak, sites at the peak, allocator state, OOMs, growth, per-span peaks); the target is
analysis < 1 s.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from htatui.analysis.memory import usage as memory  # noqa: E402
from htatui.trace.memory_inputs import read_memory  # noqa: E402

CPP = [
    "torch::unwind::unwind()",
    "torch::CapturedTraceback::gather(bool, bool, bool)",
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)",
    "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType)",
    "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
]


def frames(kind: int, depth: int, layer: int) -> list[dict[str, Any]]:
    stack = [{"name": name, "filename": "??", "line": 0} for name in CPP]
    stack += [{"name": f"_PyEval_EvalFrameDefault#{i}", "filename": "??", "line": 0} for i in range(depth - 10)]
    if kind == 0:  # forward: library frames, then the user's model
        stack.append(
            {"name": "linear", "filename": "/venv/lib/python3.12/site-packages/torch/nn/functional.py", "line": 5}
        )
        stack.append({"name": "forward", "filename": "/work/model.py", "line": 10 + layer})
    elif kind == 1:  # backward thread: C++ only
        stack.insert(
            4,
            {
                "name": "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)",
                "filename": "",
                "line": 0,
            },
        )
    stack += [{"name": "_start", "filename": "??", "line": 0}] * 3
    return stack


def synthetic_snapshot(entries: int, depth: int) -> dict[str, Any]:
    trace: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    time_us = 1_000_000
    address = 1 << 32
    step = 0
    while len(trace) < entries:
        step += 1
        live: list[tuple[int, int]] = []
        for layer in range(40):
            size = 1 << (20 + layer % 4)
            trace.append(
                {
                    "action": "alloc",
                    "addr": address,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": frames(0, depth, layer),
                }
            )
            live.append((address, size))
            address += size
            time_us += 3
        for index, (addr, size) in enumerate(reversed(live)):
            grad = address
            trace.append(
                {
                    "action": "alloc",
                    "addr": grad,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": frames(1, depth, 0),
                }
            )
            address += size
            if index == 0:
                continue  # one activation per step stays live: the leak
            trace.append(
                {
                    "action": "free_requested",
                    "addr": addr,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us + 1,
                    "frames": [],
                }
            )
            trace.append(
                {
                    "action": "free_completed",
                    "addr": addr,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us + 2,
                    "frames": [],
                }
            )
            trace.append(
                {
                    "action": "free_completed",
                    "addr": grad,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us + 3,
                    "frames": [],
                }
            )
            time_us += 4
        annotations.append({"stage": "START", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": time_us})
        time_us += 50
        annotations.append({"stage": "END", "name": "Optimizer.step#Adam.step", "device": 0, "time_us": time_us})
    segment = {
        "device": 0,
        "address": 1 << 32,
        "total_size": address - (1 << 32),
        "allocated_size": 0,
        "stream": 0,
        "segment_type": "large",
        "blocks": [{"address": 1 << 32, "size": address - (1 << 32), "state": "inactive", "frames": []}],
    }
    return {"segments": [segment], "device_traces": [trace[:entries]], "external_annotations": annotations}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=40, help="frames per trace entry")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "snapshot.pickle"
        path.write_bytes(pickle.dumps(synthetic_snapshot(args.entries, args.frames), protocol=4))
        size_mb = path.stat().st_size / 1e6
        reads, analyses = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            recording = read_memory(path)
            reads.append(time.perf_counter() - start)
            start = time.perf_counter()
            result = memory.analyse(recording)
            device = result.summary["device"][0]
            result.sites_at_peak(device, 10)
            memory.allocator_state(recording)
            memory.ooms(result)
            growth = memory.growth(result)
            memory.span_peaks(result)
            analyses.append(time.perf_counter() - start)
    row = result.summary.row(0, named=True)
    print(
        f"entries {recording.events.height:,} · pickle {size_mb:,.1f} MB · "
        f"peak {row['peak_bytes']:,} B · leak {growth.leaking[device]}"
    )
    print(f"read    best {min(reads):.3f} s  (safe unpickle + normalise + sites)")
    print(f"analyse best {min(analyses):.3f} s  (target < 1 s): {'ok' if min(analyses) < 1 else 'SLOW'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
