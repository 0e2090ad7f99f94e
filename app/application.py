"""The one QApplication, set up the same way for the window and for `--self-test`."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app import __version__
from app.system import resources
from app.system.paths import APP_NAME


def create_application(argv: list[str]) -> QApplication:
    existing = QApplication.instance()
    if existing is not None:
        return existing  # type: ignore[return-value]
    # Qt 6 scales for high-DPI screens by itself; PassThrough keeps fractional scales (125 %, 150 %) exact.
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication(argv)
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setOrganizationName("SpecExec")
    app.setStyle("Fusion")
    app.setWindowIcon(resources.icon("app"))
    return app
