"""Run the doctor in its own process, with progress: what the app's self-test and first-run wizard call.

The app's process never imports torch, and a GPU check may crash the process it runs in (a driver fault, an
illegal memory access): so it runs in a child started like the engine (multiprocessing "spawn", which a
frozen bundle re-launches as itself), reports progress through a queue, saves the report, and sends it back.
A child that dies or hangs is a DoctorReportError the caller turns into "use the processor".
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import queue as queue_module
import time
from collections.abc import Callable
from pathlib import Path

from core.doctor.report import DoctorReport, save_report
from core.errors import DiskWriteError, DoctorReportError

log = logging.getLogger(__name__)

# The GPU checks take about a minute on a GPU (the kernel compiles first); a CPU run a few seconds.
TIMEOUT_S = 600.0


def doctor_child(messages, device: str, save_folder: str | None) -> None:
    """The child's work: run the doctor, posting ("progress", step, steps, what), ("not_saved", words) when
    the report's folder refuses it, and then ("report", dict)."""
    from core.doctor.run import run_doctor

    report = run_doctor(device, lambda step, steps, what: messages.put(("progress", step, steps, what)))
    if save_folder:
        try:
            save_report(report, save_folder)
        except DiskWriteError as error:  # the verdict still counts for this run; the next start checks again
            messages.put(("not_saved", str(error)))
    messages.put(("report", json.dumps(report.to_dict())))  # as the file holds it (lists, not tuples)


def run_doctor_in_subprocess(
    save_folder: str | Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    device: str = "auto",
    timeout: float = TIMEOUT_S,
    child: Callable = doctor_child,
) -> DoctorReport:
    """The doctor's report from a child process; `save_folder` also gets doctor-report.json (or, when its
    drive refuses it, the log a warning: the report is returned all the same).

    Raises DoctorReportError when the child exits without a report (crash) or takes longer than `timeout`."""
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    process = context.Process(
        target=child,
        args=(messages, device, str(save_folder) if save_folder else None),
        name="specexec-doctor",
        daemon=True,
    )
    process.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                message = messages.get(timeout=0.2)
            except queue_module.Empty:
                if not process.is_alive():
                    process.join()
                    raise DoctorReportError(
                        f"the GPU check stopped without a report (exit code {process.exitcode})"
                    ) from None
                if time.monotonic() > deadline:
                    raise DoctorReportError(f"the GPU check took longer than {timeout:.0f} s and was stopped") from None
                continue
            if message[0] == "progress" and progress is not None:
                progress(message[1], message[2], message[3])
            elif message[0] == "not_saved":
                log.warning("%s", message[1])
            elif message[0] == "report":
                return DoctorReport.from_dict(json.loads(message[1]))
    finally:
        if process.is_alive():
            process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
        messages.close()


def crash_report(reason: str, gpu=None) -> DoctorReport:  # gpu: core.hardware.description.GpuInfo | None
    """The report of a check that could not finish (its process died or hung): no measurements, and the GPU
    is not used, since something on it brought the check down."""
    import dataclasses
    import platform
    from datetime import datetime, timezone

    from core.doctor.report import Conclusion
    from core.doctor.run import app_version

    return DoctorReport(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        app_version=app_version(),
        device="none",
        torch={},
        gpu=dataclasses.asdict(gpu) if gpu is not None else None,
        platform={
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "python": platform.python_version(),
        },
        checks=(),
        conclusion=Conclusion(
            use_gpu=False,
            cuda_graphs=False,
            summary=f"The GPU check did not finish ({reason}): the app uses the processor.",
        ),
    )
