"""Record a big real trace where torch and a GPU are: ResNet-18 training for STEPS active steps.

The benchmarks' big real trace (issue 26: ~541 MB of JSON, 1.65 M events for 450 steps on an H100)
is made by the shared trace recorder's own training loop (`make_real_traces.train`: bf16 autocast,
channels-last, record_shapes, user annotations), only with many active steps, so the trace is what
the profiler writes for a real job, not a generated one. Run on the device machine:

    python benchmarks/record_big_trace.py ../shared/tools/make_real_traces.py OUT_DIR [STEPS]

The trace is OUT_DIR/gpu0.<id>.pt.trace.json (plain JSON, as tensorboard_trace_handler writes it).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path


def main() -> None:
    recorder, out = Path(sys.argv[1]), sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 450
    spec = importlib.util.spec_from_file_location("make_real_traces", recorder)
    if not recorder.is_file() or spec is None or spec.loader is None:
        sys.exit(f"record_big_trace: {recorder}: no such Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # torch or torchvision is missing: this runs only where they are
        sys.exit(f"record_big_trace: {recorder}: needs {exc.name or exc} (run it on a machine with torch and a GPU)")
    started = time.perf_counter()
    module.train(out, module.resnet(), steps=steps, batch=32)
    print(f"record_big_trace: {steps} steps in {time.perf_counter() - started:.0f} s -> {out}")


if __name__ == "__main__":
    main()
