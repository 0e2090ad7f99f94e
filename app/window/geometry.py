"""The window's size and place, kept between runs (beside the settings, not in them: it is not a choice the
person made in Settings, and a broken file must never cost them their settings).

The file holds Qt's own geometry record in base64 inside JSON. Anything else found there (an old format, a
hand edit, a truncated write) is ignored and the window opens at its default size; Qt itself moves a window
that would open off every screen back onto one.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSize
from PySide6.QtWidgets import QWidget

from app.theme.manager import text_scale
from core.system.disk import write_text_atomically

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 4096  # a geometry record is about 70 bytes: a bigger file is not ours


def restore_geometry(window: QWidget, path: Path) -> bool:
    """Put `window` where it was, from `path`; False (and the window as it is) when there is nothing usable."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return False
        record = json.loads(path.read_text(encoding="utf-8"))
        data = base64.b64decode(record["geometry"], validate=True)
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as error:
        log.info("window geometry in %s not used: %s", path, error)
        return False
    return bool(window.restoreGeometry(QByteArray(data)))


def save_geometry(window: QWidget, path: Path) -> None:
    """Write where `window` is now; a failure to write is logged, never raised (the window is closing)."""
    record = {"geometry": base64.b64encode(bytes(window.saveGeometry().data())).decode("ascii")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, json.dumps(record))
    except OSError as error:
        log.warning("window geometry not saved to %s: %s", path, error)


def scaled_size(window: QWidget, width: int, height: int) -> QSize:
    """A window's first size, made for the system's text size, grown with the app's (Settings > Text size) so
    its words still fit, and never more than its screen holds."""
    scale = max(1.0, text_scale())
    size = QSize(round(width * scale), round(height * scale))
    screen = window.screen()
    return size.boundedTo(screen.availableGeometry().size()) if screen is not None else size
