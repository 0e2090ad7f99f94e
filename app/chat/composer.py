"""The composer: the message box, a paperclip that adds documents (PDFs, Word, text files) to the message, and one
round button that sends, and stops the answer while it streams; under them, for a model that can answer with
or without thinking first (Qwen3), the chat's Think switch, as Jan and ChatGPT put it beside the message
box."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QStandardPaths, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QPushButton, QToolButton, QVBoxLayout, QWidget

from app.chat.input_box import InputBox
from app.theme.file_dialogs import open_files_dialog
from app.theme.icons import themed
from app.window.buttons import SECONDARY, button
from app.window.labels import ElidedLabel, Label

# what the paperclip's chooser offers first: documents people give a model (the other filter takes any file,
# which app.chat.attached_files reads if it is text, a PDF, an Office document or an OpenDocument one)
DOCUMENT_FILES = (
    "Documents (*.pdf *.docx *.docm *.dotx *.dotm *.xlsx *.xlsm *.xltx *.xltm *.xls *.pptx *.pptm *.ppsx *.ppsm "
    "*.potx *.potm *.odt *.ods *.ots *.odp *.otp *.txt *.md *.markdown *.rst *.csv *.tsv *.json *.jsonl *.yaml "
    "*.yml *.toml *.ini *.xml *.html *.htm *.log *.py *.js *.ts *.java *.c *.h *.cpp *.hpp *.cs *.go *.rs *.rb "
    "*.php *.sh *.ps1 *.sql *.tex)"
)

SEND, STOP = "send", "stop"


class Composer(QFrame):
    send_requested = Signal(str)
    stop_requested = Signal()
    think_changed = Signal(bool)  # the reader flipped the Think switch (never emitted by set_think_switch)
    make_room_requested = Signal()  # the note's Make room and send: the message is too long for the context

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 8, 8, 6)
        outer.setSpacing(2)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.input = InputBox()
        self.input.setObjectName("composerInput")
        self.button = QPushButton()
        self.button.setObjectName("sendButton")
        self.button.setFixedSize(38, 38)
        self._icon = themed(self.button, "arrow-up", "on_accent", size=20)
        self.button.clicked.connect(self._clicked)
        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        themed(self.attach_button, "paperclip", "muted_text", size=18)
        self.attach_button.setAccessibleName("Add a document")
        self.attach_button.setToolTip(
            "Add a document's text to the message: a PDF, a Word document or a text file (or drop it on the chat)"
        )
        self.attach_button.clicked.connect(self.choose_files)
        self.files_dialog: QFileDialog | None = None
        self._files_folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
        row.addWidget(self.input, 1)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.button)
        outer.addLayout(row)
        notes = QHBoxLayout()
        notes.setSpacing(8)
        self.note = Label()  # a message too long for the model, said before it is sent (set_note)
        self.note.setObjectName("composerNote")
        self.note.setWordWrap(True)
        self.note.hide()
        self.room_button = button("Make room and send", SECONDARY)
        self.room_button.setAccessibleName("Make room for the message and send it")
        self.room_button.clicked.connect(self.make_room_requested)
        self.room_button.hide()
        notes.addWidget(self.note, 1)
        notes.addWidget(self.room_button, 0, Qt.AlignmentFlag.AlignVCenter)
        outer.addLayout(notes)
        under = QHBoxLayout()
        under.setSpacing(10)
        self.think_button = QToolButton()
        self.think_button.setObjectName("thinkSwitch")
        self.think_button.setText("Think")
        self.think_button.setCheckable(True)
        self.think_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.think_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.think_button.setAccessibleName("Think before answering")
        self._think_icon = themed(self.think_button, "lightbulb", "muted_text", size=14)
        self.think_button.clicked.connect(self._think_clicked)
        self.think_button.hide()
        self.hint = ElidedLabel()  # never wider than the composer is given
        self.hint.set_full_text("Enter to send · Shift+Enter for a new line · Esc stops the answer")
        self.hint.setObjectName("composerHint")
        under.addWidget(self.think_button)
        under.addWidget(self.hint, 1)
        outer.addLayout(under)
        self.input.submitted.connect(self.send_requested)
        self.mode = SEND
        self.set_mode(SEND)

    def choose_files(self) -> None:
        """The chooser of documents to add (window-modal, so the window keeps running behind it); the files
        picked go into the message box at its cursor."""
        self.files_dialog = open_files_dialog(self, "Add documents to the message", self._files_folder, DOCUMENT_FILES)
        self.files_dialog.setNameFilters([DOCUMENT_FILES, "All files (*)"])
        self.files_dialog.filesSelected.connect(self._files_chosen)
        self.files_dialog.open()

    def _files_chosen(self, names: list[str]) -> None:
        if names:
            self._files_folder = str(Path(names[0]).parent)  # the next time, the chooser opens there
            self.input.add_files([Path(name) for name in names])

    def set_mode(self, mode: str) -> None:
        """SEND: the button sends what is typed; STOP: an answer streams and the button stops it."""
        self.mode = mode
        sending = mode == SEND
        if sending:
            self._icon.set("arrow-up", "on_accent", filled=False)
        else:  # the stop button is drawn in the text colour: its square in the view's
            self._icon.set("square", "view", filled=True)
        self.button.setProperty("stop", not sending)
        self.button.setAccessibleName("Send message" if sending else "Stop the answer")
        self.button.setToolTip("Send (Enter)" if sending else "Stop the answer; what was written so far is kept (Esc)")
        self.button.style().unpolish(self.button)
        self.button.style().polish(self.button)

    def set_note(self, text: str, room: str = "") -> None:
        """Say `text` under the message box, in the caution colour (a message longer than the model keeps in
        mind), with the Make room and send button beside it where `room` says what it does; "" takes both
        away."""
        self.note.setText(text)
        self.note.setAccessibleDescription(text)
        self.note.setVisible(bool(text))
        self.room_button.setToolTip(room)
        self.room_button.setVisible(bool(text and room))

    def set_think_switch(self, shown: bool, on: bool) -> None:
        """Show the Think switch (only for a model that can turn its thinking off) in the chat's position."""
        self.think_button.setVisible(shown)
        self.think_button.setChecked(on)
        self._show_think(on)

    def _think_clicked(self, on: bool) -> None:
        self._show_think(on)
        self.think_changed.emit(on)

    def _show_think(self, on: bool) -> None:
        self._think_icon.set("lightbulb", "link" if on else "muted_text")
        self.think_button.setToolTip(
            "On: the model thinks before it answers (slower, often better on hard questions); its thinking shows "
            "above the answer. Click to have it answer at once."
            if on
            else "Off: the model answers at once, without thinking first. Click to let it think."
        )
        self.think_button.setAccessibleDescription("On" if on else "Off")

    def _clicked(self) -> None:
        if self.mode == STOP:
            self.stop_requested.emit()
        else:
            self.send_requested.emit(self.input.toPlainText())
