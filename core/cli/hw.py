"""`specexec hw [--json] [--measure] [--hw FILE]`: what this computer has, for choosing a model.

`--json` prints the HardwareDescription contract the app's wizard parses (core.hardware.description).
"""

from __future__ import annotations

import argparse
import json

GIB = 1024**3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object (a stable contract)")
    parser.add_argument("--measure", action="store_true",
                        help="time a short pinned host-to-device copy on each NVIDIA GPU (needs torch with CUDA)")
    add_hw_argument(parser)


def add_hw_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hw", metavar="FILE", default=None,
                        help="read this hardware description (JSON, as `hw --json` prints) instead of probing; "
                             "also SPECEXEC_HW_FIXTURE")


def run(args: argparse.Namespace) -> int:
    from core.hardware.probe import describe_hardware

    hardware = describe_hardware(args.hw, measure=args.measure)
    print(json.dumps(hardware.to_dict(), indent=2) if args.json else "\n".join(describe_lines(hardware)))
    return 0


def describe_lines(hw) -> list[str]:
    """The description as lines a person reads."""
    from core.hardware.link import h2d_rate

    cores = f"{hw.cpu.physical_cores or '?'} cores, {hw.cpu.logical_cores or '?'} threads"
    lines = [
        f"Processor: {hw.cpu.model} ({cores})",
        f"Memory:    {hw.ram.total_bytes / GIB:.1f} GB in all, {hw.ram.available_bytes / GIB:.1f} GB free",
        f"GPU:       {hw.gpu_note}",
    ]
    for gpu in hw.gpus:
        details = ", ".join(part for part in (
            f"compute {gpu.compute_capability}" if gpu.compute_capability else "",
            f"driver {gpu.driver_version}" if gpu.driver_version else "",
            f"CUDA {gpu.cuda_version}" if gpu.cuda_version else "",
        ) if part)
        link = gpu.pcie
        lines.append(f"  GPU {gpu.index}:   {gpu.name}, {gpu.vram_total_bytes / GIB:.1f} GB "
                     f"({gpu.vram_free_bytes / GIB:.1f} GB free){', ' + details if details else ''}")
        lines.append(f"           PCIe Gen{link.gen_max or '?'} x{link.width_max or '?'} at most "
                     f"(now Gen{link.gen_current or '?'} x{link.width_current or '?'}); host to GPU: {h2d_rate(gpu)[1]}")
    free = "unknown" if hw.disk.free_bytes is None else f"{hw.disk.free_bytes / GIB:.1f} GB"
    lines.append(f"Disk:      {free} free at {hw.disk.path}")
    system = hw.platform
    lines.append(f"System:    {system.get('system', '?')} {system.get('release', '')} {system.get('machine', '')}, "
                 f"Python {system.get('python', '?')}")
    if hw.source != "probe":
        lines.append(f"(read from {hw.source.removeprefix('fixture ')}, not probed)")
    return lines
