"""Run a blocking call (a hardware probe, a fit prediction, a folder scan) off the GUI thread and get its
result back as a signal in the GUI thread. Exceptions become the `failed` signal with their message."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)


class BackgroundCall(QObject):
    """One call on a daemon thread. Signals are queued into the thread this object lives in (the GUI's)."""

    done = Signal(object)
    failed = Signal(str)

    def __init__(self, function: Callable[[], Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._function = function
        self._thread = threading.Thread(target=self._run, name="background-call", daemon=True)

    def start(self) -> "BackgroundCall":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            result = self._function()
        except Exception as error:  # reported in the window, never a silent dead thread
            log.exception("background call failed")
            self._emit(self.failed, str(error) or type(error).__name__)
            return
        self._emit(self.done, result)

    def _emit(self, signal, value: Any) -> None:
        try:
            signal.emit(value)
        except RuntimeError:  # the window that asked was closed meanwhile (this object went with it)
            log.debug("background call finished after its window closed")
