"""Run a command N times; print wall, CPU seconds, peak RSS of the largest process (wait4's rusage)
and the peak of the whole process tree's proportional set size (PSS, sampled every 50 ms).

The tree's figure matters where the command starts worker processes (`--jobs N`): wait4 gives the
largest single process, while the machine holds the parent and every worker at once. PSS splits
pages shared between processes (libraries, copy-on-write) among them, so the sum is not inflated.

    OUT=/tmp/m python benchmarks/measure.py LABEL N command args…
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time


def _children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (Linux keeps them in each task's `children` file)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found.extend(int(p) for p in f.read().split())
    except OSError:
        pass
    return found


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_kib(root: int) -> int:
    """The summed PSS of `root` and every process under it now."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += _pss_kib(pid)
        todo.extend(_children(pid))
    return total


def once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree_peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            tree_peak[0] = max(tree_peak[0], tree_pss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # The pipe is drained before the wait so a chatty command cannot block on a full pipe.
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  rc={code}: {err[-600:]}", flush=True)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, code, tree_peak[0] / 1024.0


def main() -> None:
    label, repeat = sys.argv[1], int(sys.argv[2])
    cmd = sys.argv[3:]
    env = dict(os.environ)
    runs = [once(cmd, env) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    row = {
        "label": label,
        "wall_median_s": round(statistics.median(walls), 3),
        "wall_min_s": round(min(walls), 3),
        "wall_max_s": round(max(walls), 3),
        "cpu_median_s": round(statistics.median(r[1] for r in runs), 3),
        "peak_mib": round(max(r[2] for r in runs), 1),
        "tree_pss_peak_mib": round(max(r[4] for r in runs), 1),
        "rc": [r[3] for r in runs],
        "n": repeat,
    }
    print(json.dumps(row), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "measure.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
