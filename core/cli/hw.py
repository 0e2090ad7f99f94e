"""`specexec hw [--json] [--measure] [--hw FILE]`: what this computer has, for choosing a model.

`--json` prints the HardwareDescription contract the app's wizard parses (core.hardware.description).
"""

from __future__ import annotations

import argparse
import json

from core.hardware.summary import describe_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object (a stable contract)")
    parser.add_argument(
        "--measure",
        action="store_true",
        help="time a short pinned host-to-device copy on each NVIDIA GPU (needs torch with CUDA)",
    )
    add_hw_argument(parser)


def add_hw_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hw",
        metavar="FILE",
        default=None,
        help="read this hardware description (JSON, as `hw --json` prints) instead of probing; "
        "also SPECEXEC_HW_FIXTURE",
    )


def run(args: argparse.Namespace) -> int:
    from core.hardware.probe import describe_hardware

    hardware = describe_hardware(args.hw, measure=args.measure)
    print(json.dumps(hardware.to_dict(), indent=2) if args.json else "\n".join(describe_lines(hardware)))
    return 0
