"""The window under the mouse wheel and the keyboard (issue 42), driven offscreen on a real MainWindow with
the app's stylesheet: it keeps its width when Chat settings opens, the wheel scrolls past controls without
changing them, the speed card closes like a popover, the keyboard starts in the message box and every
control shows where the focus is."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import (  # noqa: E402
    answered,
    control_value,
    grab_with_and_without_focus,
    ready,
    recording_bridge_class,
    value_controls,
    wheel,
)

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes, styled_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


@pytest.mark.timeout(240)  # a theme switch restyles every widget the test process still holds: first, and
# with room under load
def test_the_theme_is_previewed_and_cancel_puts_it_back(qtbot, themes, app_paths):
    from app.settings.schema import Theme
    from app.window.main_window import MainWindow

    w = MainWindow(app_paths, bridge=recording_bridge_class()(), theme=themes, confirm_delete=False)
    qtbot.addWidget(w)
    page = w.open_settings(has_gpu=False)
    page.theme.combo.setCurrentIndex(page.theme.combo.findData(Theme.DARK))
    assert themes.theme == Theme.DARK and themes.dark, "the theme was not previewed"
    page.cancel_button.click()
    assert themes.theme == w.settings.theme != Theme.DARK
    page = w.open_settings(has_gpu=False)
    page.theme.combo.setCurrentIndex(page.theme.combo.findData(Theme.DARK))
    page.save_button.click()
    assert themes.theme == w.settings.theme == Theme.DARK


# 1 -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1024, 1280])
def test_chat_settings_open_beside_the_chat_without_widening_the_window(qtbot, styled_window, width):
    w = styled_window
    w.resize(width, 700)
    qtbot.waitUntil(lambda: w.width() == width)
    w.show_conversation_settings(True)
    qtbot.waitUntil(lambda: w.chat_settings.isVisible())
    QApplication.processEvents()
    assert w.width() == width, "opening Chat settings widened the window"
    assert w.minimumSizeHint().width() <= width
    for button in (w.sidebar.app_menu_button, w.sidebar.new_button):
        assert button.width() >= button.sizeHint().width(), f"{button.text()!r} is clipped"
    w.show_conversation_settings(False)
    QApplication.processEvents()
    assert w.width() == width


# 2 -----------------------------------------------------------------------------------------------------------


def test_the_wheel_scrolls_the_chat_settings_panel_and_changes_none_of_its_controls(qtbot, styled_window):
    w = styled_window
    w.resize(1024, 560)  # short: the panel scrolls
    w.show_conversation_settings(True)
    panel = w.chat_settings
    for toggle in panel.findChildren(QWidget, "disclosure"):  # Advanced open: the method box and more
        if hasattr(toggle, "isChecked") and not toggle.isChecked():
            toggle.click()
    QApplication.processEvents()
    controls = value_controls(panel)
    assert len(controls) >= 5
    before = [control_value(c) for c in controls]
    changed = []
    panel.changed.connect(lambda *_: changed.append(True))
    bar = panel.findChild(QWidget, "panelScroll").verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(0)
    focus = QApplication.focusWidget()
    for control in controls:
        wheel(control, -1)
        wheel(control, +1)
    wheel(controls[0], -3)
    assert [control_value(c) for c in controls] == before
    assert not changed, "a wheel over a control saved a setting"
    assert bar.value() > 0, "the panel did not scroll under the wheel"
    assert QApplication.focusWidget() is focus, "the wheel took the focus"


def test_the_wheel_changes_nothing_on_the_settings_page(qtbot, styled_window):
    page = styled_window.open_settings(has_gpu=True)
    QApplication.processEvents()
    controls = value_controls(page)
    assert controls
    before = [control_value(c) for c in controls]
    for control in controls:
        wheel(control, -2)
    assert [control_value(c) for c in controls] == before
    assert page.values() == styled_window.settings


def test_every_combo_and_slider_of_every_screen_is_guarded(qtbot, styled_window, tmp_path):
    from app.models.wizard.wizard import FirstRunWizard
    from app.settings.schema import AppSettings
    from app.window.wheel_guard import unguarded

    w = styled_window
    w.show_conversation_settings(True)
    page = w.open_settings(has_gpu=True)
    assert not unguarded(page), [c.accessibleName() for c in unguarded(page)]
    manager = w.open_model_manager()  # the Models page takes the Settings page's place
    manager.show_connections()
    wizard = FirstRunWizard(AppSettings(), tmp_path / "models")
    qtbot.addWidget(wizard)
    for screen in (w, manager, wizard):
        assert not unguarded(screen), f"{screen.objectName()}: {[c.accessibleName() for c in unguarded(screen)]}"
    w.close_model_manager()


def test_a_slider_still_moves_by_the_keyboard(qtbot, styled_window):
    w = styled_window
    w.show_conversation_settings(True)
    slider = w.chat_settings.temperature.slider
    slider.setFocus()
    start = slider.value()
    qtbot.keyClick(slider, Qt.Key.Key_Right)
    assert slider.value() > start


# 3 -----------------------------------------------------------------------------------------------------------


def open_speed_card(qtbot, w) -> QWidget:
    w.status_line.speed_button.click()
    card = w.status_line.details
    qtbot.waitUntil(card.isVisible)
    return card


def test_esc_closes_the_speed_card_before_it_stops_anything(qtbot, styled_window):
    w = styled_window
    card = open_speed_card(qtbot, w)
    stops = []
    w.stop_action.triggered.connect(lambda: stops.append(True))
    w.stop_action.setEnabled(True)  # as while an answer streams: Esc is its shortcut too
    qtbot.keyClick(w.input, Qt.Key.Key_Escape)
    assert not card.isVisible()
    assert not w.status_line.speed_button.isChecked()
    assert not stops, "the Esc that closed the card also stopped the answer"


def test_a_click_outside_closes_the_speed_card(qtbot, styled_window):
    w = styled_window
    card = open_speed_card(qtbot, w)
    qtbot.mouseClick(w.chat_view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(40, 40))
    qtbot.waitUntil(lambda: not card.isVisible())
    card = open_speed_card(qtbot, w)
    qtbot.mouseClick(card, Qt.MouseButton.LeftButton, pos=QPoint(10, 10))  # inside: it stays
    assert card.isVisible()


def test_opening_settings_closes_the_speed_card(qtbot, styled_window):
    w = styled_window
    card = open_speed_card(qtbot, w)
    w.open_settings(has_gpu=False)
    assert not card.isVisible()


# 4 -----------------------------------------------------------------------------------------------------------


def test_the_keyboard_starts_in_the_message_box(qtbot, styled_window):
    w = styled_window
    qtbot.waitUntil(lambda: QApplication.focusWidget() is w.input)
    chats = w.controller.conversations.rowCount()
    qtbot.keyClicks(QApplication.focusWidget(), "hello there")
    assert w.input.toPlainText() == "hello there"
    assert w.controller.conversations.rowCount() == chats  # the space did not start a new chat


def test_the_message_box_grows_with_a_long_paragraph_and_shrinks_back(qtbot, styled_window):
    """One long paragraph wraps over several lines: the box grows with them (it counted paragraphs, so a
    long one stayed two lines high behind a scroll bar), up to its most, and back when the text goes."""
    from app.chat.input_box import MAX_LINES

    box = styled_window.input
    qtbot.keyClicks(box, "x")  # focused (its focus ring's border is part of its height)
    box.clear()
    empty = box.height()
    line = box.fontMetrics().lineSpacing()
    qtbot.keyClicks(box, "a long paragraph " * 12)
    qtbot.waitUntil(lambda: box.height() > empty + line)  # wrapped onto more lines than the empty box shows
    assert box.document().blockCount() == 1
    box.setPlainText("a long paragraph " * 400)
    qtbot.waitUntil(lambda: box.height() >= empty + (MAX_LINES - 2) * line)
    tallest = box.height()
    box.setPlainText("a long paragraph " * 800)
    assert box.height() == tallest  # at its most it scrolls instead
    box.clear()
    qtbot.waitUntil(lambda: box.height() == empty)


# 5 -----------------------------------------------------------------------------------------------------------


def test_every_header_control_and_slider_shows_a_focus_ring(qtbot, styled_window):
    w = styled_window
    w.show_conversation_settings(True)
    QApplication.processEvents()
    for widget in (
        w.model_button,
        w.conversation_settings_button,
        w.header.export_button,
        w.chat_settings.temperature.slider,
        w.status_line.speed_button,
        w.sidebar.app_menu_button,
        w.sidebar.models_button,
    ):
        focused, plain = grab_with_and_without_focus(qtbot, widget)
        assert focused != plain, f"{widget.accessibleName()}: no visible focus"


def test_the_round_send_button_gets_a_round_ring(qtbot, styled_window):
    w = styled_window
    button = w.send_button
    focused, plain = grab_with_and_without_focus(qtbot, button)
    assert focused != plain, "no visible focus on the send button"
    side = focused.width() - 1
    for x, y in ((0, 0), (side, 0), (0, side), (side, side), (2, 2)):  # outside the circle: untouched
        assert focused.pixelColor(x, y) == plain.pixelColor(x, y), f"a square ring at ({x}, {y})"


# 6, 8, 9, 10: the keyboard in editing, the chat settings panel, the sidebar and the Settings page -----------


def test_a_sent_message_is_edited_by_the_keyboard(qtbot, styled_window):
    w = styled_window
    ready(w.bridge)
    answered(w)
    mine = w.chat_view.widgets[0]
    mine.start_editing()
    editor = mine.editor
    qtbot.waitUntil(editor.hasFocus)
    assert editor.textCursor().position() == len("first question")  # the caret at the end
    qtbot.keyClick(editor, Qt.Key.Key_Escape)
    assert mine.editor is None and w.controller.messages.rows[0].content == "first question"
    mine.start_editing()
    qtbot.keyClicks(mine.editor, " again")
    qtbot.keyClick(mine.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)  # a new line, not sent
    assert mine.editor is not None
    qtbot.keyClick(mine.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: w.controller.messages.rows[0].content == "first question again")


def test_ctrl_shift_s_and_esc_close_chat_settings(qtbot, styled_window):
    w = styled_window
    qtbot.keyClick(w.input, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert w.chat_settings.isVisible()
    qtbot.keyClick(
        w.chat_settings.temperature.slider,
        Qt.Key.Key_S,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    assert not w.chat_settings.isVisible()
    w.show_conversation_settings(True)
    qtbot.keyClick(w.chat_settings.temperature.slider, Qt.Key.Key_Escape)
    assert not w.chat_settings.isVisible() and not w.conversation_settings_button.isChecked()
    qtbot.waitUntil(w.input.hasFocus)


def test_rename_and_delete_are_off_while_a_search_hides_the_open_chat(qtbot, styled_window):
    w = styled_window
    ready(w.bridge)
    answered(w, "apples and pears")
    assert w.rename_action.isEnabled() and w.delete_action.isEnabled()
    w.sidebar.search.setText("zebra")
    qtbot.waitUntil(lambda: not w.rename_action.isEnabled())
    assert not w.delete_action.isEnabled()
    w.sidebar.search.setText("apples")
    qtbot.waitUntil(w.rename_action.isEnabled)
    assert w.delete_action.isEnabled()


@pytest.mark.parametrize("key", ["enter", "ctrl+s"])
def test_the_settings_page_saves_by_the_keyboard(qtbot, styled_window, key):
    w = styled_window
    page = w.open_settings(has_gpu=False)
    page.target.edit.setFocus()
    if key == "enter":
        qtbot.keyClick(page.target.edit, Qt.Key.Key_Return)
    else:
        qtbot.keyClick(page.target.edit, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: w.settings_page is None)
    assert w.paths.settings_file.exists()


def test_enter_on_cancel_cancels_the_settings_page(qtbot, styled_window):
    w = styled_window
    page = w.open_settings(has_gpu=False)
    page.cancel_button.setFocus()
    qtbot.keyClick(page.cancel_button, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.settings_page is None)
    assert not w.paths.settings_file.exists()
