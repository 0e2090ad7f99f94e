"""The "Copy diagnostics" report: one plain-text report a user can paste into a bug report. No torch: hardware comes
from platform / psutil (and nvidia-smi when it is on PATH)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import Any

import psutil

from core.engine.protocol import PROTOCOL_VERSION


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def gpu_summary(timeout: float = 2.0) -> str:
    """GPU names and memory from nvidia-smi, or a sentence saying none was found."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "no NVIDIA GPU found (nvidia-smi not on PATH)"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            # Windows: the bundled app has no console, so a console program would open one that flashes up
            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nvidia-smi failed: {error}"
    return out.stdout.strip() or f"nvidia-smi returned nothing ({out.stderr.strip()})"


def hardware_summary(with_gpu: bool = True) -> dict[str, str]:
    memory = psutil.virtual_memory()
    info = {
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu": platform.processor() or platform.machine(),
        "cpu cores": f"{psutil.cpu_count(logical=False) or '?'} physical, {os.cpu_count()} logical",
        "memory": f"{_gib(memory.total)} total, {_gib(memory.available)} available",
    }
    if with_gpu:
        info["gpu"] = gpu_summary()
    return info


def versions() -> dict[str, str]:
    from PySide6 import QtCore, __version__ as pyside_version

    from app import __version__ as app_version

    return {
        "SpecExec Desktop": app_version,
        "python": sys.version.split()[0],
        "PySide6": pyside_version,
        "Qt": QtCore.qVersion(),
        "engine protocol": str(PROTOCOL_VERSION),
    }


def diagnostics_text(
    engine: dict[str, Any],
    settings: dict[str, Any],
    paths: dict[str, str],
    with_gpu: bool = True,
    gpu_check: dict[str, str] | None = None,
) -> str:
    """gpu_check: app.system.gpu_check.diagnostics_section (the GPU check's verdict and whole report)."""
    sections = [
        ("Versions", versions()),
        ("Hardware", hardware_summary(with_gpu)),
        ("GPU check", gpu_check or {}),
        ("Engine", engine),
        ("Settings", settings),
        ("Files", paths),
    ]
    lines = ["SpecExec Desktop diagnostics"]
    for title, values in sections:
        lines.append("")
        lines.append(f"[{title}]")
        for key, value in values.items():
            lines.append(f"{key}: {value}")
    return "\n".join(lines) + "\n"
