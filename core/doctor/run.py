"""Run the doctor: each check measured, then decided, in order, with progress; one DoctorReport.

The driver/GPU check runs first and never starts CUDA (NVML and torch's build constants only). Only when it
passes does CUDA start and the GPU checks run; after a FAIL the remaining checks are skipped (the app will use
the processor anyway, and a broken GPU should not be pushed further). A check that raises is a FAIL with the
error, never a crash of the doctor.

`device="cpu"` runs the checks that prove correctness on the processor instead (the streamed tiny model with
synchronous copies; the GPTQ kernel only under TRITON_INTERPRET=1): the machinery, not the GPU.
"""

from __future__ import annotations

import dataclasses
import platform
import time
from collections.abc import Callable
from datetime import datetime, timezone

from core.doctor import agreement, compat, draft, graphs, kernel, link, offload, pinning, streaming
from core.doctor.decisions import CHECKS, conclude, skipped
from core.doctor.report import CheckResult, DoctorReport, Status

# progress(step, steps, what is being checked, in words)
Progress = Callable[[int, int, str], None]
TITLES = {
    compat.NAME: "driver and GPU",
    kernel.NAME: "GPTQ kernel",
    draft.NAME: "the draft model's 4-bit product",
    link.NAME: "copy speed to the GPU",
    pinning.NAME: "pinned, pageable and staged copies",
    offload.NAME: "a test model streamed to the GPU",
    graphs.NAME: "CUDA graphs",
    streaming.NAME: "streaming speed of a 70B layer",
    agreement.NAME: "same seed, same words",
}
ON_CPU = "it measures the GPU, not the processor"
CPU_PIN_BYTES = 8 * 1024**2  # the pinning check's copies on the processor: the path, in moments


def app_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specexec-desktop")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _timed(name: str, measure: Callable[[], object]) -> CheckResult:
    """Measure, decide, and time it; an exception inside the measurement is this check's FAIL."""
    started = time.perf_counter()
    try:
        result = CHECKS[name][1](measure())
    except Exception as error:  # noqa: BLE001 - the report must say what broke, not crash
        result = CheckResult(
            name,
            Status.FAIL,
            f"The check of {TITLES[name]} crashed ({type(error).__name__}: {error}): the app uses the processor.",
            {"error": f"{type(error).__name__}: {error}"},
        )
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


def _gpu_measurements(device) -> dict[str, Callable[[], object]]:
    return {
        kernel.NAME: lambda: kernel.measure(device),
        draft.NAME: lambda: draft.measure(device),
        link.NAME: lambda: link.measure(device.index or 0),
        pinning.NAME: lambda: pinning.measure(device),
        offload.NAME: lambda: offload.measure(device),
        graphs.NAME: lambda: graphs.measure(device),
        streaming.NAME: lambda: streaming.measure(device),
        agreement.NAME: lambda: agreement.measure(device),
    }


def _cpu_measurements(device) -> dict[str, Callable[[], object] | None]:
    from core.offload.gptq_kernel import interpreted, triton_available

    run_kernel = triton_available() and interpreted()
    return {
        kernel.NAME: (lambda: kernel.measure(device, shape=(256, 96))) if run_kernel else None,
        draft.NAME: (lambda: draft.measure(device, shapes=((256, 96),), bandwidth=False)) if run_kernel else None,
        link.NAME: None,
        pinning.NAME: lambda: pinning.measure(device, layer_bytes=CPU_PIN_BYTES),
        offload.NAME: lambda: offload.measure(device),
        graphs.NAME: None,
        streaming.NAME: None,
        agreement.NAME: None,
    }


def run_doctor(device: str = "auto", progress: Progress | None = None) -> DoctorReport:
    """device: "auto" (the first NVIDIA GPU when the checks allow it, else nothing more to check), or "cpu"."""
    import torch

    from core.hardware.nvidia import read_nvidia_gpus
    from core.hardware.torch_build import read_torch_build

    report_progress = progress or (lambda step, steps, what: None)
    steps = len(CHECKS)
    report_progress(1, steps, TITLES[compat.NAME])
    started = time.perf_counter()
    build = read_torch_build()
    gpus, nvml_note = read_nvidia_gpus()
    gpu = gpus[0] if gpus else None
    measured = compat.measure(build, gpu, platform.system(), nvml_note)
    first = compat.decide(measured)
    if device == "auto" and first.status is Status.PASS:
        measured = dataclasses.replace(measured, cuda_error=compat.start_cuda())
        first = compat.decide(measured)
    checks = [dataclasses.replace(first, seconds=time.perf_counter() - started)]

    if device == "cpu":
        target = torch.device("cpu")
        plan = _cpu_measurements(target)
    elif first.status is Status.PASS:
        target = torch.device("cuda", 0)
        plan = _gpu_measurements(target)
    else:
        target, plan = torch.device("cpu"), {}
    for step, name in enumerate(list(CHECKS)[1:], start=2):
        report_progress(step, steps, TITLES[name])
        if any(check.status is Status.FAIL for check in checks) and device != "cpu":
            checks.append(skipped(name, f"Not checked: {TITLES[name]} (an earlier check failed)."))
        elif plan.get(name) is None:
            reason = ON_CPU if device == "cpu" else "no usable NVIDIA GPU"
            checks.append(skipped(name, f"Not checked: {TITLES[name]} ({reason})."))
        else:
            checks.append(_timed(name, plan[name]))
    return DoctorReport(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        app_version=app_version(),
        device=str(target),
        torch=dataclasses.asdict(build),
        gpu=dataclasses.asdict(gpu) if gpu else None,
        platform={
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        checks=tuple(checks),
        conclusion=conclude(checks, gpu.name if gpu else None),
    )
