"""The Models page (issue 42 item 22): the model manager is a page of the main window in the chat's place, reached
from the sidebar (as LM Studio's and Jan's), not a modal dialog with classic tabs. Driven offscreen on a real
MainWindow with the app's stylesheet: the keyboard goes to it and back, Esc and Back return to the chat, the
sidebar stays usable, a segmented switch replaces the tabs, the wheel changes nothing, and it fits at 1024 and
1280 pixels."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication, QDialog, QTabWidget  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import control_value, grab_with_and_without_focus, screenshot, value_controls, wheel  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes, styled_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def _models_here(monkeypatch, tmp_path):
    """A computer with a 12 GB card (the catalog's fit needs one) and a models folder of its own."""
    from app_screens import HW_FIXTURE

    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(HW_FIXTURE))
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "models"))


def focused():
    return QApplication.focusWidget()


def on_models_page(w) -> bool:
    return w.model_manager is not None and w.content.currentWidget() is w.model_manager


def test_ctrl_m_opens_the_page_in_the_chats_place_and_esc_brings_the_chat_back(qtbot, styled_window):
    w = styled_window
    qtbot.waitUntil(lambda: focused() is w.input)
    qtbot.keyClick(w.input, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    assert on_models_page(w)
    page = w.model_manager
    assert not isinstance(page, QDialog) and page.window() is w  # a page of the window, not a dialog over it
    assert QApplication.activeModalWidget() is None
    assert w.sidebar.isVisible() and w.sidebar.models_button.isChecked()  # the chats stay in reach
    assert not page.findChildren(QTabWidget)  # a segmented switch, not classic tabs
    assert [b.text() for b in page.sections.buttons] == ["My models", "Download", "Connections"]
    qtbot.waitUntil(lambda: focused() is page.sections.buttons[0])  # the keyboard is on the page
    qtbot.waitUntil(lambda: bool(page.entries))
    qtbot.keyClick(focused(), Qt.Key.Key_Escape)
    assert not on_models_page(w) and w.model_manager is None
    assert not w.sidebar.models_button.isChecked()
    assert focused() is w.input  # back in the message box: typing goes on where it was


def test_tab_reaches_the_page_from_the_sidebar_and_left_right_switch_sections(qtbot, styled_window):
    w = styled_window
    page = w.open_model_manager()
    qtbot.waitUntil(lambda: bool(page.entries))
    segments = page.sections.buttons
    w.sidebar.app_menu_button.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(w.sidebar.app_menu_button, Qt.Key.Key_Tab)
    assert focused() is page.back_button  # after the sidebar: the page's first control
    qtbot.keyClick(focused(), Qt.Key.Key_Tab)
    assert focused() is segments[0]  # the chosen segment: Tab stops once on the switch, as on radio buttons
    qtbot.keyClick(focused(), Qt.Key.Key_Tab)
    assert focused() is page.installed  # then the section shown: the list of models
    qtbot.keyClick(focused(), Qt.Key.Key_Tab)
    assert focused() is page.import_button, focused().text()  # Use and Delete are off for the model in use
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is page.installed
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is segments[0]
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is page.back_button
    qtbot.keyClick(focused(), Qt.Key.Key_Backtab)
    assert focused() is w.sidebar.app_menu_button  # and back to the sidebar
    segments[0].setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(segments[0], Qt.Key.Key_Right)
    assert page.sections.currentWidget() is page.catalog_page and focused() is segments[1]
    assert segments[1].isChecked() and not segments[0].isChecked()
    qtbot.keyClick(segments[1], Qt.Key.Key_Right)
    assert page.sections.currentWidget() is page.connections
    qtbot.keyClick(segments[2], Qt.Key.Key_Right)  # the last one: stays
    assert page.sections.currentIndex() == 2 and focused() is segments[2]
    qtbot.keyClick(segments[2], Qt.Key.Key_Left)
    assert page.sections.currentWidget() is page.catalog_page
    qtbot.keyClick(focused(), Qt.Key.Key_Space)  # the focused segment pressed: nothing else changes
    assert page.sections.currentIndex() == 1
    page.back_button.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(page.back_button, Qt.Key.Key_Space)  # Back by the keyboard
    assert not on_models_page(w) and focused() is w.input


def test_back_new_chat_and_a_chat_in_the_sidebar_each_bring_the_chat_back(qtbot, styled_window):
    w = styled_window
    first = w.store.create_conversation("Trip plans")
    w.controller.conversations.refresh()
    page = w.open_model_manager()
    qtbot.mouseClick(page.back_button, Qt.MouseButton.LeftButton)
    assert not on_models_page(w)
    qtbot.mouseClick(w.sidebar.models_button, Qt.MouseButton.LeftButton)  # the sidebar's Models opens it
    assert on_models_page(w) and w.sidebar.models_button.isChecked()
    qtbot.mouseClick(w.sidebar.models_button, Qt.MouseButton.LeftButton)  # and closes it again
    assert not on_models_page(w)
    w.open_model_manager()
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert not on_models_page(w) and focused() is w.input
    w.open_model_manager()
    row = w.controller.conversations.row_of(first)
    settings = w.open_settings(has_gpu=False)  # Ctrl+M on the Settings page: it is left as Cancel leaves it
    qtbot.keyClick(settings.theme.combo, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    assert w.settings_page is None and w.pages.currentIndex() == 0 and on_models_page(w)
    w.sidebar.view.setCurrentIndex(w.controller.conversations.index(row))
    assert not on_models_page(w) and w.controller.conversation_id == first


def test_esc_on_the_page_while_an_answer_is_written_goes_back_and_stops_nothing(qtbot, styled_window):
    w = styled_window
    from app_fixtures import ready

    ready(w.bridge)
    w.send("a long answer, please")
    assert w.controller.generating and w.stop_action.isEnabled()  # Esc is the answer's Stop now
    page = w.open_model_manager()
    cancels = len([call for call in w.bridge.calls if call[0] == "cancel"])
    qtbot.keyClick(page.sections.buttons[0], Qt.Key.Key_Escape)
    assert not on_models_page(w)
    assert len([call for call in w.bridge.calls if call[0] == "cancel"]) == cancels, "Esc stopped the answer"
    assert w.controller.generating


def test_the_wheel_over_the_page_changes_no_section_selection_or_setting(qtbot, styled_window):
    w = styled_window
    w.resize(1024, 560)  # short: the catalog's list scrolls
    page = w.open_model_manager()
    qtbot.waitUntil(lambda: bool(page.entries) and bool(page.catalog_list.fits), timeout=20000)
    for index in range(page.sections.count()):
        page.sections.setCurrentIndex(index)
        QApplication.processEvents()
        controls = value_controls(page.sections.currentWidget())
        before = [control_value(c) for c in controls]
        rows = (page.installed.currentRow(), page.catalog_list.currentRow())
        for widget in [*page.sections.buttons, *controls, page.installed, page.catalog_list]:
            wheel(widget, -2)
            wheel(widget, +1)
        assert page.sections.currentIndex() == index, "the wheel switched sections"
        assert [control_value(c) for c in controls] == before
        assert (page.installed.currentRow(), page.catalog_list.currentRow()) == rows, "the wheel chose a model"
    assert w.settings == page.settings  # nothing was switched


@pytest.mark.parametrize("width", [1024, 1280])
def test_the_page_fits_the_window_at_its_width(qtbot, styled_window, width):
    w = styled_window
    w.resize(width, 700)
    qtbot.waitUntil(lambda: w.width() == width)
    page = w.open_model_manager()
    qtbot.waitUntil(lambda: bool(page.entries) and bool(page.catalog_list.fits), timeout=20000)
    for index in range(page.sections.count()):
        page.sections.setCurrentIndex(index)
        QApplication.processEvents()
        assert w.width() == width, "the Models page widened the window"
        assert w.minimumSizeHint().width() <= width
        for button in [page.back_button, *page.sections.buttons, w.sidebar.models_button, w.sidebar.app_menu_button]:
            assert button.width() >= button.sizeHint().width(), f"{button.text()!r} is clipped"
    page.sections.setCurrentIndex(0)
    QApplication.processEvents()
    for button in (page.use_button, page.delete_button, page.import_button):  # the actions are on the page
        corner = button.mapTo(w, button.rect().bottomRight())
        assert button.isVisible() and corner.x() <= w.width() and corner.y() <= w.height()
    screenshot(w, f"models-page-{width}")


def test_back_and_every_segment_show_a_focus_ring(qtbot, styled_window):
    page = styled_window.open_model_manager()
    for widget in (page.back_button, *page.sections.buttons):
        focused_image, plain = grab_with_and_without_focus(qtbot, widget)
        assert focused_image != plain, f"{widget.text()}: no visible focus"
