"""The desktop entry point opens its main window offscreen and names the default (built-in) model pair."""

import pytest

pytest.importorskip("PySide6")

from app.main import MainWindow  # noqa: E402


@pytest.mark.qt
def test_main_window_shows_builtin_pair(qtbot):
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    assert window.windowTitle() == "SpecExec Desktop"
    assert "builtin" in window.model_label.text() and "builtin-draft" in window.model_label.text()


def test_app_package_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, app.main; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], env={"QT_QPA_PLATFORM": "offscreen"}).returncode == 0
