"""Every Diagnosis rule, by id, in the order they run (docs/diagnosis/<id>.md has each one)."""

from __future__ import annotations

from collections.abc import Callable

from htatui.analysis.diagnosis.calls import data_loader, pageable_copy, sync
from htatui.analysis.diagnosis.context import Context
from htatui.analysis.diagnosis.finding import Finding
from htatui.analysis.diagnosis.gpu import fusion, gemm_roof, gpu_compute
from htatui.analysis.diagnosis.host import host_bound, kernel_storm, step_gaps
from htatui.analysis.diagnosis.memory import memory
from htatui.analysis.diagnosis.ranks import exposed_comm, straggler

Rule = Callable[[Context], list[Finding]]

RULES: dict[str, Rule] = {
    "straggler": straggler,
    "exposed_comm": exposed_comm,
    "host_bound": host_bound,
    "kernel_storm": kernel_storm,
    "sync": sync,
    "pageable_copy": pageable_copy,
    "data_loader": data_loader,
    "gpu_compute": gpu_compute,
    "gemm_roof": gemm_roof,
    "fusion": fusion,
    "step_gaps": step_gaps,
    "memory": memory,
}
"""Each rule's id is its table in rules.toml."""
