"""Icons from the bundled Lucide set (resources/icons/lucide, ISC licence), drawn in a role's colour.

Lucide's SVGs stroke with `currentColor`, which Qt's SVG renderer does not resolve: the colour is written into
the SVG text before rendering. `ThemedIcon` keeps a button's icon in its theme's colour when the palette
changes (a theme switch), so no widget holds a stale dark-on-dark icon.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QObject, QRectF, QSize, Qt
from PySide6.QtGui import QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QAbstractButton

from app.system import resources
from app.theme.tokens import current
from core.system.locations import cache_dir

log = logging.getLogger(__name__)

SIZES = (16, 20, 24, 32, 48)  # drawn at each, so Qt never scales a bitmap up


@functools.lru_cache(maxsize=256)
def icon(name: str, color: str, filled: bool = False) -> QIcon:
    """The Lucide icon `name` stroked (and with `filled`, filled) in `color`. KeyError for an unknown name."""
    svg = resources.path(f"icons/lucide/{name}.svg").read_text(encoding="utf-8").replace("currentColor", color)
    if filled:
        svg = svg.replace('fill="none"', f'fill="{color}"')
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    result = QIcon()
    for size in SIZES:
        for scale in (1, 2):
            pixmap = QPixmap(size * scale, size * scale)
            pixmap.fill(Qt.GlobalColor.transparent)
            painter = QPainter(pixmap)
            renderer.render(painter, QRectF(0, 0, size * scale, size * scale))
            painter.end()
            pixmap.setDevicePixelRatio(scale)
            result.addPixmap(pixmap)
    return result


class ThemedIcon(QObject):
    """Gives `button` the icon `name` in the colour of `role` (a Colors field) of its palette's theme, now and
    after every palette change."""

    def __init__(
        self, button: QAbstractButton, name: str, role: str = "text", filled: bool = False, size: int = 18
    ) -> None:
        super().__init__(button)
        self.button, self.name, self.role, self.filled = button, name, role, filled
        button.setIconSize(QSize(size, size))
        button.installEventFilter(self)
        self.refresh()

    def set(self, name: str, role: str | None = None, filled: bool | None = None) -> None:
        self.name = name
        self.role = role or self.role
        self.filled = self.filled if filled is None else filled
        self.refresh()

    def refresh(self) -> None:
        colors = current()
        self.button.setIcon(icon(self.name, getattr(colors, self.role), self.filled))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh()
        return False


def themed(button: QAbstractButton, name: str, role: str = "text", filled: bool = False, size: int = 18) -> ThemedIcon:
    """Shorthand: a ThemedIcon on `button` (kept alive by the button, its parent)."""
    return ThemedIcon(button, name, role, filled, size)


def icon_file(name: str, color: str) -> str:
    """The Lucide icon `name` stroked in `color`, as an SVG file (for the stylesheet's `image: url(...)`, which
    takes a file, not a QIcon), written once in the user's cache folder ('/' separators). Not in the
    temporary folder: on Linux that is shared, so a second user of the PC could not write there (and got the
    icon in its file's own colour), and another user could have put files or links there in its place."""
    source = resources.path(f"icons/lucide/{name}.svg")
    svg = source.read_text(encoding="utf-8").replace("currentColor", color)
    folder = cache_dir() / "icons"
    target = folder / f"{name}-{hashlib.sha256(svg.encode()).hexdigest()[:12]}.svg"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            target.write_text(svg, encoding="utf-8")
    except OSError as error:  # a full or unwritable cache folder must not keep the app from starting
        log.warning("icon %s not written to %s (%s): shown in its file's own colour", name, folder, error)
        return Path(source).as_posix()
    return target.as_posix()
