"""The GPU check's verdict inside the app (no torch, no Qt): the doctor's report in the log folder
(`specexec doctor`, run once by the first-run wizard on a machine with an NVIDIA GPU, and by --self-test)
decides whether an "auto" device may use the GPU, what the window's banner says, and what Help > Copy
diagnostics adds. A GPU that failed a check is never used: the app runs on the processor and says why.
"""

from __future__ import annotations

import dataclasses
import html
import json
import logging
import re
from collections.abc import MutableMapping
from pathlib import Path

from core.doctor.report import REPORT_FILE, DoctorReport, load_report
from core.system.env import CUDA_GRAPHS_ENV
from core.engine import protocol as P
from core.errors import DoctorReportError

log = logging.getLogger(__name__)


# Verdicts of this process's checks, by log folder: what the engine bridge reads when the folder refused the
# report (a full drive), so a GPU that failed or crashed its check is not tried for the rest of this run.
_THIS_RUN: dict[Path, DoctorReport] = {}


def remember_verdict(log_dir: Path, report: DoctorReport) -> None:
    """Keep `report` for this run, whether or not its file could be written (`read_report` falls back on it)."""
    _THIS_RUN[Path(log_dir)] = report


def read_report(log_dir: Path | None) -> DoctorReport | None:
    """The stored report, else this run's verdict if the check ran but its file could not be written, else
    None when the check never ran (or its file is damaged: then it runs again)."""
    if log_dir is None:
        return None
    path = Path(log_dir) / REPORT_FILE
    if path.is_file():
        try:
            return load_report(path)
        except DoctorReportError as error:
            log.warning("the GPU check's report is unusable: %s", error)
    return _THIS_RUN.get(Path(log_dir))


def gpu_refused(report: DoctorReport | None) -> bool:
    """True when this machine has an NVIDIA GPU and the check said not to use it."""
    return report is not None and report.gpu is not None and not report.conclusion.use_gpu


def checked_load(load: P.Load, report: DoctorReport | None) -> P.Load:
    """`load` with an automatic device moved to the processor when the GPU failed its check (a device the
    person chose by name is theirs to keep)."""
    if load.device == "auto" and gpu_refused(report):
        return dataclasses.replace(load, device="cpu")
    return load


def apply_graphs_verdict(report: DoctorReport | None, environ: MutableMapping[str, str]) -> None:
    """Turn the draft's CUDA graphs off for engines started from now on (they inherit `environ`) when the GPU
    is used but its graphs check did not pass; a value the person set themselves is left alone."""
    if (
        report is not None
        and report.gpu is not None
        and report.conclusion.use_gpu
        and not report.conclusion.cuda_graphs
    ):
        environ.setdefault(CUDA_GRAPHS_ENV, "0")


_URL = re.compile(r"https://[^\s<>\"]+[^\s<>\".,:;)]")


def linked(sentence: str) -> str:
    """A plain sentence as rich text for a QLabel, its web addresses (the driver download) clickable."""
    return _URL.sub(lambda m: f'<a href="{m.group(0)}">{m.group(0)}</a>', html.escape(sentence, quote=False))


def banner_text(report: DoctorReport | None) -> str | None:
    """The window's banner for a GPU that failed its check (None: nothing to say)."""
    if not gpu_refused(report):
        return None
    return f"<b>Your graphics card is not used.</b> {linked(report.conclusion.summary)}"


def diagnostics_section(report: DoctorReport | None) -> dict[str, str]:
    """For Help > Copy diagnostics: the verdict, and the whole report for us to read."""
    if report is None:
        return {"verdict": "not run on this machine yet"}
    return {"verdict": report.conclusion.summary, "report": json.dumps(report.to_dict(), separators=(",", ":"))}
