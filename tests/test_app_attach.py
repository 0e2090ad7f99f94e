"""Text files given to a message: dropped on the message box, pasted after a Copy in the file manager, or
picked with the paperclip. Real files on disk (a pipe, a sparse file past the limit, a PDF's first bytes), a
real drop event on the box and a real file chooser, offscreen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.chat.attached_files import attach_files  # noqa: E402
from core.text.document_text import MAX_TEXT_BYTES, fenced  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, quiet_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


def files_mime(*paths: Path) -> QMimeData:
    """What a file manager puts on a drag or the clipboard for these files."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    mime.setText("\n".join(QUrl.fromLocalFile(str(path)).toString() for path in paths))
    return mime


def drag(widget, mime: QMimeData, at: QPoint) -> None:
    """A drag from a file manager let go over `widget` at `at`, as Qt delivers it: enter, move, drop."""
    action, button, modifiers = Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(at, action, mime, button, modifiers)
    QApplication.sendEvent(widget, enter)
    assert enter.isAccepted(), "the box refused the drag"
    QApplication.sendEvent(widget, QDragMoveEvent(at, action, mime, button, modifiers))
    QApplication.sendEvent(widget, QDropEvent(QPointF(at), action, mime, button, modifiers))


def test_a_text_file_becomes_its_name_and_its_text_in_one_fenced_block(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Plan\n\n```python\nprint(1)\n```\n", encoding="utf-8")
    windows = tmp_path / "from-powershell.txt"
    windows.write_text("Grüße ☕", encoding="utf-16")  # PowerShell 5.1's `>`
    attachment = attach_files([notes, windows])
    assert attachment.problems == []
    assert attachment.text == (
        "notes.md:\n````\n# Plan\n\n```python\nprint(1)\n```\n````\n\nfrom-powershell.txt:\n```\nGrüße ☕\n```\n"
    )
    assert fenced("a.txt", "x ```` y") == "a.txt:\n`````\nx ```` y\n`````\n"  # longer than any run inside
    assert fenced("two\nlines\u202etxt.exe", "x") == "two?lines?txt.exe:\n```\nx\n```\n"  # one line, as written


def test_what_is_not_a_text_file_is_refused_in_words_and_never_hangs_the_window(tmp_path):
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")  # left to the reader in its own process
    word = tmp_path / "letter.docx"
    word.write_bytes(b"PK\x03\x04" + bytes(40))  # a zip: read apart too (the reader says what it is)
    old_word = tmp_path / "letter.doc"
    old_word.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(40))  # the old container: read apart too
    image = tmp_path / "photo.bin"
    image.write_bytes(b"\x00\x10JFIF\x00")
    ansi = tmp_path / "ansi.txt"
    ansi.write_bytes("café".encode("cp1252"))
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:  # sparse: past the limit without writing a megabyte
        handle.truncate(MAX_TEXT_BYTES + 1)
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n", encoding="utf-8")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # reading it would wait for a writer for ever
    folder = tmp_path / "folder"
    folder.mkdir()
    good = tmp_path / "good.txt"
    good.write_text("kept", encoding="utf-8")
    files = [pdf, word, old_word, image, ansi, huge, empty, pipe, folder, tmp_path / "gone.txt", good]
    attachment = attach_files(files)
    assert attachment.text == "good.txt:\n```\nkept\n```\n"  # the readable one is still added
    assert attachment.to_read == [pdf, word, old_word]
    assert attachment.problems == [
        "photo.bin is not a text file, a PDF, an Office document (Word, Excel, PowerPoint) or a LibreOffice text, "
        "sheet or presentation (pictures and other files cannot be read: save the text as a .txt file, a PDF or a "
        "Word document).",
        "ansi.txt is not UTF-8 text (byte 0xE9 at position 3 is not a character in UTF-8): save it again as UTF-8 "
        "(in Notepad: Save as, Encoding: UTF-8).",
        "huge.log is more text than a model reads at once (more than 1 MB): add the part you need.",
        "empty.txt is empty.",
        "pipe is not a file that can be read.",
        "folder is a folder: add the files in it one by one.",
        "gone.txt is not a file that can be read.",
    ]


def test_files_dropped_on_the_message_box_add_their_text_where_they_are_let_go(qtbot, quiet_window, tmp_path):
    """A plain text box would add the files' addresses ("file:///..."); a refused file is said in a toast."""
    box = quiet_window.input
    box.setPlainText("Summarise this:")
    box.moveCursor(box.textCursor().MoveOperation.End)
    notes = tmp_path / "notes.txt"
    notes.write_text("The meeting moved to Friday.", encoding="utf-8")
    image = tmp_path / "slides.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))
    drag(box.viewport(), files_mime(notes, image), QPoint(box.viewport().width() - 4, box.viewport().height() - 4))
    assert box.toPlainText() == "Summarise this:\nnotes.txt:\n```\nThe meeting moved to Friday.\n```\n"
    assert "file://" not in box.toPlainText()
    qtbot.waitUntil(lambda: quiet_window.toast.isVisible())
    assert quiet_window.toast.text().startswith(
        "slides.png is not a text file, a PDF, an Office document (Word, Excel, PowerPoint) or a LibreOffice text,"
    )


def test_files_copied_in_the_file_manager_paste_as_their_text_and_web_text_pastes_as_before(quiet_window, tmp_path):
    box = quiet_window.input
    notes = tmp_path / "todo.txt"
    notes.write_text("buy milk", encoding="utf-8")
    QApplication.clipboard().setMimeData(files_mime(notes))
    box.clear()
    box.paste()
    assert box.toPlainText() == "todo.txt:\n```\nbuy milk\n```\n"
    web = QMimeData()  # a link dragged or copied from a browser: its address and its words
    web.setUrls([QUrl("https://example.com/page")])
    web.setText("https://example.com/page")
    QApplication.clipboard().setMimeData(web)
    box.clear()
    box.paste()
    assert box.toPlainText() == "https://example.com/page"


def test_the_paperclip_picks_files_with_the_keyboard_and_adds_their_text(qtbot, quiet_window, tmp_path):
    """Reached with Tab from the message box (then Send); its chooser adds the files picked at the cursor."""
    box, composer = quiet_window.input, quiet_window.composer
    quiet_window.activateWindow()
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    qtbot.keyClick(box, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is composer.attach_button
    qtbot.keyClick(composer.attach_button, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is quiet_window.send_button
    recipe = tmp_path / "recipe.txt"
    recipe.write_text("2 eggs", encoding="utf-8")
    composer.attach_button.setFocus()
    qtbot.keyClick(composer.attach_button, Qt.Key.Key_Space)
    dialog = composer.files_dialog
    qtbot.waitUntil(dialog.isVisible)
    assert dialog.isModal() and not quiet_window.isHidden()  # window-modal: the window is not blocked for ever
    dialog.setDirectory(str(tmp_path))
    dialog.selectFile(str(recipe))
    dialog.accept()
    assert box.toPlainText() == "recipe.txt:\n```\n2 eggs\n```\n"
    assert box.hasFocus()


def test_the_paperclips_documents_filter_offers_every_kind_of_document_that_is_read():
    from app.chat.composer import DOCUMENT_FILES
    from test_office_text import SAVED_KINDS

    office = [".docx", ".xlsx", ".xls", ".pptx", *SAVED_KINDS]
    opendocument = [".odt", ".ods", ".ots", ".odp", ".otp"]
    offered = DOCUMENT_FILES.removeprefix("Documents (").removesuffix(")").split()
    assert not {f"*{suffix}" for suffix in [".pdf", ".txt", ".md", ".csv", *office, *opendocument]} - set(offered)


def test_files_dropped_on_a_message_being_edited_go_into_it_and_refusals_reach_the_toast(qtbot, quiet_window, tmp_path):
    from app_fixtures import answered

    answered(quiet_window, "what does it say?")
    question = quiet_window.chat_view.widgets[0]
    question.start_editing()
    editor = question.editor
    editor.moveCursor(editor.textCursor().MoveOperation.End)
    notes = tmp_path / "letter.txt"
    notes.write_text("Dear Anna,", encoding="utf-8")
    drag(
        editor.viewport(),
        files_mime(notes, tmp_path),
        QPoint(editor.viewport().width() - 4, editor.viewport().height() - 4),
    )
    assert editor.toPlainText() == "what does it say?\nletter.txt:\n```\nDear Anna,\n```\n"
    qtbot.waitUntil(lambda: quiet_window.toast.isVisible())
    assert quiet_window.toast.text() == f"{tmp_path.name} is a folder: add the files in it one by one."


def test_files_let_go_over_the_chat_join_the_end_of_the_message_box(qtbot, quiet_window, tmp_path):
    """The chat above the box is where people aim (LM Studio, Jan): the drag is taken there too."""
    from app_fixtures import answered

    answered(quiet_window, "an earlier question")
    box = quiet_window.input
    box.setPlainText("Check this:")
    box.moveCursor(box.textCursor().MoveOperation.Start)  # the caret elsewhere: the files still go at the end
    notes = tmp_path / "minutes.txt"
    notes.write_text("Budget approved.", encoding="utf-8")
    answer = quiet_window.chat_view.widgets[-1]  # over an answer, inside the scrolled chat
    drag(answer, files_mime(notes), QPoint(answer.width() // 2, answer.height() // 2))
    assert box.toPlainText() == "Check this:\nminutes.txt:\n```\nBudget approved.\n```\n"


def test_a_pdf_is_read_in_a_process_of_its_own_and_its_text_joins_the_message(qtbot, quiet_window, tmp_path):
    """The window goes on while it reads ("Reading report.pdf…"); a damaged PDF is said in the reader's words."""
    from test_document_text import write_pdf

    box = quiet_window.input
    box.setPlainText("What changed?")
    box.moveCursor(box.textCursor().MoveOperation.End)
    report = write_pdf(tmp_path / "report.pdf", ["Sales rose", "Costs fell"])
    drag(box.viewport(), files_mime(report), QPoint(box.viewport().width() - 4, box.viewport().height() - 4))
    assert quiet_window.toast.text() == "Reading report.pdf…" and box.reading is not None
    qtbot.waitUntil(lambda: "Costs fell" in box.toPlainText(), timeout=60_000)
    assert box.toPlainText() == "What changed?\nreport.pdf:\n```\nSales rose\n\nCosts fell\n```\n"
    qtbot.waitUntil(lambda: box.reading is None)
    damaged = tmp_path / "broken.pdf"
    damaged.write_bytes(b"%PDF-1.7\n1 0 obj <<")
    box.add_files([damaged])
    qtbot.waitUntil(lambda: quiet_window.toast.text().startswith("broken.pdf is damaged"), timeout=60_000)
    assert "Costs fell\n```\n" == box.toPlainText()[-len("Costs fell\n```\n") :]  # nothing added


def test_office_and_opendocument_files_are_read_in_a_process_of_their_own_and_a_drawing_is_said(
    qtbot, quiet_window, tmp_path
):
    from test_document_text import write_docx, write_odt, zip_with
    from test_office_text import BUDGET, DECK, IMPRESS_DECK, write_presentation, write_workbook

    box = quiet_window.input
    word = write_docx(tmp_path / "report.docx")
    drawing = zip_with(tmp_path / "plan.odg", {"mimetype": b"application/vnd.oasis.opendocument.graphics"})
    writer = write_odt(tmp_path / "minutes.odt")
    excel, powerpoint = write_workbook(tmp_path / "budget.xlsx"), write_presentation(tmp_path / "plan.pptx")
    drag(box.viewport(), files_mime(word, drawing, writer, excel, powerpoint, IMPRESS_DECK), QPoint(4, 4))
    assert quiet_window.toast.text() == (
        "Reading report.docx, plan.odg, minutes.odt, budget.xlsx, plan.pptx, plan-libreoffice-7.4.odp…"
    )
    qtbot.waitUntil(lambda: box.reading is None and not box.waiting_documents, timeout=90_000)
    text = box.toPlainText()
    assert text.startswith("report.docx:\n```\n# Quarterly report\n")
    assert "North | 12 (flat)\nGrüße ✓\n```\n" in text
    assert "| Cake    | 30   |\n```\n" in text and "\nminutes.odt:\n```\n# Minutes\n" in text
    assert text.endswith(
        f"budget.xlsx:\n```\n{BUDGET}\n```\nplan.pptx:\n```\n{DECK}\n```\nplan-libreoffice-7.4.odp:\n```\n{DECK}\n```\n"
    )
    assert quiet_window.toast.text().startswith("plan.odg is a LibreOffice Draw drawing, which cannot be read")


def test_a_pdf_reader_that_does_not_end_is_stopped_and_said(qtbot, tmp_path):
    from app.chat.document_reading import DocumentReading
    from test_document_text import write_pdf

    reading = DocumentReading(write_pdf(tmp_path / "slow.pdf", ["text"]), timeout_ms=1)  # no reader ends that soon
    with qtbot.waitSignal(reading.failed, timeout=10_000) as failed:
        pass
    assert failed.args[0].startswith("Reading slow.pdf took longer than 0 s and was stopped: the file may be damaged")
    qtbot.waitUntil(lambda: reading.process.state() == reading.process.ProcessState.NotRunning, timeout=10_000)


def test_many_pdfs_are_read_one_at_a_time_in_the_order_given(qtbot, quiet_window, tmp_path):
    """A folder's worth of PDFs dropped at once starts one reader, not one process each."""
    from test_document_text import write_pdf

    box = quiet_window.input
    pdfs = [write_pdf(tmp_path / f"part{n}.pdf", [f"Part {n}"]) for n in (1, 2, 3)]
    box.add_files(pdfs)
    assert box.reading is not None and box.waiting_documents == pdfs[1:]
    assert len(box.findChildren(type(box.reading))) == 1
    qtbot.waitUntil(lambda: box.reading is None and not box.waiting_documents, timeout=90_000)
    assert box.toPlainText() == "".join(f"part{n}.pdf:\n```\nPart {n}\n```\n" for n in (1, 2, 3))
