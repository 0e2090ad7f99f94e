"""The hardware description as lines a person reads: `specexec hw`, `models recommend` and the set-up wizard's
details (torch-free, like the rest of core.hardware: the app's process imports it)."""

from __future__ import annotations

from core.hardware.description import HardwareDescription
from core.hardware.link import h2d_rate
from core.planning.sizes import format_bytes


def describe_lines(hw: HardwareDescription) -> list[str]:
    """The description as lines a person reads."""
    cores = f"{hw.cpu.physical_cores or '?'} cores, {hw.cpu.logical_cores or '?'} threads"
    lines = [
        f"Processor: {hw.cpu.model} ({cores})",
        f"Memory:    {format_bytes(hw.ram.total_bytes)} in all, {format_bytes(hw.ram.available_bytes)} free",
        f"GPU:       {hw.gpu_note}",
    ]
    for gpu in hw.gpus:
        details = ", ".join(
            part
            for part in (
                f"compute {gpu.compute_capability}" if gpu.compute_capability else "",
                f"driver {gpu.driver_version}" if gpu.driver_version else "",
                f"CUDA {gpu.cuda_version}" if gpu.cuda_version else "",
            )
            if part
        )
        link = gpu.pcie
        lines.append(
            f"  GPU {gpu.index}:   {gpu.name}, {format_bytes(gpu.vram_total_bytes)} "
            f"({format_bytes(gpu.vram_free_bytes)} free){', ' + details if details else ''}"
        )
        lines.append(
            f"           PCIe Gen{link.gen_max or '?'} x{link.width_max or '?'} at most "
            f"(now Gen{link.gen_current or '?'} x{link.width_current or '?'}); host to GPU: {h2d_rate(gpu)[1]}"
        )
    free = "unknown" if hw.disk.free_bytes is None else format_bytes(hw.disk.free_bytes)
    lines.append(f"Disk:      {free} free at {hw.disk.path}")
    system = hw.platform
    lines.append(
        f"System:    {system.get('system', '?')} {system.get('release', '')} {system.get('machine', '')}, "
        f"Python {system.get('python', '?')}"
    )
    if hw.source != "probe":
        lines.append(f"(read from {hw.source.removeprefix('fixture ')}, not probed)")
    return lines
