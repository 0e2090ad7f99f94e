"""Read this machine: CPU, RAM, NVIDIA GPUs (NVML), platform, free disk at the models folder.

Nothing here raises for missing hardware: no NVIDIA GPU, no driver, Apple silicon or an AMD card all come
back as an empty GPU list and a `gpu_note` in plain words.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import psutil

from core.hardware.description import (
    CpuInfo,
    DiskInfo,
    HardwareDescription,
    RamInfo,
    fixture_path,
    load_description,
)
from core.hardware.nvidia import read_nvidia_gpus
from core.planning.pinning import running_under_wsl
from core.planning.sizes import format_bytes
from core.system.disk import free_bytes
from core.system.locations import models_dir

CPU_ONLY = "models run on the processor, slowly"
AMD_PCI_VENDOR = "0x1002"


def describe_hardware(fixture: str | None = None, measure: bool = False) -> HardwareDescription:
    """The fixture named by `fixture` or SPECEXEC_HW_FIXTURE, else a probe of this machine."""
    path = fixture_path(fixture)
    return load_description(path) if path else probe_hardware(measure=measure)


def probe_hardware(measure: bool = False) -> HardwareDescription:
    """Probe the machine. measure: also time a pinned host-to-device copy and the 4-bit draft kernels on each
    GPU (needs torch + CUDA; call it in the CLI or engine process only)."""
    gpus, missing = read_nvidia_gpus()
    if measure and gpus:
        from core.hardware.draft_rate import measure_draft_kernels
        from core.hardware.h2d import measure_h2d

        gpus = [
            replace(
                gpu,
                h2d_bytes_per_second=measure_h2d(gpu.index),
                draft_kernel_bytes_per_second=measure_draft_kernels(gpu.index),
            )
            for gpu in gpus
        ]
    memory = psutil.virtual_memory()
    return HardwareDescription(
        cpu=CpuInfo(
            model=cpu_model(),
            physical_cores=psutil.cpu_count(logical=False),
            logical_cores=psutil.cpu_count(logical=True),
        ),
        ram=RamInfo(total_bytes=int(memory.total), available_bytes=int(memory.available)),
        gpus=tuple(gpus),
        gpu_note=gpu_note(gpus, missing),
        platform={
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "wsl": "yes" if running_under_wsl() else "no",
            "triton": triton_version(),
        },
        disk=disk_at(models_dir()),
    )


def triton_version() -> str:
    """The installed Triton's version ('' when Python cannot find it), read from its package data without
    importing it: torch's Windows builds ship none, and triton-windows gives the kernels one there."""
    if importlib.util.find_spec("triton") is None:
        return ""
    for distribution in ("triton", "triton-windows"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return "unknown version"


def gpu_note(gpus, missing: str | None) -> str:
    """One sentence a person can read about the GPU situation."""
    if gpus:
        named = ", ".join(f"{gpu.name} ({format_bytes(gpu.vram_total_bytes)})" for gpu in gpus)
        return f"{len(gpus)} NVIDIA GPU{'s' if len(gpus) > 1 else ''}: {named}"
    if platform.system() == "Darwin" and platform.machine() == "arm64":
        return f"Apple silicon: this program needs an NVIDIA GPU, so {CPU_ONLY}"
    if _has_amd_gpu():
        return f"AMD GPU found, but this program uses NVIDIA GPUs (CUDA) only: {CPU_ONLY}"
    return f"No NVIDIA GPU found ({missing}): {CPU_ONLY}" if missing else f"No NVIDIA GPU found: {CPU_ONLY}"


def _has_amd_gpu() -> bool:
    """Linux only (PCI vendor ids in sysfs); elsewhere an AMD card reads as 'no NVIDIA GPU', which is as true."""
    for vendor in Path("/sys/class/drm").glob("card*/device/vendor"):
        try:
            if vendor.read_text().strip() == AMD_PCI_VENDOR:
                return True
        except OSError:
            continue
    return False


def cpu_model() -> str:
    """The processor's name as its maker writes it ("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz")."""
    system = platform.system()
    if system == "Windows":
        # platform.processor() there is "Intel64 Family 6 Model 158 Stepping 10, GenuineIntel": the name the
        # wizard's first line shows is in the registry, where Task Manager reads it
        if name := windows_processor_name():
            return name
    elif system == "Linux":
        try:
            for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
    elif system == "Darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
            )
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown processor"


WINDOWS_PROCESSOR_KEY = r"HARDWARE\DESCRIPTION\System\CentralProcessor\0"


def windows_processor_name() -> str | None:
    """ProcessorNameString of the first processor in Windows' registry (spaces that pad it removed), or None
    where it cannot be read."""
    try:
        import winreg

        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, WINDOWS_PROCESSOR_KEY) as key:
            value, _kind = winreg.QueryValueEx(key, "ProcessorNameString")
    except (ImportError, OSError):
        return None
    if not isinstance(value, str):
        return None
    return " ".join(value.split()) or None


def disk_at(folder: Path) -> DiskInfo:
    """Free bytes on the drive that holds `folder` (or would: the nearest existing parent is measured)."""
    try:
        free = free_bytes(Path(folder).expanduser().absolute())
    except OSError:
        free = None
    return DiskInfo(path=os.fspath(folder), free_bytes=free)
