"""`specexec doctor [--json] [--device auto|cpu] [--save FOLDER] [--replay FILE]`: check that this machine's
NVIDIA GPU runs the engine correctly, and say in one sentence whether the app will use it.

Exit status 0 when the report was made (whatever it found: a machine without a GPU is not an error), 2 when a
--replay file cannot be read. Progress goes to stderr so `--json` output stays one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object (docs/doctor.md)")
    parser.add_argument(
        "--device",
        choices=["auto", "cpu"],
        default="auto",
        help="auto: the NVIDIA GPU if there is a usable one; cpu: run the correctness checks on the "
        "processor (the machinery, not the GPU)",
    )
    parser.add_argument(
        "--save",
        metavar="FOLDER",
        default=None,
        help="also write the report as doctor-report.json in FOLDER (the app uses its log folder)",
    )
    parser.add_argument(
        "--replay",
        metavar="FILE",
        default=None,
        help="decide a stored report's measurements again with this version's rules; measures nothing",
    )


def run(args: argparse.Namespace) -> int:
    from core.doctor.report import load_report, save_report

    if args.replay:
        from core.doctor.decisions import redecide

        report = redecide(load_report(args.replay))
    else:
        from core.doctor.run import run_doctor

        def progress(step: int, steps: int, what: str) -> None:
            print(f"[{step}/{steps}] checking {what}...", file=sys.stderr, flush=True)

        report = run_doctor(args.device, progress)
    # the report first: a folder that refuses it (then an error and exit status 2) loses nothing measured
    print(json.dumps(report.to_dict(), indent=2) if args.json else report_text(report), flush=True)
    if args.save:
        path = save_report(report, args.save)
        print(f"report written to {path}", file=sys.stderr)
    return 0


def report_text(report) -> str:  # report: core.doctor.report.DoctorReport
    """The report for a terminal: its conclusion, then the checks, leaving out a skipped check whose sentence
    is the conclusion itself (without a GPU, "No NVIDIA GPU found: using the processor." would be said twice;
    a failed check keeps its line, for its FAIL mark)."""
    from core.doctor.report import Status

    head, check_lines = report.lines()[:2], report.lines()[2:]
    said = report.conclusion.summary
    return "\n".join(
        head
        + [
            line
            for line, check in zip(check_lines, report.checks)
            if not (check.status is Status.SKIPPED and check.sentence == said)
        ]
    )
