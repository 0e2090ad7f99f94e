"""The sidebar of 2026 (issue 42 item 20), on a real MainWindow offscreen with the app's stylesheet: chats
grouped by date under the ones pinned to the top, a menu per chat ("…" on the hovered or selected row, the
context-menu key, Shift+F10, Delete), no Rename/Delete buttons under the list, and the app's menu at the
sidebar's foot in place of a menu bar, whose shortcuts still work."""

from __future__ import annotations

import datetime as dt
import time

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QLineEdit, QMenu  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import recording_bridge_class, screenshot  # noqa: E402

from app.conversations.date_groups import group_label, headings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]

DAY = 24 * 3600


def at(year: int, month: int, day: int, hour: int = 12) -> float:
    return dt.datetime(year, month, day, hour).timestamp()


def test_chats_are_grouped_by_the_day_they_were_last_active():
    now = at(2026, 11, 27, 9)
    assert group_label(at(2026, 11, 27, 1), now) == "Today"
    assert group_label(now + 3600, now) == "Today"  # a clock set back: not a group of its own
    assert group_label(at(2026, 11, 26, 23), now) == "Yesterday"  # ten hours ago, but yesterday
    assert group_label(at(2026, 11, 20), now) == "Previous 7 days"
    assert group_label(at(2026, 11, 19), now) == "Previous 30 days"
    assert group_label(at(2026, 10, 28), now) == "Previous 30 days"
    assert group_label(at(2026, 10, 27), now) == "October"
    assert group_label(at(2025, 12, 31), now) == "December 2025"
    times = [at(2026, 11, 27), at(2026, 11, 27, 8), at(2026, 11, 26), at(2026, 3, 1), at(2026, 3, 2)]
    assert headings(times, now) == ["Today", "", "Yesterday", "March", ""]
    pinned_first = [at(2026, 3, 1), at(2026, 11, 27), at(2026, 11, 27, 8), at(2026, 11, 26)]
    assert headings(pinned_first, now, pinned=2) == ["Pinned", "", "Today", "Yesterday"]
    assert headings(times[:1], now, pinned=1) == ["Pinned"]


@pytest.fixture()
def sidebar_window(qtbot, themes, app_paths):
    """A main window with the app's stylesheet and five chats last active today, yesterday, four days ago,
    a fortnight ago and in an earlier month (written into the real SQLite file)."""
    from app.window.main_window import MainWindow

    window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    store = window.store
    now = time.time()
    chats = [
        ("Palindromes in Python", 0),
        ("A birthday poem for Anna", 1),
        ("Weekend trip ideas", 4),
        ("Sourdough starter", 14),
        ("Tax return questions", 60),
    ]
    for title, days in chats:
        cid = store.create_conversation(title)
        store.add_message(cid, "user", f"About {title.lower()}")
        store.db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now - days * DAY, cid))
    store.db.commit()
    window.controller.conversations.refresh()
    window.controller.open_conversation(window.controller.conversations.id_at(0))
    window.resize(1280, 800)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    return window


def open_menu() -> QMenu:
    menu = QApplication.activePopupWidget()
    assert isinstance(menu, QMenu), "no menu opened"
    return menu


def texts(menu: QMenu) -> list[str]:
    return [a.text() for a in menu.actions() if not a.isSeparator()]


def test_the_chat_list_shows_date_headings_above_each_group(qtbot, sidebar_window):
    w = sidebar_window
    model, view = w.controller.conversations, w.sidebar.view
    labels = [model.index(row).data(model.HeadingRole) for row in range(model.rowCount())]
    assert labels[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"]
    assert labels[4] and labels[4] not in ("Today", "Yesterday", "Previous 7 days", "Previous 30 days")  # a month
    first, continued = view.visualRect(model.index(0)), view.item_rect(model.index(0))
    assert continued.top() > first.top() + 10, "no room for the heading above the row"
    heading_point = QPoint(first.center().x(), first.top() + 4)
    w.sidebar.view.clearSelection()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=heading_point)
    assert not view.selectionModel().hasSelection(), "a click on a heading selected a chat"
    screenshot(w, "sidebar-groups")


def test_no_rename_or_delete_buttons_under_the_list_and_the_app_menu_replaces_the_menu_bar(qtbot, sidebar_window):
    w = sidebar_window
    assert not hasattr(w.sidebar, "rename_button") and not hasattr(w.sidebar, "delete_button")
    assert not w.menuBar().isVisible()
    assert w.sidebar.app_menu_button.isVisible() and w.sidebar.app_menu_button.menu() is w.app_menu
    entries = texts(w.app_menu)
    assert entries[:2] == ["&Settings…", "&Model manager"] and entries[-1] == "&Quit"
    assert {"&Chat", "&Models", "&Help"} <= set(entries)
    w.sidebar.app_menu_button.setFocus()
    qtbot.keyClick(w.sidebar.app_menu_button, Qt.Key.Key_Space)  # the keyboard opens it too
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is w.app_menu)
    screenshot(w, "sidebar-app-menu")
    qtbot.keyClick(w.app_menu, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: QApplication.activePopupWidget() is None)
    w.input.setFocus()
    qtbot.keyClick(w.input, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)  # the bar's shortcut
    qtbot.waitUntil(lambda: w.settings_page is not None and w.pages.currentWidget() is w.settings_page)


def test_the_hovered_rows_menu_renames_exports_and_deletes_that_chat(qtbot, sidebar_window, tmp_path):
    w = sidebar_window
    model, view = w.controller.conversations, w.sidebar.view
    open_id = w.controller.conversation_id
    index = model.index(2)
    target = model.id_at(2)
    qtbot.mouseMove(view.viewport(), view.item_rect(index).center())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.menu_button_at(index).center())
    menu = open_menu()
    assert texts(menu) == ["Rename", "Pin to top", "Export as Markdown…", "Export as JSON…", "Delete…"]
    assert w.controller.conversation_id == open_id, "the menu's click opened the chat"
    screenshot(w, "sidebar-chat-menu")
    export = next(a for a in menu.actions() if a.text() == "Export as Markdown…")
    saved = tmp_path / "trip.md"

    def fill_chooser() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, QFileDialog)
        dialog.selectFile(str(saved))
        dialog.accept()

    QTimer.singleShot(0, fill_chooser)
    menu.hide()
    export.trigger()
    assert saved.is_file() and "Weekend trip ideas" in saved.read_text(encoding="utf-8")  # that chat, not the open one
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.menu_button_at(index).center())
    menu = open_menu()
    rename = next(a for a in menu.actions() if a.text() == "Rename")
    menu.hide()
    rename.trigger()
    editor = next(e for e in view.findChildren(QLineEdit) if e.isVisible())
    editor.selectAll()
    qtbot.keyClicks(editor, "Lisbon in May")
    qtbot.keyClick(editor, Qt.Key.Key_Return)  # committed from the event loop
    qtbot.waitUntil(lambda: w.store.conversation(target).title == "Lisbon in May")
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.menu_button_at(index).center())
    menu = open_menu()
    delete = next(a for a in menu.actions() if a.text() == "Delete…")
    menu.hide()
    delete.trigger()
    assert w.store.conversation(target) is None and model.row_of(target) == -1
    assert w.controller.conversation_id == open_id


@pytest.mark.parametrize("key", ["menu", "shift+f10"])
def test_the_keyboard_opens_the_selected_chats_menu_and_delete_asks_to_delete(qtbot, sidebar_window, key):
    w = sidebar_window
    model, view = w.controller.conversations, w.sidebar.view
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Down)  # the second chat: opened, as a click would
    second = model.id_at(1)
    qtbot.waitUntil(lambda: w.controller.conversation_id == second)
    if key == "menu":
        qtbot.keyClick(view, Qt.Key.Key_Menu)
    else:
        qtbot.keyClick(view, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = open_menu()
    assert menu.geometry().intersects(view.viewport().rect().translated(view.viewport().mapToGlobal(QPoint())))
    qtbot.keyClick(menu, Qt.Key.Key_Down)
    assert menu.activeAction().text() == "Rename"
    qtbot.keyClick(menu, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: any(e.isVisible() for e in view.findChildren(QLineEdit)))
    qtbot.keyClick(next(e for e in view.findChildren(QLineEdit) if e.isVisible()), Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not any(e.isVisible() for e in view.findChildren(QLineEdit)))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Delete)
    assert w.store.conversation(second) is None


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_sidebar_fits_at_both_widths_without_clipping(qtbot, sidebar_window, width):
    w = sidebar_window
    w.resize(width, 700)
    qtbot.waitUntil(lambda: w.width() == width)
    QApplication.processEvents()
    for button in (w.sidebar.new_button, w.sidebar.app_menu_button):
        assert button.width() >= button.sizeHint().width(), f"{button.text()!r} is clipped"
    view, model = w.sidebar.view, w.controller.conversations
    item = view.item_rect(model.index(0))
    assert view.viewport().rect().contains(view.menu_button_at(model.index(0))), "the … button is cut off"
    assert item.width() <= view.viewport().width()


def test_tab_goes_from_the_chats_to_the_app_menu_then_to_the_chats_header(qtbot, sidebar_window):
    w = sidebar_window
    w.sidebar.view.setFocus()
    qtbot.waitUntil(w.sidebar.view.hasFocus)
    qtbot.keyClick(w.sidebar.view, Qt.Key.Key_Tab)
    qtbot.waitUntil(w.sidebar.models_button.hasFocus)  # Models, then the app's menu, at the sidebar's foot
    qtbot.keyClick(w.sidebar.models_button, Qt.Key.Key_Tab)
    qtbot.waitUntil(w.sidebar.app_menu_button.hasFocus)
    qtbot.keyClick(w.sidebar.app_menu_button, Qt.Key.Key_Tab)
    qtbot.waitUntil(w.header.model_button.hasFocus)


def test_the_menu_button_appears_on_the_row_under_the_pointer(qtbot, sidebar_window):
    w = sidebar_window
    view, model = w.sidebar.view, w.controller.conversations
    index = model.index(3)  # not the open chat: no … until the pointer is over it
    button = view.menu_button_at(index)
    top_left = view.viewport().mapTo(w, button.topLeft())

    def button_pixels():
        QApplication.processEvents()
        return w.grab().copy(top_left.x(), top_left.y(), button.width(), button.height()).toImage()

    away = button_pixels()
    qtbot.mouseMove(view.viewport(), view.item_rect(index).center())
    qtbot.waitUntil(lambda: button_pixels() != away)
    qtbot.mouseMove(view.viewport(), view.item_rect(model.index(0)).center())
    qtbot.waitUntil(lambda: button_pixels() == away)


def test_a_chat_pinned_from_its_menu_stays_at_the_top_under_pinned_until_unpinned(qtbot, sidebar_window):
    """Pin to top from the row's menu by the keyboard (Shift+F10): the chat goes to the top under "Pinned", the
    others keep their dates, it stays first however recent the others become and after the app starts again
    (the real SQLite file); the Chat menu's item reads Unpin for it, and Unpin puts it back among its dates."""
    w = sidebar_window
    model, view = w.controller.conversations, w.sidebar.view
    trip = model.id_at(2)  # "Weekend trip ideas", four days old
    view.setFocus()
    for _ in range(2):
        qtbot.keyClick(view, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: w.controller.conversation_id == trip)
    assert w.pin_action.text() == "&Pin chat to top"
    qtbot.keyClick(view, Qt.Key.Key_F10, Qt.KeyboardModifier.ShiftModifier)
    menu = open_menu()
    pin = next(a for a in menu.actions() if a.text() == "Pin to top")
    menu.hide()
    pin.trigger()
    assert model.id_at(0) == trip and w.store.conversation(trip).pinned
    labels = [model.index(row).data(model.HeadingRole) for row in range(model.rowCount())]
    assert labels[:4] == ["Pinned", "Today", "Yesterday", "Previous 30 days"]
    assert model.index(0).data(Qt.ItemDataRole.AccessibleTextRole) == "Conversation: Weekend trip ideas, pinned"
    assert w.sidebar.current_id() == trip, "the open chat lost its place in the list"
    assert w.pin_action.text() == "Un&pin chat"
    screenshot(w, "sidebar-pinned")
    newest = model.id_at(1)
    w.controller.open_conversation(newest)
    w.controller.send("One more question")  # the newest chat is active again: the pinned one stays first
    qtbot.waitUntil(lambda: model.id_at(0) == trip and model.id_at(1) == newest)
    assert w.pin_action.text() == "&Pin chat to top"
    reopened = type(w.store)(w.store.path)  # as the next start reads the file
    assert [c.id for c in reopened.conversations()][:2] == [trip, newest]
    reopened.close()
    w.controller.open_conversation(trip)
    qtbot.waitUntil(lambda: w.pin_action.text() == "Un&pin chat")
    w.pin_action.trigger()  # the Chat menu's item, as the app menu shows it
    assert not w.store.conversation(trip).pinned
    labels = [model.index(row).data(model.HeadingRole) for row in range(3)]
    assert labels == ["Today", "Yesterday", "Previous 7 days"]  # back among its dates (four days old)
    assert model.row_of(trip) == 2 and w.pin_action.text() == "&Pin chat to top"


def test_pinning_several_chats_puts_the_last_pinned_first_and_a_search_keeps_them_first(qtbot, sidebar_window):
    w = sidebar_window
    model = w.controller.conversations
    old, older = model.id_at(3), model.id_at(4)
    w.controller.set_pinned(older, True)
    w.controller.set_pinned(old, True)
    assert [model.id_at(0), model.id_at(1)] == [old, older]
    w.controller.set_pinned(older, True)  # pinned again: it keeps its place
    assert [model.id_at(0), model.id_at(1)] == [old, older]
    w.sidebar.search.setText("a")  # every chat's message has an "a"
    qtbot.waitUntil(lambda: model.search == "a")
    assert [model.id_at(0), model.id_at(1)] == [old, older]
    assert model.index(0).data(model.HeadingRole) == "Pinned" and model.index(2).data(model.HeadingRole) == "Today"
