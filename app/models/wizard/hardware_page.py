"""Wizard page 1, "Your computer": what was found, in one plain line, with the details a click away.

The probe (NVML, RAM, disk) and the fit prediction run on a background thread. Where there is an NVIDIA GPU
and no fixture, the host-to-device copy rate is measured by `specexec hw --json --measure` in a separate
process (it needs torch, which the app never imports); without CUDA that figure is simply left out.
On a machine with an NVIDIA GPU the GPU check (`specexec doctor`, core.doctor) runs once, in its own process
with its progress on the page; its verdict is one line here, its report goes to the log folder, and a GPU
that failed it is left out of the fit (the models are chosen for the processor).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from html import escape

from PySide6.QtCore import QProcess, Qt, Signal
from PySide6.QtWidgets import QFrame, QGridLayout, QVBoxLayout, QWidget

from app.system.background import BackgroundCall
from core.system.cli_process import cli_command
from app.system.gpu_check import gpu_refused, linked, read_report, remember_verdict
from app.system.paths import AppPaths
from app.models.wizard.plain_page import PlainPage
from app.models.wizard.state import Prediction, WizardState
from app.models.wizard.pair_list import badge, label
from app.models.wizard.words import hardware_summary, recommendation_words
from core.hardware.description import HardwareDescription, fixture_path
from app.theme.tokens import SPACE
from app.window.buttons import LINK, button
from app.window.labels import Label

log = logging.getLogger(__name__)

_ROW = re.compile(r"^ {0,2}(GPU \d+|[A-Z][A-Za-z]*):\s+(.*)$")


def detail_rows(lines: list[str]) -> list[tuple[str, str]]:
    """`specexec hw`'s lines (aligned with spaces for a terminal) as (name, value) rows for a grid; a
    continuation line becomes a row with an empty name."""
    rows = []
    for line in lines:
        match = _ROW.match(line)
        rows.append((match.group(1), match.group(2).strip()) if match else ("", line.strip()))
    return rows


class DetailsGrid(QFrame):
    """The computer's details as two columns: names (muted) and values (selectable)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hardwareDetails")
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 4, 0, 0)
        self.grid.setHorizontalSpacing(16)
        self.grid.setVerticalSpacing(4)
        self.grid.setColumnStretch(1, 1)
        self.rows: list[tuple[str, str]] = []

    def set_lines(self, lines: list[str]) -> None:
        while self.grid.count():
            self.grid.takeAt(0).widget().deleteLater()
        self.rows = detail_rows(lines)
        for number, (name, value) in enumerate(self.rows):
            key = Label(name)
            key.setProperty("muted", True)
            shown = Label(value)
            shown.setWordWrap(True)
            shown.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.grid.addWidget(key, number, 0, Qt.AlignmentFlag.AlignTop)
            self.grid.addWidget(shown, number, 1)

    def toPlainText(self) -> str:  # noqa: N802 - as a text view would answer
        return "\n".join(f"{name}: {value}" if name else value for name, value in self.rows)


NEXT_STEPS = (
    ("Choose a model", "The one that suits this computer best comes first, with how fast it answers here."),
    ("Download it", "Only if it is not on this computer yet. A download that stops goes on where it stopped."),
    ("Start chatting", "The model is checked and loaded; everything you type stays on this computer."),
)


class NextSteps(QFrame):
    """What the wizard does after this page, as numbered steps: a first-time user sees the way ahead."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("nextSteps")
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(SPACE.m)
        grid.setVerticalSpacing(SPACE.l)
        grid.setColumnStretch(1, 1)
        title = Label("What happens next")
        title.setObjectName("sectionTitle")
        grid.addWidget(title, 0, 0, 1, 2)
        for number, (name, words) in enumerate(NEXT_STEPS, start=1):
            badge = Label(str(number))
            badge.setObjectName("stepNumber")
            badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
            text = Label(f"<b>{name}</b><br>{words}", rich=True)
            text.setWordWrap(True)
            grid.addWidget(badge, number, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(text, number, 1)


class HardwarePage(PlainPage):
    gpu_check_progress = Signal(int, int, str)  # step, steps, what: emitted from the check's waiting thread

    def __init__(self, state: WizardState) -> None:
        super().__init__("Your computer", "A look at this computer first, to pick a model that runs well on it.")
        self.state = state
        layout = self.body
        self.summary = Label("Looking at this computer…")
        self.summary.setObjectName("hardwareSummary")
        self.summary.setWordWrap(True)
        font = self.summary.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        self.summary.setFont(font)
        self.recommended_name = label("", "cardTitle")
        self.advice = label("", "hardwareAdvice")
        self.fit_count = label("", muted=True)
        card = QFrame()  # the recommendation stands out as a card, as the next page's models do
        card.setObjectName("recommendCard")
        card_layout = QVBoxLayout(card)
        card_layout.setContentsMargins(SPACE.l, SPACE.l, SPACE.l, SPACE.l)
        card_layout.setSpacing(SPACE.s)
        card_layout.addWidget(badge("Recommended for this computer", "accent"), 0, Qt.AlignmentFlag.AlignLeft)
        for widget in (self.recommended_name, self.advice, self.fit_count):
            card_layout.addWidget(widget)
        self.gpu_check = Label(rich=True)
        self.gpu_check.setObjectName("gpuCheck")
        self.gpu_check.setWordWrap(True)
        self.gpu_check.setOpenExternalLinks(True)
        self.gpu_check.setVisible(False)
        self.gpu_check_progress.connect(
            lambda step, steps, what: self.gpu_check.setText(
                f"Checking the graphics card ({step} of {steps}: {escape(what)})…"
            )
        )
        self.details_button = button("Show details", LINK)
        self.details_button.setCheckable(True)
        self.details = DetailsGrid()
        self.details.setVisible(False)
        self.details_button.toggled.connect(self._toggle_details)
        layout.addWidget(self.summary)
        layout.addWidget(card)
        layout.addWidget(self.gpu_check)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.details)
        layout.addSpacing(SPACE.l)
        self.next_steps = NextSteps()
        layout.addWidget(self.next_steps)
        layout.addStretch(1)
        self._calls: list[BackgroundCall] = []
        self._measure: QProcess | None = None

    def initializePage(self) -> None:
        if self.state.recommendation is None:
            self._probe()

    def isComplete(self) -> bool:
        return self.state.recommendation is not None

    def _show_recommendation(self, prediction: Prediction) -> None:
        words = recommendation_words(prediction.recommendation)
        self.recommended_name.setText(words.name)
        self.advice.setText(words.advice)
        self.fit_count.setText(words.count)

    def _toggle_details(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.details_button.setText("Hide details" if shown else "Show details")

    def _probe(self) -> None:
        call = BackgroundCall(self.state.probe, self)
        call.done.connect(self._found)
        call.failed.connect(lambda message: self.summary.setText(f"Could not look at this computer: {message}"))
        self._calls.append(call.start())

    def _found(self, prediction: Prediction) -> None:
        from core.hardware.summary import describe_lines

        hw = self.state.apply(prediction)
        self.summary.setText(hardware_summary(hw))
        self._show_recommendation(prediction)
        self.details.set_lines(describe_lines(hw))
        self.completeChanged.emit()
        if hw.gpus and fixture_path() is None and not any(gpu.h2d_bytes_per_second for gpu in hw.gpus):
            self._start_measure()
        if hw.gpus and fixture_path() is None:
            self._gpu_check()

    def _gpu_check(self) -> None:
        """Once per machine: a stored report is shown as it is; otherwise the check runs now."""
        log_dir = AppPaths.from_env().log_dir
        report = read_report(log_dir)
        if report is not None:
            self._checked(report)
            return
        from core.doctor.process import run_doctor_in_subprocess

        self.gpu_check.setText("Checking the graphics card…")
        self.gpu_check.setVisible(True)
        call = BackgroundCall(lambda: run_doctor_in_subprocess(log_dir, self.gpu_check_progress.emit), self)
        call.done.connect(lambda report: self._check_finished(report, log_dir))
        call.failed.connect(lambda message: self._check_crashed(message, log_dir))
        self._calls.append(call.start())

    def _check_finished(self, report, log_dir) -> None:  # report: core.doctor.report.DoctorReport
        remember_verdict(log_dir, report)  # the engine keeps to it this run, whether its file was saved or not
        self._checked(report)

    def _check_crashed(self, message: str, log_dir) -> None:
        """A check that died took the GPU down with it: record that, so the app keeps to the processor."""
        from core.doctor.process import crash_report
        from core.doctor.report import save_report
        from core.errors import DiskWriteError

        hw = self.state.hardware
        report = crash_report(message, hw.gpus[0] if hw is not None and hw.gpus else None)
        try:
            save_report(report, log_dir)
        except DiskWriteError as error:  # the next start checks again
            log.warning("%s", error)
        self._check_finished(report, log_dir)

    def _checked(self, report) -> None:  # report: core.doctor.report.DoctorReport
        self.gpu_check.setText(linked(report.conclusion.summary))
        self.gpu_check.setVisible(True)
        hw = self.state.hardware
        if gpu_refused(report) and hw is not None and hw.gpus:  # choose models for the processor instead
            cpu_only = dataclasses.replace(hw, gpus=(), gpu_note=report.conclusion.summary)
            call = BackgroundCall(lambda: self.state.predict(cpu_only), self)
            call.done.connect(lambda prediction: self._fitted_without_gpu(prediction, hardware_summary(hw)))
            self._calls.append(call.start())

    def _fitted_without_gpu(self, prediction: Prediction, summary: str) -> None:
        """The fit for the processor; the computer is still described as it is (its card, not used)."""
        self._found_measured(prediction)
        self.summary.setText(summary)

    def _start_measure(self) -> None:
        """The copy rate needs torch with CUDA: ask a separate process; on any failure keep the estimate."""
        process = QProcess(self)
        # a method of the page, not a lambda: Qt drops the connection when the page goes, whereas a lambda ran
        # on the process its destructor had killed (closing the wizard mid-measurement raised in the log)
        process.finished.connect(self._measure_finished)
        process.start(*cli_command("hw", "--json", "--measure"))
        self._measure = process
        self.summary.setText(self.summary.text() + " (measuring the graphics card's link…)")

    def _measure_finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        self._measured(code, bytes(self._measure.readAllStandardOutput()))

    def _measured(self, code: int, output: bytes) -> None:
        hw = self.state.hardware
        if code == 0:
            try:
                hw = HardwareDescription.from_dict(json.loads(output))
            except Exception as error:  # noqa: BLE001 - a malformed answer keeps the estimate
                log.warning("hw --measure gave no usable answer: %s", error)
        call = BackgroundCall(lambda: self.state.predict(hw), self)
        call.done.connect(self._found_measured)
        self._calls.append(call.start())

    def _found_measured(self, prediction: Prediction) -> None:
        from core.hardware.summary import describe_lines

        hw = self.state.apply(prediction)
        self.summary.setText(hardware_summary(hw))
        self._show_recommendation(prediction)
        self.details.set_lines(describe_lines(hw))

    def cleanupPage(self) -> None:
        if self._measure is not None and self._measure.state() != QProcess.ProcessState.NotRunning:
            self._measure.kill()
