"""A model download in its own process: `specexec models download PAIR --json`, run with QProcess.

The downloader (core.models.download) runs outside the GUI thread and outside the engine process, so a
stuck network or an engine crash never freezes the window. Its JSON-lines events (a stable contract, see
the README) become Qt signals. Pause and closing the app send SIGTERM: the CLI keeps the partial files
and exits 130, and starting the same pair again fetches only the missing bytes, even after a reboot.
It runs with --attach: when another window or a terminal is already downloading the same model, this one
shows that download's progress (and carries on by itself if that one stops) instead of competing with it.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, Signal

from core.system.cli_process import cli_command

log = logging.getLogger(__name__)

EXIT_CANCELLED = 130


class DownloadProcess(QObject):
    """One pair's download. Signals carry the CLI's event objects (dicts) as they arrive."""

    planned = Signal(dict)  # plan: folders, files, total_bytes, already_bytes
    progress = Signal(dict)  # file, done_bytes, total_bytes, bytes_per_second, eta_seconds
    verified = Signal(str, bool)  # file, ok (a False is fetched again by the downloader)
    checked = Signal(str, bool)  # file already in the folder, ok (a False is replaced by the downloader)
    attached = Signal(dict)  # folder, pid: another process is downloading it; its progress follows
    retrying = Signal(dict)  # file, attempt, reason
    failed = Signal(dict)  # kind, message, licence_url (gated)
    finished = Signal(dict)  # folders by role
    stopped = Signal()  # paused or cancelled: partial files kept (pause) or deleted (cancel)

    def __init__(self, models_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.models_dir = models_dir
        self.pair_id = ""
        self.folders: dict[str, str] = {}
        self._buffer = b""
        self._cancelled = False
        self._reported = False
        self._process: QProcess | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.state() != QProcess.ProcessState.NotRunning

    def start(self, pair_id: str) -> None:
        if self.running:
            if not self._reported:
                return  # already downloading
            self._process.waitForFinished(5000)  # it reported its error and is exiting: a retry waits for that
        self.pair_id, self._buffer, self._cancelled, self._reported = pair_id, b"", False, False
        process = QProcess(self)
        process.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        process.readyReadStandardOutput.connect(self._read)
        process.finished.connect(self._ended)
        process.errorOccurred.connect(self._process_error)
        self._process = process
        program, arguments = cli_command(
            "models", "download", pair_id, "--json", "--attach", "--dir", str(self.models_dir)
        )
        log.info("download: %s %s", program, " ".join(arguments))
        process.start(program, arguments)

    def pause(self, wait_ms: int = 10000) -> None:
        """Stop, keeping the partial files (SIGTERM: the CLI exits 130 after closing its files)."""
        if self.running:
            self._process.terminate()
            if not self._process.waitForFinished(wait_ms):
                self._process.kill()
                self._process.waitForFinished(2000)

    def cancel(self) -> None:
        """Stop and delete what this download left unfinished (finished models of the pair stay, and so does a
        folder another process is still downloading into)."""
        self._cancelled = True
        self.pause()
        from core.models.folder_lock import is_downloading
        from core.models.installed import scan_models

        planned = {Path(folder).name for folder in self.folders.values()}
        for model in scan_models(self.models_dir):
            if model.name in planned and not model.complete and not is_downloading(model.path):
                shutil.rmtree(model.path, ignore_errors=True)

    # -- process output ------------------------------------------------------------------------------------

    def _read(self) -> None:
        self._buffer += bytes(self._process.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if line.strip():
                self._event(line)

    def _event(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            log.warning("download: not an event: %r", line[:200])
            return
        kind = event.pop("event", "")
        if kind == "plan":
            self.folders = event.get("folders") or {"model": event.get("folder", "")}
            self.planned.emit(event)
        elif kind == "progress":
            self.progress.emit(event)
        elif kind == "verify":
            self.verified.emit(str(event.get("file", "")), bool(event.get("ok")))
        elif kind == "check":
            self.checked.emit(str(event.get("file", "")), bool(event.get("ok")))
        elif kind == "attach":
            self.folders = self.folders or {"model": event.get("folder", "")}
            self.attached.emit(event)
        elif kind == "retry":
            self.retrying.emit(event)
        elif kind == "error" and event.get("kind") != "cancelled":
            self._reported = True
            self.failed.emit(event)
        elif kind == "done":
            self._reported = True
            self.finished.emit(event.get("folders") or {"model": event.get("folder", "")})

    def _ended(self, code: int, _status: QProcess.ExitStatus) -> None:
        if self._process is not None:
            self._read()
            errors = bytes(self._process.readAllStandardError()).decode("utf-8", "replace").strip()
            if errors:
                log.info("download stderr: %s", errors[-2000:])
        if code == EXIT_CANCELLED or self._cancelled or (not self._reported and code != 0 and self._terminated_by_us()):
            self.stopped.emit()
        elif not self._reported:
            self.failed.emit({"kind": "crash", "message": f"the download stopped unexpectedly (exit status {code})"})

    def _terminated_by_us(self) -> bool:
        return self._process is not None and self._process.exitStatus() == QProcess.ExitStatus.CrashExit

    def _process_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart:
            self._reported = True
            self.failed.emit(
                {"kind": "crash", "message": f"the download could not start ({self._process.errorString()})"}
            )
