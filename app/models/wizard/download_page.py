"""Wizard page 3, "Download": progress over all files with size, speed and time left; pause, resume, delete.

The download runs in its own process (app.models.download_worker). A gated model asks for the Hugging Face token,
with a link to the licence page, and stores it with core.models.token_store; a failed check (a damaged
file) is shown and fetched again. An error is said once, in plain words with the one thing to do (Retry);
the downloader's own words (a resolver error, a status code) are in the details, one click away.

One way out: the wizard's Cancel closes it and keeps the partial files (the next start resumes). While
paused or stopped, "Delete partial download" frees the disk instead; then only "Download again" is offered.
"""

from __future__ import annotations

from html import escape
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QWidget,
)

from app.models.download_worker import DownloadProcess
from app.models.wizard.plain_page import PlainPage
from app.models.wizard.state import WizardState
from app.models.wizard.words import eta_words, size_words
from app.window.buttons import DESTRUCTIVE, LINK, PRIMARY, SECONDARY, button
from app.window.labels import Label

# What went wrong, for people, and the one thing to do; by the downloader's error kind.
FAILURE_WORDS = {
    "network": ("Could not reach the download server.", "Check that this computer is online, then press Retry."),
    "disk": (
        "There is not enough free disk space.",
        "Free some space, then press Retry; or go Back and keep models on another drive.",
    ),
    "verify": ("A file arrived damaged twice in a row.", "Press Retry to fetch it again."),
    "not_found": ("This model is not on the download server.", "Go back and choose another model."),
    "unsafe": (
        "The download server sent a file list that is not safe to write.",
        "Nothing was written; go back and choose another model.",
    ),
    "io": ("The models folder cannot be written.", "Check that the folder exists and is yours, then press Retry."),
    "busy": (
        "This model is already downloading in another window or a terminal.",
        "Wait for it to finish, or close the other one, then press Retry.",
    ),
}
OTHER_FAILURE = ("The download stopped.", "Press Retry to go on where it stopped.")


class DownloadPage(PlainPage):
    def __init__(self, state: WizardState) -> None:
        super().__init__(
            "Download", "You can close the app at any time: the download continues where it stopped next time."
        )
        self.state = state
        self.done = False
        self.worker = DownloadProcess(state.models_dir, self)
        layout = self.body
        self.headline = Label(rich=True)
        self.headline.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setObjectName("downloadBar")
        self.bar.setTextVisible(False)
        self.bar.setRange(0, 1000)
        self.bar.setAccessibleName("Download progress")
        self.detail = Label(" ")
        self.file_label = Label(" ")
        self.file_label.setObjectName("downloadFile")
        self.file_label.setProperty("muted", True)
        buttons = QHBoxLayout()
        self.pause_button = button("Pause", SECONDARY)
        self.resume_button = button("Resume", PRIMARY)
        self.retry_button = button("Retry", PRIMARY)
        self.cancel_button = button("Delete partial download", DESTRUCTIVE)
        self.cancel_button.setToolTip("Stop and delete the files downloaded so far (Cancel keeps them to resume)")
        for action in (self.pause_button, self.resume_button, self.retry_button):
            buttons.addWidget(action)
        buttons.addStretch()
        buttons.addWidget(self.cancel_button)
        self.cancelled = False
        self.message = Label(rich=True)
        self.message.setObjectName("downloadMessage")
        self.message.setWordWrap(True)
        self.message.setOpenExternalLinks(True)
        self.token_box = QWidget()
        token_row = QHBoxLayout(self.token_box)
        token_row.setContentsMargins(0, 0, 0, 0)
        self.token_edit = QLineEdit()
        self.token_edit.setPlaceholderText("hf_… (your Hugging Face access token)")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_button = button("Save token and continue", PRIMARY)
        token_row.addWidget(self.token_edit, 1)
        token_row.addWidget(self.token_button)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(200)
        self.log.setPlaceholderText("What the download did shows here.")
        self.log.setVisible(False)
        self.log_button = button("Show details", LINK)
        self.log_button.setCheckable(True)
        self.log_button.toggled.connect(
            lambda shown: (
                self.log.setVisible(shown),
                self.log_button.setText("Hide details" if shown else "Show details"),
            )
        )
        for widget in (self.headline, self.bar, self.detail, self.file_label):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.addWidget(self.message)
        layout.addWidget(self.token_box)
        layout.addWidget(self.log_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.log, 1)
        layout.addStretch(0)
        self.pause_button.clicked.connect(self.pause)
        self.resume_button.clicked.connect(self.start)
        self.retry_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.token_button.clicked.connect(self.save_token)
        self.worker.planned.connect(self._planned)
        self.worker.progress.connect(self._progress)
        self.worker.verified.connect(self._verified)
        self.worker.checked.connect(self._checked)
        self.worker.attached.connect(self._attached)
        self.worker.retrying.connect(
            lambda e: self._note(
                f"Connection trouble on {e.get('file')}: {e.get('reason')}; trying again (attempt {e.get('attempt')})"
            )
        )
        self.worker.failed.connect(self._failed)
        self.worker.finished.connect(self._finished)
        self.worker.stopped.connect(self._stopped)
        self._buttons(running=False)
        self.token_box.setVisible(False)

    def initializePage(self) -> None:
        fit = self.state.chosen
        assert fit is not None, "the download page needs a chosen pair"
        self.headline.setText(
            f"Downloading <b>{escape(fit.pair.name)}</b>: about {size_words(fit.pair.download_bytes)}."
        )
        self.done = False
        self.start()

    def isComplete(self) -> bool:
        return self.done

    def start(self) -> None:
        fit = self.state.chosen
        if fit is None:
            return
        self.message.clear()
        self.cancelled = False
        self.token_box.setVisible(False)
        self.detail.setText("Connecting…")
        self._buttons(running=True)
        self.worker.models_dir = self.state.models_dir  # the choose page may have moved it to another drive
        self.worker.start(fit.pair.id)

    def pause(self) -> None:
        self.worker.pause()

    def cancel(self) -> None:
        """Stop and delete the partial files: afterwards there is nothing to resume, only to start again."""
        self.worker.cancel()
        self.cancelled = True
        self.bar.setValue(0)
        self.message.clear()
        self.file_label.setText(" ")
        self.detail.setText("Download deleted; its partial files were removed.")
        self._note("Deleted the partial download")
        self._buttons(running=False)

    def save_token(self) -> None:
        from core.models.token_store import save_token

        try:
            where = save_token(self.token_edit.text())
        except ValueError as error:
            self.message.setText(str(error))
            return
        self.token_edit.clear()
        self._note(f"Token saved in {where}")
        self.start()

    def cleanupPage(self) -> None:
        """Back to the list: stop (partial files kept) so another choice starts its own download."""
        self.worker.pause()

    def stop_for_close(self) -> None:
        """The app is closing: stop, keeping partial files, so the next start can resume."""
        self.worker.pause()

    # -- events --------------------------------------------------------------------------------------------

    def _buttons(self, running: bool, failed: bool = False) -> None:
        """Only the buttons that do something now: Pause while running; Resume (or Retry after an error,
        "Download again" after a delete) and Delete while stopped; none once done."""
        stopped = not running and not self.done
        self.pause_button.setVisible(running)
        self.resume_button.setVisible(stopped and not failed and not self.cancelled)
        self.retry_button.setVisible(stopped and (failed or self.cancelled))
        self.retry_button.setText("Download again" if self.cancelled else "Retry")
        self.cancel_button.setVisible(stopped and not self.cancelled)

    def _planned(self, plan: dict) -> None:
        total, already = plan.get("total_bytes", 0), plan.get("already_bytes", 0)
        files = plan.get("files", [])
        resumed = f" ({size_words(already)} already here from before)" if already else ""
        self.headline.setText(
            f"Downloading <b>{escape(self.state.chosen.pair.name)}</b>: {size_words(total)} in {len(files)} files."
        )
        self._note(f"{len(files)} files, {size_words(total)} in all{resumed}")
        self._show_bytes(already, total)

    def _progress(self, event: dict) -> None:
        done, total = event.get("done_bytes", 0), event.get("total_bytes", 0)
        self._show_bytes(done, total)
        speed = event.get("bytes_per_second") or 0
        rate = f"{size_words(speed)}/s" if speed else "measuring speed"
        self.detail.setText(
            f"{size_words(done)} of {size_words(total)} · {rate} · {eta_words(event.get('eta_seconds'))}"
        )
        self.file_label.setText(f"Now: {event.get('file', '')}")

    def _show_bytes(self, done: int, total: int) -> None:
        self.bar.setValue(int(1000 * done / total) if total else 0)

    def _verified(self, file: str, ok: bool) -> None:
        if not ok:
            self._note(f"{file} was damaged on the way (its checksum did not match): fetching it again")
            self.message.setText(f"A file did not pass its check and is being fetched again: {escape(file)}")

    def _checked(self, file: str, ok: bool) -> None:
        self._note(
            f"{file} was already here and matches the hub's copy: kept"
            if ok
            else f"{file} was already here but differs from the hub's copy: replacing it"
        )

    def _attached(self, _event: dict) -> None:
        self._note("This model is already downloading in another window or a terminal: showing its progress here")

    def _failed(self, error: dict) -> None:
        kind, text = error.get("kind", ""), error.get("message", "")
        self._note(f"Stopped: {text}")  # the downloader's own words: in the details only
        self._buttons(running=False, failed=kind != "gated")
        self.detail.setText("Stopped")
        self.file_label.setText(" ")
        if kind == "gated":
            self.detail.setText("Waiting for your Hugging Face token")
            self.resume_button.setVisible(False)
            url = error.get("licence_url") or self.state.chosen.pair.licence_url
            self.message.setText(
                f"<b>This model needs your permission first.</b> Open <a href='{escape(url)}'>its licence page</a>, "
                "accept the licence with your Hugging Face account, create a read token at "
                "<a href='https://huggingface.co/settings/tokens'>huggingface.co/settings/tokens</a> and paste it here:"
            )
            self.token_box.setVisible(True)
        else:
            what, action = FAILURE_WORDS.get(kind, OTHER_FAILURE)
            self.message.setText(f"<b>{what}</b> {action}")
            if kind == "disk":  # Back then shows the drive as it is now, and offers another one
                self.state.measure_disk_again()
            self.retry_button.setVisible(kind not in ("not_found", "unsafe"))

    def _stopped(self) -> None:
        self._buttons(running=False)
        if not self.cancelled:
            self.detail.setText(self.detail.text().split(" · ")[0] + " · paused")

    def _finished(self, folders: dict) -> None:
        self.done = True
        self.bar.setValue(1000)
        self.detail.setText("Downloaded and checked. Press Next to start it.")
        self.file_label.setText(" ")
        self._note("All files downloaded and checked")
        self._buttons(running=False)
        self.completeChanged.emit()

    def _note(self, text: str) -> None:
        self.log.appendPlainText(text)
