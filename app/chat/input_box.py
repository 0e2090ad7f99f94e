"""The message box: Enter sends, Shift+Enter starts a new line; grows with its text, wrapped lines too, up to a
few lines. Text files, PDFs and Word documents dropped on it, or pasted after a Copy in the file manager, add
their text (app.chat.attached_files; a PDF's or a Word document's once app.chat.document_reading has read it)
where a plain text box would add their addresses ("file:///home/...")."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import QDropEvent, QKeyEvent, QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget

from app.chat.attached_files import attach_files
from app.chat.document_reading import DocumentReading
from core.text.document_text import fenced

MIN_LINES, MAX_LINES = 2, 8


class InputBox(QPlainTextEdit):
    """Enter submits, Shift+Enter adds a line; with `cancellable`, Esc emits `cancelled` (a message edited in
    place: the window's Esc shortcut, Stop, is off then, as nothing streams while a message is edited); Up in
    the empty message box asks to edit your last message."""

    submitted = Signal(str)
    cancelled = Signal()
    edit_last_requested = Signal()  # Up in the empty message box: edit your last message, as chat apps do
    files_refused = Signal(str)  # why files given to the box were not added, in words
    files_reading = Signal(str)  # the documents being read, in words ("Reading report.pdf…")

    def __init__(self, parent: QWidget | None = None, cancellable: bool = False, max_lines: int = MAX_LINES) -> None:
        super().__init__(parent)
        self.cancellable = cancellable
        self.max_lines = max_lines  # it grows to this many lines, then scrolls
        self.reading: DocumentReading | None = None  # the document being read, its text still to come
        self.waiting_documents: list[Path] = []  # the next ones: one reader at a time, however many were dropped
        self.setPlaceholderText("Message")  # the keys are in the hint under the box
        self.setAccessibleName("Message input")
        self.setAccessibleDescription("Type a message. Enter sends it, Shift+Enter starts a new line.")
        self.setTabChangesFocus(True)  # Tab moves on to the buttons beside it (keyboard navigation)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if self.cancellable and event.key() == Qt.Key.Key_Escape:
            self.cancelled.emit()
            event.accept()
            return
        up = event.key() == Qt.Key.Key_Up and event.modifiers() == Qt.KeyboardModifier.NoModifier
        if up and not self.cancellable and not self.toPlainText():
            self.edit_last_requested.emit()
            event.accept()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submit()
            event.accept()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(local_files(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        """Files (a drop, or a paste of files copied in the file manager): their text at the cursor, which a
        drop has put where the files were let go. Anything else as a plain text box takes it."""
        files = local_files(source)
        if files:
            self.add_files(files)
        else:
            super().insertFromMimeData(source)

    def add_files(self, files: list[Path]) -> None:
        """The text of `files` at the cursor, on lines of its own (a PDF's or a Word document's when it has been
        read, at the cursor then); what could not be read is said."""
        attachment = attach_files(files)
        self._insert_block(attachment.text)
        if attachment.problems:
            self.files_refused.emit(" ".join(attachment.problems))
        if attachment.to_read:
            self.waiting_documents += attachment.to_read
            self.files_reading.emit(f"Reading {', '.join(path.name for path in attachment.to_read)}…")
            self._read_next()

    def stop_reading(self) -> None:
        """Stop the document being read and forget those waiting (the window, or the edit, is closing)."""
        self.waiting_documents.clear()
        if self.reading is not None:
            self.reading.stop()
            self.reading = None

    def _insert_block(self, text: str) -> None:
        if not text:
            return
        cursor = self.textCursor()
        before = "\n" if cursor.positionInBlock() > 0 else ""
        cursor.insertText(before + text)
        self.setTextCursor(cursor)
        self.setFocus()

    def _read_next(self) -> None:
        if self.reading is not None or not self.waiting_documents:
            return
        self.reading = reading = DocumentReading(self.waiting_documents.pop(0), self)
        reading.read.connect(lambda name, text: self._insert_block(fenced(name, text)))
        reading.failed.connect(self.files_refused)
        reading.done.connect(lambda: self._reading_done(reading))

    def _reading_done(self, reading: DocumentReading) -> None:
        if self.reading is reading:
            self.reading = None
        reading.deleteLater()
        self._read_next()

    def submit(self) -> None:
        text = self.toPlainText()
        if text.strip():
            self.submitted.emit(text)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt signature
        """A new font (the text size, a theme): the same lines take another height."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit()

    def _fit(self) -> None:
        """As tall as its lines as shown, a long paragraph's wrapped ones included (the document's layout
        counts them, and counts again when the width changes), between MIN_LINES and `max_lines`."""
        shown = int(self.document().documentLayout().documentSize().height()) or self.document().blockCount()
        lines = max(MIN_LINES, min(self.max_lines, shown))
        margins = self.contentsMargins()
        height = lines * self.fontMetrics().lineSpacing() + int(2 * self.document().documentMargin())
        self.setFixedHeight(height + margins.top() + margins.bottom() + 4)


def local_files(source: QMimeData) -> list[Path]:
    """The files `source` carries when it carries only files on this computer (a drag from a web page carries
    web addresses, and keeps its text)."""
    urls = source.urls() if source.hasUrls() else []
    if not urls or not all(url.isLocalFile() for url in urls):
        return []
    return [Path(url.toLocalFile()) for url in urls]


class FilesDroppedNear(QObject):
    """Lets files be dropped on a widget beside the message box (the chat above it: the target people aim
    at in LM Studio and Jan) and adds them to the end of the box's text, as a drop on the box itself would."""

    def __init__(self, area: QWidget, box: InputBox) -> None:
        super().__init__(area)
        self.box = box
        area.setAcceptDrops(True)
        area.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, QDropEvent):  # a drag entering or moving over the area, or let go there
            files = local_files(event.mimeData())
            if not files or self.box.isReadOnly():
                return False
            event.acceptProposedAction()
            if event.type() == QEvent.Type.Drop:
                self.box.moveCursor(QTextCursor.MoveOperation.End)
                self.box.add_files(files)
            return True
        return False
