"""Light / dark appearance. "system" follows the OS (Qt 6.5+ styleHints().colorScheme(), live); "light" and
"dark" force one. The palette is set explicitly too, for platforms whose style ignores the color scheme."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.system import resources
from app.settings.schema import Theme

log = logging.getLogger(__name__)


def _palette(colors: dict[QPalette.ColorRole, str], disabled_text: str) -> QPalette:
    """A palette with these colours, and greyed text for disabled widgets."""
    p = QPalette()
    for role, color in colors.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(disabled_text))
    return p


def dark_palette() -> QPalette:
    colors = {
        QPalette.ColorRole.Window: "#1f2023", QPalette.ColorRole.WindowText: "#e6e6e6",
        QPalette.ColorRole.Base: "#26282c", QPalette.ColorRole.AlternateBase: "#2f3237",
        QPalette.ColorRole.ToolTipBase: "#2f3237", QPalette.ColorRole.ToolTipText: "#e6e6e6",
        QPalette.ColorRole.PlaceholderText: "#8a8d93", QPalette.ColorRole.Text: "#e6e6e6",
        QPalette.ColorRole.Button: "#2c2e33", QPalette.ColorRole.ButtonText: "#e6e6e6",
        QPalette.ColorRole.BrightText: "#ff6b6b", QPalette.ColorRole.Highlight: "#3d7bd9",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.Link: "#7fb2ff",
        QPalette.ColorRole.Light: "#3a3d42", QPalette.ColorRole.Midlight: "#33363b",
        QPalette.ColorRole.Mid: "#4a4d53", QPalette.ColorRole.Dark: "#151618", QPalette.ColorRole.Shadow: "#000000",
    }
    return _palette(colors, disabled_text="#6f7277")


def light_palette() -> QPalette:
    """Fusion's light palette with quieter greys and a clear accent (the chat column is white, the sidebar
    a light grey)."""
    colors = {
        QPalette.ColorRole.Window: "#f3f4f6", QPalette.ColorRole.WindowText: "#1f2328",
        QPalette.ColorRole.Base: "#ffffff", QPalette.ColorRole.AlternateBase: "#f1f3f5",
        QPalette.ColorRole.ToolTipBase: "#ffffff", QPalette.ColorRole.ToolTipText: "#1f2328",
        QPalette.ColorRole.PlaceholderText: "#6e7781", QPalette.ColorRole.Text: "#1f2328",
        QPalette.ColorRole.Button: "#f6f7f9", QPalette.ColorRole.ButtonText: "#1f2328",
        QPalette.ColorRole.BrightText: "#b42318", QPalette.ColorRole.Highlight: "#2f6fdb",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.Link: "#1f5fc8",
        QPalette.ColorRole.Light: "#ffffff", QPalette.ColorRole.Midlight: "#e4e7eb",
        QPalette.ColorRole.Mid: "#c9ced6", QPalette.ColorRole.Dark: "#9aa1ab", QPalette.ColorRole.Shadow: "#6e7781",
    }
    return _palette(colors, disabled_text="#a0a6ad")


def system_is_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


class ThemeManager(QObject):
    """Applies a Theme to the application and re-applies it when the system scheme changes."""

    def __init__(self, app: QApplication, theme: Theme = Theme.SYSTEM) -> None:
        super().__init__(app)
        self.app = app
        self.theme = theme
        self.dark = False
        app.styleHints().colorSchemeChanged.connect(self._system_changed)
        self.apply(theme)

    def apply(self, theme: Theme) -> None:
        self.theme = theme
        hints = self.app.styleHints()
        if theme == Theme.SYSTEM:
            hints.unsetColorScheme()
            self.dark = system_is_dark()
            palette = dark_palette() if self.dark else light_palette()
        else:
            self.dark = theme == Theme.DARK
            hints.setColorScheme(Qt.ColorScheme.Dark if self.dark else Qt.ColorScheme.Light)
            palette = dark_palette() if self.dark else light_palette()
        self.app.setPalette(palette)
        self.app.setStyleSheet(resources.text("style.qss") + resources.text("style-dark.qss" if self.dark else "style-light.qss"))
        log.info("theme %s (%s)", theme.value, "dark" if self.dark else "light")

    def _system_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.theme == Theme.SYSTEM and system_is_dark() != self.dark:
            self.apply(Theme.SYSTEM)
