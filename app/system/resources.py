"""Files under resources/ (stylesheets, icons), indexed once by name. An unknown name fails loudly."""

from __future__ import annotations

import functools
import logging
from pathlib import Path

log = logging.getLogger(__name__)

RESOURCE_DIR = Path(__file__).resolve().parents[2] / "resources"


@functools.lru_cache(maxsize=1)
def index() -> dict[str, Path]:
    """{"style.qss": path, "icons/app.svg": path, ...}"""
    if not RESOURCE_DIR.is_dir():
        log.error("resource folder %s is missing: the app runs without its stylesheet and icons", RESOURCE_DIR)
        return {}
    return {p.relative_to(RESOURCE_DIR).as_posix(): p for p in sorted(RESOURCE_DIR.rglob("*")) if p.is_file()}


def path(name: str) -> Path:
    files = index()
    if name not in files:
        if not files:
            raise FileNotFoundError(f"resource {name!r}: the resource folder {RESOURCE_DIR} is missing")
        raise KeyError(f"unknown resource {name!r}; known: {', '.join(files)}")
    return files[name]


def text(name: str) -> str:
    try:
        return path(name).read_text(encoding="utf-8")
    except FileNotFoundError as error:  # a broken install: run unstyled rather than not at all
        log.error("%s", error)
        return ""


def icon(name: str):  # -> QIcon
    """The icon `icons/<name>.svg`. KeyError for a name that is not there."""
    from PySide6.QtGui import QIcon

    try:
        return QIcon(str(path(f"icons/{name}.svg")))
    except FileNotFoundError as error:
        log.error("%s", error)
        return QIcon()
