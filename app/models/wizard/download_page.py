"""Wizard page 3, "Download": progress over all files with size, speed and time left; pause, resume, cancel.

The download runs in its own process (app.models.download_worker). A gated model asks for the Hugging Face token,
with a link to the licence page, and stores it with core.models.token_store; a failed check (a damaged
file) is shown and fetched again, and an error offers Retry.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QProgressBar, QPushButton, QVBoxLayout, QWidget, QWizardPage,
)

from app.models.download_worker import DownloadProcess
from app.models.wizard.state import WizardState
from app.models.wizard.words import eta_words, size_words


class DownloadPage(QWizardPage):
    def __init__(self, state: WizardState) -> None:
        super().__init__()
        self.state = state
        self.done = False
        self.setTitle("Download")
        self.setSubTitle("You can close the app at any time: the download continues where it stopped next time.")
        self.worker = DownloadProcess(state.models_dir, self)
        layout = QVBoxLayout(self)
        self.headline = QLabel()
        self.headline.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setAccessibleName("Download progress")
        self.detail = QLabel(" ")
        self.file_label = QLabel(" ")
        self.file_label.setObjectName("downloadFile")
        buttons = QHBoxLayout()
        self.pause_button = QPushButton("Pause")
        self.resume_button = QPushButton("Resume")
        self.cancel_button = QPushButton("Cancel download")
        self.retry_button = QPushButton("Retry")
        for button in (self.pause_button, self.resume_button, self.retry_button, self.cancel_button):
            buttons.addWidget(button)
        buttons.addStretch()
        self.message = QLabel()
        self.message.setObjectName("downloadMessage")
        self.message.setWordWrap(True)
        self.message.setOpenExternalLinks(True)
        self.token_box = QWidget()
        token_row = QHBoxLayout(self.token_box)
        token_row.setContentsMargins(0, 0, 0, 0)
        self.token_edit = QLineEdit()
        self.token_edit.setPlaceholderText("hf_… (your Hugging Face access token)")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_button = QPushButton("Save token and continue")
        token_row.addWidget(self.token_edit, 1)
        token_row.addWidget(self.token_button)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(200)
        self.log.setPlaceholderText("What the download did shows here.")
        for widget in (self.headline, self.bar, self.detail, self.file_label):
            layout.addWidget(widget)
        layout.addLayout(buttons)
        layout.addWidget(self.message)
        layout.addWidget(self.token_box)
        layout.addWidget(self.log, 1)
        self.pause_button.clicked.connect(self.pause)
        self.resume_button.clicked.connect(self.start)
        self.retry_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.token_button.clicked.connect(self.save_token)
        self.worker.planned.connect(self._planned)
        self.worker.progress.connect(self._progress)
        self.worker.verified.connect(self._verified)
        self.worker.retrying.connect(lambda e: self._note(f"Connection trouble on {e.get('file')}: {e.get('reason')}; "
                                                          f"trying again (attempt {e.get('attempt')})"))
        self.worker.failed.connect(self._failed)
        self.worker.finished.connect(self._finished)
        self.worker.stopped.connect(self._stopped)
        self._buttons(running=False)
        self.token_box.setVisible(False)

    def initializePage(self) -> None:
        fit = self.state.chosen
        assert fit is not None, "the download page needs a chosen pair"
        self.headline.setText(f"Downloading <b>{fit.pair.name}</b>: about {size_words(fit.pair.download_bytes)}.")
        self.done = False
        self.start()

    def isComplete(self) -> bool:
        return self.done

    def start(self) -> None:
        fit = self.state.chosen
        if fit is None:
            return
        self.message.clear()
        self.token_box.setVisible(False)
        self.detail.setText("Connecting…")
        self._buttons(running=True)
        self.worker.start(fit.pair.id)

    def pause(self) -> None:
        self.worker.pause()

    def cancel(self) -> None:
        self.worker.cancel()
        self.bar.setValue(0)
        self.detail.setText("Download cancelled; its partial files were deleted.")
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

    def _buttons(self, running: bool) -> None:
        self.pause_button.setVisible(running)
        self.cancel_button.setVisible(running or not self.done)
        self.resume_button.setVisible(not running and not self.done)
        self.retry_button.setVisible(False)

    def _planned(self, plan: dict) -> None:
        total, already = plan.get("total_bytes", 0), plan.get("already_bytes", 0)
        files = plan.get("files", [])
        resumed = f" ({size_words(already)} already here from before)" if already else ""
        self.headline.setText(f"Downloading <b>{self.state.chosen.pair.name}</b>: {size_words(total)} in "
                              f"{len(files)} files.")
        self._note(f"{len(files)} files, {size_words(total)} in all{resumed}")
        self._show_bytes(already, total)

    def _progress(self, event: dict) -> None:
        done, total = event.get("done_bytes", 0), event.get("total_bytes", 0)
        self._show_bytes(done, total)
        speed = event.get("bytes_per_second") or 0
        rate = f"{size_words(speed)}/s" if speed else "measuring speed"
        self.detail.setText(f"{size_words(done)} of {size_words(total)} · {rate} · {eta_words(event.get('eta_seconds'))}")
        self.file_label.setText(f"<span style='color:#6b7280'>Now: {event.get('file', '')}</span>")

    def _show_bytes(self, done: int, total: int) -> None:
        self.bar.setValue(int(1000 * done / total) if total else 0)

    def _verified(self, file: str, ok: bool) -> None:
        if not ok:
            self._note(f"{file} was damaged on the way (its checksum did not match): fetching it again")
            self.message.setText(f"A file did not pass its check and is being fetched again: {file}")

    def _failed(self, error: dict) -> None:
        self._buttons(running=False)
        kind, text = error.get("kind", ""), error.get("message", "")
        self._note(f"Stopped: {text}")
        self.detail.setText("Stopped")
        if kind == "gated":
            self.detail.setText("Waiting for your Hugging Face token")
            self.resume_button.setVisible(False)
            url = error.get("licence_url") or self.state.chosen.pair.licence_url
            self.message.setText(
                f"<b>This model needs your permission first.</b> Open <a href='{url}'>its licence page</a>, "
                "accept the licence with your Hugging Face account, create a read token at "
                "<a href='https://huggingface.co/settings/tokens'>huggingface.co/settings/tokens</a> and paste it here:")
            self.token_box.setVisible(True)
        else:
            words = {"disk": "There is not enough free disk space", "network": "The connection failed",
                     "verify": "A file was damaged twice in a row", "not_found": "The model is not on the hub"}
            self.message.setText(f"<b>{words.get(kind, 'The download stopped')}.</b> {text}")
            self.retry_button.setVisible(True)
            self.resume_button.setVisible(False)

    def _stopped(self) -> None:
        self._buttons(running=False)
        self.detail.setText(self.detail.text().split(" · ")[0] + " · paused")

    def _finished(self, folders: dict) -> None:
        self.done = True
        self.bar.setValue(1000)
        self.detail.setText("Downloaded and checked. Press Next to start it.")
        self.file_label.setText(" ")
        self._note("All files downloaded and checked")
        self._buttons(running=False)
        self.cancel_button.setVisible(False)
        self.completeChanged.emit()

    def _note(self, text: str) -> None:
        self.log.appendPlainText(text)
