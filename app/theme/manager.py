"""Light / dark appearance. "system" follows the OS (Qt 6.5+ styleHints().colorScheme(), live); "light" and
"dark" force one. The palette and the stylesheet both come from the role tokens (app/theme/tokens.py), so
every widget, and the HTML the chat renders from the palette, changes with them."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFontInfo, QGuiApplication
from PySide6.QtWidgets import QApplication

from app.settings.schema import Theme
from app.system import resources
from app.theme.icons import icon_file
from app.theme.tokens import DARK, LIGHT, Colors, fill_stylesheet, qpalette

log = logging.getLogger(__name__)


def system_is_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def apply_colors(app: QApplication, colors: Colors) -> None:
    """Set the palette and the filled-in stylesheet of `colors` on the whole application."""
    app.setPalette(qpalette(colors))
    base_pt = QFontInfo(app.font()).pointSizeF()  # also right for a font set in pixels (pointSizeF() is -1)
    images = {"combo_arrow": icon_file("chevron-down", colors.muted_text)}
    app.setStyleSheet(fill_stylesheet(resources.text("style.qss"), colors, base_pt, images))


class ThemeManager(QObject):
    """Applies a Theme to the application and re-applies it when the system scheme changes."""

    changed = Signal(object)  # the new Colors

    def __init__(self, app: QApplication, theme: Theme = Theme.SYSTEM) -> None:
        super().__init__(app)
        self.app = app
        self.theme = theme
        self.dark = False
        app.styleHints().colorSchemeChanged.connect(self._system_changed)
        self.apply(theme)

    @property
    def colors(self) -> Colors:
        return DARK if self.dark else LIGHT

    def apply(self, theme: Theme) -> None:
        self.theme = theme
        hints = self.app.styleHints()
        if theme == Theme.SYSTEM:
            hints.unsetColorScheme()
            self.dark = system_is_dark()
        else:
            self.dark = theme == Theme.DARK
            hints.setColorScheme(Qt.ColorScheme.Dark if self.dark else Qt.ColorScheme.Light)
        apply_colors(self.app, self.colors)
        log.info("theme %s (%s)", theme.value, "dark" if self.dark else "light")
        self.changed.emit(self.colors)

    def _system_changed(self, _scheme: Qt.ColorScheme) -> None:
        if self.theme == Theme.SYSTEM and system_is_dark() != self.dark:
            self.apply(Theme.SYSTEM)
