"""Run a command N times; print wall, CPU seconds and peak RSS of the largest process (wait4's rusage)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time


def once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  rc={code}: {err[-600:]}", flush=True)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0, code


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
        "rc": [r[3] for r in runs],
        "n": repeat,
    }
    print(json.dumps(row), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "measure.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
