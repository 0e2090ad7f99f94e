"""One app per set of conversations: a second SpecExec Desktop on the same data folder would write the same
database from two processes (SQLite then makes one wait, and past 5 s says "database is locked"), and each
would start its own engine. The first holds a lock file in the data folder (QLockFile: a lock whose process
died is taken over) and listens on a local socket named after the folder; a second start finds the lock,
asks the first to bring its window to the front, says so, and exits.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

LOCK_NAME = "specexec-desktop.lock"
CONNECT_MS = 2000


class SingleInstance(QObject):
    """The lock of one data folder. `activated` fires in the first app when a second one asks for its window."""

    activated = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.lock = QLockFile(str(data_dir / LOCK_NAME))
        self.lock.setStaleLockTime(0)  # never stale by age: only when its process is gone
        digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
        self.socket_name = f"specexec-desktop-{digest}"
        self._server: QLocalServer | None = None

    def acquire(self) -> bool:
        """Take the lock and listen for later starts; False when another app holds it."""
        if not self.lock.tryLock(0):
            return False
        QLocalServer.removeServer(self.socket_name)  # left behind by an app that crashed
        self._server = QLocalServer(self)
        self._server.newConnection.connect(self._second_start)
        self._server.listen(self.socket_name)
        return True

    def owner(self) -> int | None:
        """The process id holding the lock, when it can be read."""
        info = self.lock.getLockInfo()  # PySide6: (pid, host, app name), or False when it cannot be read
        pid = info[0] if isinstance(info, tuple) and info else 0
        return pid if isinstance(pid, int) and pid > 0 else None

    def bring_first_to_front(self) -> bool:
        """Ask the app holding the lock to show its window; True when it heard."""
        socket = QLocalSocket()
        socket.connectToServer(self.socket_name)
        if not socket.waitForConnected(CONNECT_MS):
            return False
        sent = socket.write(b"show\n") == 5
        while socket.bytesToWrite() and socket.waitForBytesWritten(CONNECT_MS):
            pass
        sent = sent and not socket.bytesToWrite()
        socket.disconnectFromServer()
        return sent

    def message(self, brought_to_front: bool) -> str:
        """What the second start says before it exits."""
        who = f" (process {self.owner()})" if self.owner() else ""
        then = (
            "its window was brought to the front."
            if brought_to_front
            else "switch to its window, or quit it before starting SpecExec Desktop again."
        )
        return f"SpecExec Desktop is already running with these conversations{who}: {then}"

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
        self.lock.unlock()

    def _second_start(self) -> None:
        assert self._server is not None
        connection = self._server.nextPendingConnection()
        if connection is not None:
            connection.disconnected.connect(connection.deleteLater)
        self.activated.emit()
