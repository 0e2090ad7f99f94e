"""One download per model folder: an exclusive lock held for the whole download, whoever runs it (the app's
wizard, a terminal, a second app window).

The lock is a small file beside the folder (`.<folder name>.download-lock`, hidden from `models list`, so a
refused download leaves no model folder behind) holding the owner's process id, plus an operating-system lock
on that file (`flock` on Linux and macOS, `msvcrt.locking` on Windows). The system drops its lock when the
owner dies, however it dies (kill -9, a crash, a power cut), so a lock left by a dead process is simply taken
over by the next download; the process id only says who holds a live one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from core.errors import DownloadBusyError

LOCK_SUFFIX = ".download-lock"
WINDOWS_LOCK_OFFSET = 1 << 30  # msvcrt locks bytes for everyone, readers too: lock one far past the pid


def lock_path(folder: Path) -> Path:
    return folder.with_name(f".{folder.name}{LOCK_SUFFIX}")


def is_downloading(folder: Path) -> bool:
    """Whether a live process holds `folder`'s download lock now."""
    try:
        with FolderLock(folder):
            return False
    except DownloadBusyError:
        return True


class FolderLock:
    """`with FolderLock(folder):` holds the folder's download lock, or raises DownloadBusyError at once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = lock_path(folder)
        self._descriptor: int | None = None

    def __enter__(self) -> "FolderLock":
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def acquire(self) -> None:
        """Raises:
        DownloadBusyError: a live process holds the lock (its pid in the message when it wrote one).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
            if not _try_lock(descriptor):
                pid = _read_pid(descriptor)
                os.close(descriptor)
                raise DownloadBusyError(_busy_message(self.folder, pid), self.folder, pid)
            if _same_file(descriptor, self.path):
                break
            # The owner released and removed the file between our open and our lock: ours is an orphan.
            _unlock(descriptor)
            os.close(descriptor)
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        self._descriptor = descriptor

    def release(self) -> None:
        """Remove the lock file, then drop the lock (in this order, so no one locks a file about to vanish
        without noticing: see the check in `acquire`)."""
        if self._descriptor is None:
            return
        with contextlib.suppress(OSError):  # Windows cannot remove a file another process has open: it stays
            self.path.unlink()
        _unlock(self._descriptor)
        os.close(self._descriptor)
        self._descriptor = None


@contextlib.contextmanager
def folder_locks(folders: list[Path]) -> Iterator[None]:
    """Hold the locks of every folder (a pair's target and draft), or none of them."""
    with contextlib.ExitStack() as stack:
        for folder in folders:
            stack.enter_context(FolderLock(folder))
        yield


def _busy_message(folder: Path, pid: int | None) -> str:
    who = f"another process (pid {pid})" if pid is not None else "another process"
    return (
        f"this model is already downloading into {folder} in {who}. Wait for it to finish (the app shows "
        "its progress), or stop it and run the download again to resume."
    )


def _read_pid(descriptor: int) -> int | None:
    try:
        return int(os.read(descriptor, 32).decode("ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):  # the owner has not written it yet
        return None


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except OSError:
        return False


if sys.platform == "win32":
    import msvcrt

    def _try_lock(descriptor: int) -> bool:
        os.lseek(descriptor, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        finally:
            os.lseek(descriptor, 0, os.SEEK_SET)
        return True

    def _unlock(descriptor: int) -> None:
        os.lseek(descriptor, WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(descriptor: int) -> bool:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(descriptor: int) -> None:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
