"""Check 1, before anything touches CUDA: can this torch build run on this NVIDIA driver and GPU?

Measured without starting CUDA: NVML gives the driver's version, the newest CUDA it supports and the card's
compute capability; torch's build constants give the CUDA version it was built with and the architectures
it has kernels for (core.hardware.torch_build). A driver too old or a card too old for the build is a FAIL
with the sentence that says what to do; the app then runs on the processor instead of dying in a CUDA error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status
from core.hardware.description import GpuInfo
from core.hardware.torch_build import TorchBuild, lowest_capability, runs_on

NAME = "compat"
DRIVER_DOWNLOAD_URL = "https://www.nvidia.com/drivers"
NO_GPU = "No NVIDIA GPU found: using the processor."

# The oldest driver a CUDA major version runs on (minor version compatibility: every 13.x build runs on
# the 13.0 driver), from NVIDIA's CUDA release notes (table "CUDA Toolkit and Minimum Required Driver
# Version for CUDA Minor Version Compatibility", and 13.0 GA's "Toolkit Driver Version").
MIN_DRIVER = {
    13: {"Linux": "580.65.06", "Windows": "580.88"},
    12: {"Linux": "525.60.13", "Windows": "527.41"},
}


@dataclass(frozen=True)
class CompatMeasurement:
    """system: platform.system(); driver_cuda: the newest CUDA version the driver supports ("13.0", from
    NVML); compute_capability "8.9"; gpu_name None when there is no NVIDIA GPU (then nvml_note says why)."""

    system: str
    torch_version: str
    torch_cuda: str | None
    arch_list: list[str]
    gpu_name: str | None = None
    driver_version: str | None = None
    driver_cuda: str | None = None
    compute_capability: str | None = None
    nvml_note: str | None = None
    cuda_error: str | None = None  # why CUDA did not start, once the rest passed (see `start_cuda`)


def measure(build: TorchBuild, gpu: GpuInfo | None, system: str, nvml_note: str | None = None) -> CompatMeasurement:
    return CompatMeasurement(
        system=system,
        torch_version=build.torch_version,
        torch_cuda=build.cuda_version,
        arch_list=list(build.arch_list),
        gpu_name=gpu.name if gpu else None,
        driver_version=gpu.driver_version if gpu else None,
        driver_cuda=gpu.cuda_version if gpu else None,
        compute_capability=gpu.compute_capability if gpu else None,
        nvml_note=nvml_note,
    )


def start_cuda() -> str | None:
    """Start CUDA in this process; None when it started, else the error in words. Called only after the
    build, driver and card were found compatible, so its failure is something else (a broken driver install,
    a container without the GPU, CUDA_VISIBLE_DEVICES hiding it)."""
    import torch

    try:
        torch.cuda.init()
        if torch.cuda.device_count() < 1:
            return "CUDA sees no GPU (is CUDA_VISIBLE_DEVICES set?)"
    except Exception as error:  # noqa: BLE001 - torch raises RuntimeError/AssertionError with the driver's reason
        return f"{type(error).__name__}: {error}"
    return None


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in text.split(".")) if text else None
    except ValueError:
        return None


def required_driver(torch_cuda: str, system: str) -> str | None:
    """The oldest driver version a build of CUDA `torch_cuda` runs on, on `system` (None if unknown)."""
    major = (_version(torch_cuda) or (0,))[0]
    table = MIN_DRIVER.get(major, {})
    return table.get(system, table.get("Linux"))


def driver_too_old(m: CompatMeasurement) -> bool:
    """By the driver's own CUDA version when NVML reports it (it must reach the build's major version), else
    by the driver's version number against the table."""
    build = _version(m.torch_cuda)
    supported = _version(m.driver_cuda)
    if build and supported:
        return supported[0] < build[0]
    needed, have = _version(required_driver(m.torch_cuda or "", m.system)), _version(m.driver_version)
    return bool(needed and have and have < needed)


def decide(m: CompatMeasurement) -> CheckResult:
    measured = asdict(m)
    if m.gpu_name is None:
        return CheckResult(NAME, Status.SKIPPED, NO_GPU, measured)
    if not m.torch_cuda:
        return CheckResult(
            NAME,
            Status.FAIL,
            f"This is the processor-only download, so your {m.gpu_name} is not used: install the "
            "NVIDIA download of SpecExec Desktop to use it.",
            measured,
        )
    if driver_too_old(m):
        needed = required_driver(m.torch_cuda, m.system) or f"one for CUDA {m.torch_cuda}"
        return CheckResult(
            NAME,
            Status.FAIL,
            f"Update the NVIDIA driver to version {needed} or newer (yours is {m.driver_version or 'unknown'}): "
            f"{DRIVER_DOWNLOAD_URL}. Until then the app uses the processor.",
            measured,
        )
    capability = _version(m.compute_capability)
    if capability and len(capability) == 2 and not runs_on(m.arch_list, (capability[0], capability[1])):
        oldest = lowest_capability(m.arch_list)
        floor = f"{oldest[0]}.{oldest[1]}" if oldest else "?"
        return CheckResult(
            NAME,
            Status.FAIL,
            f"Your {m.gpu_name} (compute capability {m.compute_capability}) is too old for this program, "
            f"which needs compute capability {floor} or newer (GeForce RTX 20 series onwards): "
            "the app uses the processor.",
            measured,
        )
    if m.cuda_error:
        return CheckResult(
            NAME,
            Status.FAIL,
            f"CUDA did not start on your {m.gpu_name} ({m.cuda_error}): the app uses the processor. "
            f"Reinstalling the NVIDIA driver ({DRIVER_DOWNLOAD_URL}) usually mends this.",
            measured,
        )
    driver = f"driver {m.driver_version}" if m.driver_version else "driver version unknown"
    return CheckResult(
        NAME,
        Status.PASS,
        f"{m.gpu_name} (compute capability {m.compute_capability or '?'}, {driver}) runs this build "
        f"(CUDA {m.torch_cuda}).",
        measured,
    )
