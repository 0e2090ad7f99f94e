"""A PDF, an Office document (Word, Excel, PowerPoint) or an OpenDocument text given to a message, read in a
child process (`specexec text FILE --json`, core.text.document_text) that the window never waits for: a
damaged or hostile file can keep a parser busy, and a process can be stopped where a thread cannot. The
window goes on while it reads, and a reading that takes longer than READ_TIMEOUT_MS is stopped and said."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QTimer, Signal

from core.errors import DocumentError
from core.system.cli_process import cli_command
from core.text.document_text import READ_TIMEOUT_S, reader_reply

log = logging.getLogger(__name__)

READ_TIMEOUT_MS = int(READ_TIMEOUT_S * 1000)


class DocumentReading(QObject):
    """One document being read: `read(name, text)` when its text came, or `failed(words)` (why, in words); then
    `done`, once, either way."""

    read = Signal(str, str)
    failed = Signal(str)
    done = Signal()

    def __init__(self, path: Path, parent: QObject | None = None, timeout_ms: int = READ_TIMEOUT_MS) -> None:
        super().__init__(parent)
        self.path = path
        self.timeout_ms = timeout_ms
        self._ended = False
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        self.process.finished.connect(self._finished)
        self.process.errorOccurred.connect(self._error)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self._too_long)
        self.timer.start(timeout_ms)
        self.process.start(*cli_command("text", str(path), "--json"))

    def stop(self) -> None:
        """End the reading without a word (the window is closing)."""
        self._ended = True
        self.timer.stop()
        if self.process.state() != QProcess.ProcessState.NotRunning:
            self.process.kill()
            self.process.waitForFinished(2000)

    def _finished(self, code: int, _status: QProcess.ExitStatus) -> None:
        if self._ended:
            return
        out = bytes(self.process.readAllStandardOutput())
        errors = bytes(self.process.readAllStandardError()).decode("utf-8", "replace")
        try:
            name, text = reader_reply(code, out, errors, self.path.name)
        except DocumentError as error:
            self._fail(f"{error}.")
            return
        self._end()
        self.read.emit(name, text)
        self.done.emit()

    def _error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and not self._ended:
            log.warning("reading %s: the reader did not start (%s)", self.path, self.process.errorString())
            self._fail(f"{self.path.name} could not be read: the reader did not start.")

    def _too_long(self) -> None:
        if self._ended:
            return
        self.process.kill()
        self._fail(
            f"Reading {self.path.name} took longer than {self.timeout_ms / 1000:.0f} s and was stopped: the file may "
            "be damaged. Save or print it again as a PDF, or copy its text."
        )

    def _fail(self, words: str) -> None:
        self._end()
        self.failed.emit(words)
        self.done.emit()

    def _end(self) -> None:
        self._ended = True
        self.timer.stop()
