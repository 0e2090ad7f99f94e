"""Light / dark appearance and the text size. "system" follows the OS (Qt 6.5+ styleHints().colorScheme(),
live); "light" and "dark" force one. The palette and the stylesheet both come from the role tokens
(app/theme/tokens.py), so every widget, and the HTML the chat renders from the palette, changes with them.

The text size scales the application's font from the system's, as a browser's zoom does: every size in the
stylesheet and the chat's own fonts are relative to it, so they all follow (a message renders again on the
font change, as on a palette change)."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFont, QFontInfo, QGuiApplication
from PySide6.QtWidgets import QApplication

from app.settings.schema import DEFAULT_TEXT_SIZE, Theme
from app.system import resources
from app.theme.icons import icon_file
from app.theme.tokens import DARK, LIGHT, Colors, fill_stylesheet, qpalette

log = logging.getLogger(__name__)


TEXT_SCALE_PROPERTY = "textScale"  # the application's property where ThemeManager keeps its text size


def text_scale() -> float:
    """How much larger than the system's the application's text is (ThemeManager's text size; 1.0 where none
    was set): windows and panels of a fixed size grow with it, so their words still fit."""
    app = QGuiApplication.instance()
    scale = app.property(TEXT_SCALE_PROPERTY) if app is not None else None
    return float(scale) if isinstance(scale, (int, float)) and scale > 0 else 1.0


def system_is_dark() -> bool:
    return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark


def apply_colors(app: QApplication, colors: Colors) -> None:
    """Set the palette and the filled-in stylesheet of `colors` on the whole application."""
    app.setPalette(qpalette(colors))
    base_pt = QFontInfo(app.font()).pointSizeF()  # also right for a font set in pixels (pointSizeF() is -1)
    images = {"combo_arrow": icon_file("chevron-down", colors.muted_text)}
    app.setStyleSheet(fill_stylesheet(resources.text("style.qss"), colors, base_pt, images))


class ThemeManager(QObject):
    """Applies a Theme and a text size to the application and re-applies the theme when the system scheme
    changes."""

    changed = Signal(object)  # the new Colors

    def __init__(self, app: QApplication, theme: Theme = Theme.SYSTEM, text_size: int = DEFAULT_TEXT_SIZE) -> None:
        super().__init__(app)
        self.app = app
        self.theme = theme
        self.dark = False
        self.system_font = QFont(app.font())  # what the text size scales
        self.system_pt = QFontInfo(self.system_font).pointSizeF()  # also right for a font set in pixels
        self.text_size = DEFAULT_TEXT_SIZE
        app.styleHints().colorSchemeChanged.connect(self._system_changed)
        if text_size != DEFAULT_TEXT_SIZE:
            self._set_font(text_size)
        self.apply(theme)

    def set_text_size(self, percent: int) -> None:
        """Text at `percent` of the system's size (one of app.settings.schema.TEXT_SIZES), everywhere."""
        if percent != self.text_size:
            self._set_font(percent)
            self.apply(self.theme)

    def _set_font(self, percent: int) -> None:
        self.text_size = percent
        self.app.setProperty(TEXT_SCALE_PROPERTY, percent / 100)  # before the font: its change reads it
        font = QFont(self.system_font)
        font.setPointSizeF(self.system_pt * percent / 100)
        self.app.setFont(font)

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
