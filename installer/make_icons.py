"""Render resources/icons/app.svg into the icon files installers need, with Qt (no Pillow, no ImageMagick).

    python installer/make_icons.py [OUT_DIR]     # default: build/icons

Writes app-256.png (Linux .desktop / AppImage), app.ico (Windows exe and installer) and app.icns (macOS
.app): Qt's own ico and icns image plugins write the multi-size files.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "app.svg"


def render(size: int):  # -> QImage
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"cannot read {SVG} as SVG")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    return image


def write(image, path: Path, fmt: str) -> None:
    from PySide6.QtGui import QImageWriter

    writer = QImageWriter(str(path), fmt.encode())
    if not writer.write(image):
        raise SystemExit(f"cannot write {path}: {writer.errorString()}")


def main(out: Path) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    _app = QGuiApplication.instance() or QGuiApplication([])  # image plugins load through the application
    out.mkdir(parents=True, exist_ok=True)
    write(render(256), out / "app-256.png", "png")
    write(render(256), out / "app.ico", "ico")  # Qt's ico writer stores one size; Windows scales it down
    write(render(1024), out / "app.icns", "icns")
    print(f"icons written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "icons")
