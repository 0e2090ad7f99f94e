"""The keyboard shortcuts sheet (Help > Keyboard shortcuts, Ctrl+/) on a real MainWindow offscreen: it lists
every shortcut the window's menus have, in the menus' own words, and each key it lists for a place (the
message box, the chat list, the Settings and Models pages) does there what the sheet says."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QKeySequence  # noqa: E402
from PySide6.QtWidgets import QApplication, QLineEdit, QMenu  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import answered, ready, screenshot  # noqa: E402
from core.engine import protocol as P  # noqa: E402

from app.window.shortcuts_sheet import PLACE_KEYS, ShortcutsSheet, action_keys, action_words, key_text  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes, styled_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


def place_keys(place: str) -> dict[str, str]:
    return dict(next(rows for name, rows in PLACE_KEYS if name == place))


def test_ctrl_slash_opens_a_sheet_with_every_menu_shortcut_in_the_menus_words(qtbot, styled_window):
    w = styled_window
    w.input.setFocus()
    qtbot.waitUntil(w.input.hasFocus)
    qtbot.keyClick(w.input, Qt.Key.Key_Slash, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: isinstance(QApplication.activeModalWidget(), ShortcutsSheet))
    sheet = w.shortcuts_sheet
    rows = sheet.rows()
    with_keys = [a for a in w.actions() if not a.shortcut().isEmpty()]
    assert len(with_keys) >= 10
    for action in with_keys:  # every shortcut of the window, once, with its menu's words
        assert rows.count((action_keys(action), action_words(action))) == 1, action.text()
    assert ("Ctrl+N", "New chat") in rows and ("Ctrl+/", "Keyboard shortcuts") in rows
    assert ("Ctrl+,", "Settings") in rows  # "Settings…" without its dots
    assert (f"{key_text(QKeySequence.StandardKey.ZoomIn)}, Ctrl+=", "Bigger text") in rows  # both of its keys
    for _place, keys in PLACE_KEYS:
        assert all(row in rows for row in keys)
    assert sheet.findChild(QLineEdit) is None and sheet.height() <= w.screen().availableGeometry().height()
    screenshot(sheet, "shortcuts-sheet")
    qtbot.keyClick(sheet, Qt.Key.Key_Escape)  # Esc closes it; the window's Esc (stop) is not pressed
    qtbot.waitUntil(lambda: not sheet.isVisible())
    assert not any(call[0] == "cancel" for call in w.bridge.calls)


def test_the_sheet_follows_the_menus_words(qtbot, styled_window):
    w = styled_window
    w.regenerate_action.setText("Make r&oom and try again")  # as the Chat menu says after a long message failed
    rows = w.show_shortcuts().rows()
    assert ("Ctrl+R", "Make room and try again") in rows and ("Ctrl+R", "Regenerate the answer") not in rows
    w.shortcuts_sheet.accept()


def test_the_message_box_keys_do_what_the_sheet_says(qtbot, styled_window):
    w = styled_window
    keys = place_keys("In the message box")
    assert set(keys) == {"Enter", "Shift+Enter", "Up", "Tab"}
    ready(w.bridge)
    w.input.setFocus()
    qtbot.keyClicks(w.input, "first line")
    qtbot.keyClick(w.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)  # a new line
    qtbot.keyClicks(w.input, "second line")
    assert w.input.toPlainText() == "first line\nsecond line"
    qtbot.keyClick(w.input, Qt.Key.Key_Return)  # sent
    sent = [call for call in w.bridge.calls if call[0] == "generate"]
    assert sent and sent[-1][2][-1]["content"] == "first line\nsecond line" and w.input.toPlainText() == ""
    w.input.setFocus()
    qtbot.keyClick(w.input, Qt.Key.Key_Tab)
    assert QApplication.focusWidget() is w.composer.attach_button


def test_up_edits_your_last_message_and_alt_arrows_flip_the_last_answer(qtbot, styled_window):
    """Up in the empty message box opens your last message in place, the keyboard in it; Esc (or Enter, which
    resends) gives the keyboard back to the message box. Alt+Left / Alt+Right flip the last answer's
    alternatives, as its ‹ › do. Both are in the Chat menu too."""
    w = styled_window
    ready(w.bridge)
    answered(w, "First question", "First answer")
    answered(w, "Second question", "Second answer")
    w.input.setFocus()
    qtbot.keyClicks(w.input, "draft")
    qtbot.keyClick(w.input, Qt.Key.Key_Up)  # not empty: the caret moves, nothing opens
    assert all(widget.editor is None for widget in w.chat_view.widgets)
    w.input.clear()
    qtbot.keyClick(w.input, Qt.Key.Key_Up)
    mine = w.chat_view.widgets[2]
    assert mine.editor is not None and QApplication.focusWidget() is mine.editor
    assert mine.editor.toPlainText() == "Second question"
    qtbot.keyClick(mine.editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: mine.editor is None)
    assert QApplication.focusWidget() is w.input
    w.edit_last_action.trigger()  # the Chat menu's way
    editor = w.chat_view.widgets[2].editor
    qtbot.keyClicks(editor, " again")
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # resent: a new answer is asked for
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.input)
    rid = w.bridge.calls[-1][1]
    assert w.bridge.calls[-1][2][-1]["content"] == "Second question again"
    w.bridge.handle_events([P.TokenChunk(rid, "Third answer", (7,)), P.Finished(rid, "eos", 10, 3)])
    assert not w.previous_answer_action.isEnabled() and not w.next_answer_action.isEnabled()
    w.regenerate_action.trigger()
    rid = w.bridge.calls[-1][1]
    w.bridge.handle_events([P.TokenChunk(rid, "Fourth answer", (7,)), P.Finished(rid, "eos", 10, 3)])
    last = lambda: w.controller.messages.rows[-1].content  # noqa: E731
    assert last() == "Fourth answer" and w.previous_answer_action.isEnabled()
    qtbot.keyClick(w.input, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
    assert last() == "Third answer" and w.next_answer_action.isEnabled()
    qtbot.keyClick(w.input, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    assert last() == "Fourth answer"


def test_the_chat_list_keys_do_what_the_sheet_says(qtbot, styled_window):
    w = styled_window
    assert set(place_keys("In the list of chats")) == {"Up, Down", "Shift+F10", "Del"}
    store, model, view = w.store, w.controller.conversations, w.sidebar.view
    for title in ("Oldest", "Middle", "Newest"):
        store.add_message(store.create_conversation(title), "user", title)
    model.refresh()
    w.controller.open_conversation(model.id_at(0))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: w.controller.conversation_id == model.id_at(1))
    qtbot.keyClick(view, Qt.Key.Key_Up)
    qtbot.waitUntil(lambda: w.controller.conversation_id == model.id_at(0))
    qtbot.keyClick(view, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: isinstance(QApplication.activePopupWidget(), QMenu))
    menu = QApplication.activePopupWidget()
    words = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert {"Rename", "Pin to top", "Delete…"} <= set(words) and any(w.startswith("Export") for w in words)
    menu.hide()
    newest = model.id_at(0)
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Delete)  # confirm_delete=False: the question is tested in the sidebar's tests
    assert store.conversation(newest) is None


def test_the_pages_keys_do_what_the_sheet_says(qtbot, styled_window):
    w = styled_window
    assert set(place_keys("On the Settings and Models pages")) == {"Ctrl+S", "Esc"}
    before = w.settings.context_length

    def settings_with_another_context_length():
        page = w.open_settings(has_gpu=False)
        qtbot.waitUntil(lambda: w.pages.currentWidget() is page)
        combo = page.context_length.combo
        combo.setCurrentIndex((combo.findData(before) + 1) % combo.count())
        page.setFocus()
        return page, combo.currentData()

    page, chosen = settings_with_another_context_length()
    qtbot.keyClick(page, Qt.Key.Key_Escape)  # back, without saving
    qtbot.waitUntil(lambda: w.settings_page is None)
    assert w.settings.context_length == before
    page, chosen = settings_with_another_context_length()
    qtbot.keyClick(page, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)  # saved, back to the chat
    qtbot.waitUntil(lambda: w.settings_page is None)
    assert w.settings.context_length == chosen != before
    manager = w.open_model_manager()
    assert w.content.currentWidget() is manager
    qtbot.keyClick(QApplication.focusWidget() or manager, Qt.Key.Key_Escape)  # from its focused switch
    qtbot.waitUntil(lambda: w.model_manager is None and w.content.currentIndex() == 0)


def test_keys_are_written_as_the_system_writes_them(qapp):
    assert key_text("Ctrl+Shift+C") == QKeySequence("Ctrl+Shift+C").toString(QKeySequence.SequenceFormat.NativeText)
    from PySide6.QtGui import QAction

    action = QAction("Export as &Markdown…")
    assert action_words(action) == "Export as Markdown"
    action.setText("R&&D &notes")
    assert action_words(action) == "R&D notes"
