"""The text size (View > Bigger text / Smaller text / Default text size, Ctrl+= / Ctrl+- / Ctrl+0, and
Settings > Text size), on a real MainWindow offscreen with the app's theme: every word follows, an answer
already on screen included, the choice is saved, and the window still fits at the largest size."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import answered, ready, recording_bridge_class, screenshot  # noqa: E402

from app.chat.message_text import CodeCard, MarkdownView  # noqa: E402
from app.settings.schema import TEXT_SIZES, AppSettings, from_dict, load_settings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes
pytestmark = [pytest.mark.qt, pytest.mark.timeout(120)]

ANSWER = "Here is **one** way:\n\n```python\nprint('hi')\n```\n\nThat is all."


def test_a_text_size_written_by_hand_is_read_as_the_nearest_offered_one():
    assert [AppSettings(text_size=size).text_percent() for size in (100, 95, 120, 1000, -5, 0)] == [
        100,
        90,
        115,
        150,
        90,
        90,
    ]
    assert from_dict(AppSettings, {"text_size": "huge"}).text_size == 100  # not a number: the default
    assert all(AppSettings(text_size=size).text_percent() == size for size in TEXT_SIZES)


@pytest.fixture()
def sized_window(qtbot, themes, app_paths):
    """A window with the app's theme and an answer with prose and a code card on screen."""
    from app.window.main_window import MainWindow

    window = MainWindow(app_paths, bridge=recording_bridge_class()(), theme=themes, confirm_delete=False)
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    ready(window.bridge)
    answered(window, "Show me a print", ANSWER)
    return window


def app_points() -> float:
    """The application font's point size as set (QFontInfo would give the size of the font file found)."""
    return QGuiApplication.font().pointSizeF()


def answer_points(window) -> tuple[float, float]:
    """The point sizes of the last answer's prose and of its code card ((0, 0) while it is made anew)."""
    body = window.chat_view.widgets[-1].body
    prose = next((part for part in body.parts if isinstance(part, MarkdownView)), None)
    code = next((part for part in body.parts if isinstance(part, CodeCard)), None)
    return (prose.font().pointSizeF(), code.view.font().pointSizeF()) if prose and code else (0.0, 0.0)


def test_ctrl_plus_minus_and_zero_step_the_text_size_everywhere_and_save_it(qtbot, sized_window, themes):
    w = sized_window
    base, (prose, code) = app_points(), answer_points(w)
    w.input.setFocus()
    for _ in range(2):
        qtbot.keyClick(w.input, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)  # Ctrl+= (no Shift)
    assert w.settings.text_size == 130 and w.toast.text() == "Text size 130%"
    assert app_points() == pytest.approx(base * 1.3, abs=0.1)
    qtbot.waitUntil(lambda: answer_points(w)[0] == pytest.approx(prose * 1.3, abs=0.1))
    assert answer_points(w)[1] == pytest.approx(code * 1.3, abs=0.1)
    assert w.chat_view.widgets[-1].body.toPlainText().startswith("Here is one way:")  # rendered again
    assert load_settings(w.paths.settings_file).text_size == 130
    qtbot.keyClick(w.input, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert w.settings.text_size == 115 and app_points() == pytest.approx(base * 1.15, abs=0.1)
    qtbot.keyClick(w.input, Qt.Key.Key_0, Qt.KeyboardModifier.ControlModifier)
    assert w.settings.text_size == 100 and w.toast.text() == "Text size 100% (the default)"
    assert app_points() == pytest.approx(base, abs=0.01)
    qtbot.waitUntil(lambda: answer_points(w) == pytest.approx((prose, code), abs=0.01))
    qtbot.keyClick(w.input, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(w.input, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)  # past the smallest
    assert w.settings.text_size == 90 and w.toast.text() == "The text is as small as it goes (90%)"


def test_at_the_largest_text_size_the_window_still_fits_at_1024_pixels(qtbot, sized_window):
    w = sized_window
    for _ in TEXT_SIZES:
        w.step_text_size(1)
    assert w.settings.text_size == max(TEXT_SIZES) and w.toast.text() == "The text is as large as it goes (150%)"
    QApplication.processEvents()
    qtbot.waitUntil(lambda: w.width() == 1024)
    buttons = [w.sidebar.new_button, w.sidebar.app_menu_button, w.sidebar.models_button, w.header.settings_button]
    for button in buttons:
        qtbot.waitUntil(lambda b=button: b.width() >= b.sizeHint().width(), timeout=5000)
    view, model = w.sidebar.view, w.controller.conversations
    assert view.viewport().rect().contains(view.menu_button_at(model.index(0))), "the … button is cut off"
    hint = w.composer.hint
    assert hint.isVisible() and hint.width() > 0
    screenshot(w, "text-size-150")


def test_settings_offer_the_text_size_and_save_applies_it(qtbot, sized_window):
    w = sized_window
    base = app_points()
    page = w.open_settings(has_gpu=False)
    combo = page.text_size.combo
    assert [combo.itemData(i) for i in range(combo.count())] == list(TEXT_SIZES)
    assert combo.currentData() == 100 and "system" in combo.currentText()
    combo.setCurrentIndex(combo.findData(115))
    page.save_button.click()
    assert w.settings.text_size == 115 and app_points() == pytest.approx(base * 1.15, abs=0.1)
    assert load_settings(w.paths.settings_file).text_size == 115


def test_the_app_starts_at_the_saved_text_size(qapp, themes):
    from app.settings.schema import Theme
    from app.theme.manager import ThemeManager

    base = app_points()
    started = ThemeManager(qapp, Theme.LIGHT, 130)
    assert started.text_size == 130 and app_points() == pytest.approx(base * 1.3, abs=0.1)
    started.set_text_size(100)
    assert app_points() == pytest.approx(base, abs=0.01)
    started.deleteLater()


def test_the_chat_settings_panel_and_first_sizes_grow_with_the_text(qtbot, sized_window):
    """At 150% the panel is as much wider (its words and controls were cut off at its old width), and a window
    of a fixed first size (the set-up wizard's) grows the same, within its screen."""
    from PySide6.QtCore import QSize
    from PySide6.QtWidgets import QComboBox, QWidget

    from app.settings.chat_panel import PANEL_WIDTH_PX
    from app.window.geometry import scaled_size

    w = sized_window
    probe = QWidget()
    qtbot.addWidget(probe)
    first = scaled_size(probe, 400, 300)
    assert first == QSize(400, 300)  # at the system's text size, as made
    assert scaled_size(probe, 99_999, 300).width() == probe.screen().availableGeometry().width()  # within it
    w.step_text_size(1)
    w.step_text_size(1)  # 130%
    assert scaled_size(probe, 400, 300).width() == round(first.width() * 1.3)
    w.resize(1400, 800)
    w.open_conversation_settings()
    panel = w.chat_settings
    qtbot.waitUntil(panel.isVisible)
    assert panel.width() == round(PANEL_WIDTH_PX * 1.3)
    combo = panel.findChild(QComboBox)
    right = combo.mapTo(panel, combo.rect().topRight()).x()
    assert right < panel.width(), "the system prompt's presets are cut off at the panel's edge"
    w.step_text_size(0)
    qtbot.waitUntil(lambda: panel.width() == PANEL_WIDTH_PX)


def test_the_text_scale_is_the_themes_text_size_and_goes_with_it(qapp, themes):
    from app.theme.manager import text_scale

    assert text_scale() == 1.0
    themes.set_text_size(150)
    assert text_scale() == 1.5
    themes.set_text_size(100)
    assert text_scale() == 1.0
