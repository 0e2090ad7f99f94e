"""The app's dialogs in its theme (issue 42 item 23), on a real MainWindow offscreen: the export chooser is
Qt's own, in the dark palette, while the theme is dark (the desktop's ignores the app's colours), the
desktop's own in the light theme; the About card carries the app's logo."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtGui import QPalette  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QLabel  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import recording_bridge_class, screenshot  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, themes
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


@pytest.fixture()
def window(qtbot, themes, app_paths):
    from app.window.main_window import MainWindow

    window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    cid = window.store.create_conversation("Weekend trip ideas")
    window.store.add_message(cid, "user", "Where to go in May?")
    window.controller.conversations.refresh()
    window.controller.open_conversation(cid)
    window.show()
    qtbot.waitExposed(window)
    return window


@pytest.mark.parametrize("theme_name", ["dark", "light"])
def test_the_export_chooser_follows_the_theme(qtbot, themes, window, tmp_path, theme_name):
    from app.settings.schema import Theme

    themes.apply(Theme(theme_name))
    seen: dict[str, object] = {}
    target = tmp_path / "trip.md"

    def look_and_save() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, QFileDialog)
        seen["qt_drawn"] = dialog.testOption(QFileDialog.Option.DontUseNativeDialog)
        seen["base"] = dialog.palette().color(QPalette.ColorRole.Base).lightness()
        dialog.selectFile(str(target))
        screenshot(dialog, f"export-chooser-{theme_name}")
        dialog.accept()

    QTimer.singleShot(0, look_and_save)
    window.export_conversation_dialog("markdown")
    assert seen["qt_drawn"] is (theme_name == "dark")
    if theme_name == "dark":
        assert seen["base"] < 128, "Qt's chooser is light in the dark theme"
    assert (tmp_path / "trip.md").read_text(encoding="utf-8").count("Where to go in May?") == 1


def test_the_about_card_shows_the_logo(qtbot, window):
    box = window.about()
    qtbot.waitUntil(box.isVisible)
    logo = box.findChild(QLabel, "aboutLogo")
    assert logo is not None and not logo.pixmap().isNull() and logo.pixmap().width() >= 48
    assert box.layout().indexOf(logo) == 0  # above the title
    screenshot(box, "about")
    box.reject()
