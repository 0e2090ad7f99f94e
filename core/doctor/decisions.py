"""From check results to what the app does: use the GPU or the processor, CUDA graphs on or off, one line.

Also `redecide`: apply today's rules to the measurements of a stored report (a user's, or a fixture in
tests/fixtures/doctor), so a report can be read again after a threshold changes. Pure: no torch, no GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from core.doctor import agreement, compat, draft, graphs, kernel, link, offload, pinning, streaming
from core.doctor.report import CheckResult, Conclusion, DoctorReport, Status
from core.errors import DoctorReportError

# check name -> (measurement type, decision); also the order the doctor runs them in
CHECKS: dict[str, tuple[type, Callable[[Any], CheckResult]]] = {
    compat.NAME: (compat.CompatMeasurement, compat.decide),
    kernel.NAME: (kernel.KernelMeasurement, kernel.decide),
    draft.NAME: (draft.DraftMeasurement, draft.decide),
    link.NAME: (link.LinkMeasurement, link.decide),
    pinning.NAME: (pinning.PinningMeasurement, pinning.decide),
    offload.NAME: (offload.OffloadMeasurement, offload.decide),
    graphs.NAME: (graphs.GraphMeasurement, graphs.decide),
    streaming.NAME: (streaming.StreamingMeasurement, streaming.decide),
    agreement.NAME: (agreement.AgreementMeasurement, agreement.decide),
}


def skipped(name: str, why: str) -> CheckResult:
    return CheckResult(name, Status.SKIPPED, why)


def conclude(checks: tuple[CheckResult, ...] | list[CheckResult], gpu_name: str | None) -> Conclusion:
    """Any FAIL (or no usable GPU) -> the processor, and the first failure's sentence is the summary; else
    the GPU, with CUDA graphs only when their check passed."""
    by_name = {check.name: check for check in checks}
    first = by_name.get(compat.NAME)
    if first is None or first.status is Status.SKIPPED:
        return Conclusion(use_gpu=False, cuda_graphs=False, summary=compat.NO_GPU if first is None else first.sentence)
    failed = next((check for check in checks if check.status is Status.FAIL), None)
    if failed is not None:
        return Conclusion(use_gpu=False, cuda_graphs=False, summary=failed.sentence)
    graphs_check = by_name.get(graphs.NAME)
    graphs_ok = graphs_check is not None and graphs_check.status is Status.PASS
    degraded = [check for check in checks if check.status is Status.DEGRADED]
    name = gpu_name or "Your NVIDIA GPU"
    if degraded:
        more = (
            f" ({len(degraded) - 1} more warning{'s' if len(degraded) > 2 else ''} in the report)"
            if len(degraded) > 1
            else ""
        )
        return Conclusion(
            use_gpu=True, cuda_graphs=graphs_ok, summary=f"{name} works, with a warning: {degraded[0].sentence}{more}"
        )
    return Conclusion(use_gpu=True, cuda_graphs=graphs_ok, summary=f"{name} passed every check: models run on it.")


def redecide_check(check: CheckResult) -> CheckResult:
    """The same check decided again from its measurements. A check with nothing measured (skipped, or crashed
    inside its measurement: then `measured` holds only the error) stays as it is.

    Raises DoctorReportError for an unknown check or measurements that do not fit its type."""
    if set(check.measured) <= {"error"}:
        return check
    if check.name not in CHECKS:
        raise DoctorReportError(f"unknown check '{check.name}' (known: {', '.join(CHECKS)})")
    kind, decide = CHECKS[check.name]
    names = {f.name for f in dataclasses.fields(kind)}
    try:
        measurement = kind(**{key: value for key, value in check.measured.items() if key in names})
    except TypeError as error:
        raise DoctorReportError(f"the measurements of check '{check.name}' are incomplete: {error}") from error
    return dataclasses.replace(decide(measurement), seconds=check.seconds)


def redecide(report: DoctorReport) -> DoctorReport:
    """The report with every check and the conclusion decided again by today's rules."""
    checks = tuple(redecide_check(check) for check in report.checks)
    gpu_name = (report.gpu or {}).get("name")
    return dataclasses.replace(report, checks=checks, conclusion=conclude(checks, gpu_name))
