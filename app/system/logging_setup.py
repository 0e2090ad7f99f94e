"""Logging for the app: a rotating file in the user log dir, Qt messages included (Qt's critical and fatal
messages also go to stderr, so a start-up abort is never silent).

`setup_logging` is idempotent per log file and returns the handler, so tests can remove it again.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from core.system.private_files import private_file, private_folder

MAX_BYTES = 2 * 1024 * 1024
BACKUP_COUNT = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s]: %(message)s"

_qt_handler_installed = False


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files (the current one and each new one after a rollover) are 0600: the log
    quotes errors that can carry what the user typed."""

    def _open(self):  # logging.FileHandler's hook
        private_file(Path(self.baseFilename))
        return super()._open()


def setup_logging(log_file: Path, level: int = logging.INFO) -> logging.Handler:
    """Send the `app` and `core` loggers to a rotating `log_file`; route Qt's warnings there too."""
    private_folder(log_file.parent)
    root = logging.getLogger()
    for handler in root.handlers:
        if (
            isinstance(handler, logging.handlers.RotatingFileHandler)
            and Path(handler.baseFilename) == log_file.resolve()
        ):
            return handler
    handler = PrivateRotatingFileHandler(log_file, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)
    _install_qt_message_handler()
    logging.getLogger(__name__).info("logging to %s", log_file)
    return handler


def remove_logging(handler: logging.Handler) -> None:
    logging.getLogger().removeHandler(handler)
    handler.close()


def install_excepthook() -> None:
    """Log uncaught exceptions (in the UI thread's slots too) before Python prints them."""
    previous = sys.excepthook

    def hook(kind, value, tb):  # noqa: ANN001 - sys.excepthook signature
        logging.getLogger("app").critical("uncaught exception", exc_info=(kind, value, tb))
        previous(kind, value, tb)

    sys.excepthook = hook


def _install_qt_message_handler() -> None:
    global _qt_handler_installed
    if _qt_handler_installed:
        return
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    qt_log = logging.getLogger("qt")
    levels = {
        QtMsgType.QtDebugMsg: logging.DEBUG,
        QtMsgType.QtInfoMsg: logging.INFO,
        QtMsgType.QtWarningMsg: logging.WARNING,
        QtMsgType.QtCriticalMsg: logging.ERROR,
        QtMsgType.QtFatalMsg: logging.CRITICAL,
    }

    def handler(kind, context, message):  # noqa: ANN001 - Qt's signature
        level = levels.get(kind, logging.WARNING)
        qt_log.log(level, "%s", message)
        if level >= logging.ERROR:  # Qt's own handler prints these; a fatal one is the last thing we see
            print(f"Qt: {message}", file=sys.stderr, flush=True)

    qInstallMessageHandler(handler)
    _qt_handler_installed = True
