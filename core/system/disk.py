"""Writes, and failed writes read the same wherever they come from: a full drive or a refused folder is a
fault of the machine the person can mend, not a bug, and must be said so in words; a file replaced is
replaced whole (`write_text_atomically`), whatever stops the write, and a rename Windows refuses for a moment
is tried again (`replace_file`).

Python raises OSError with an errno; safetensors (Rust) raises its own SafetensorError whose text ends with the
OS's code, "... No space left on device (os error 28)" (Windows: "... (os error 112)"), so both are read here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import time
from pathlib import Path

from core.system.private_files import private_file

# errno values for "no room": the drive is full, or the person's quota is spent
_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
# Windows' own codes (OSError.winerror, and what Rust prints): ERROR_DISK_FULL, ERROR_HANDLE_DISK_FULL
_FULL_WINERRORS = frozenset({112, 39})
_REFUSED_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")

SPARE_BYTES = 512 << 20  # room a big write (a download, the built-in model's copy) leaves free on the drive

# Windows refuses to rename a file, or over one, that another program holds open without sharing its deletion:
# an antivirus scanning a file just written, the search indexer, or a reader of a download's manifest (the app's
# Models page, a second process following the download), since Python opens files so. They let go within
# milliseconds to a second; pip, uv and conda try again for the same reason. ERROR_ACCESS_DENIED,
# ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION:
_BUSY_WINERRORS = frozenset({5, 32, 33})
REPLACE_PATIENCE_S = 3.0
_REPLACE_FIRST_WAIT_S = 0.02
_REPLACE_LONGEST_WAIT_S = 0.25


def is_disk_full(error: BaseException) -> bool:
    """True when `error` says the drive (or the person's quota) had no room left for a write."""
    if isinstance(error, OSError):
        return error.errno in _FULL_ERRNOS or getattr(error, "winerror", None) in _FULL_WINERRORS
    match = _RUST_OS_ERROR.search(str(error))
    return match is not None and int(match.group(1)) in (_FULL_WINERRORS if os.name == "nt" else _FULL_ERRNOS)


def is_write_refused(error: BaseException) -> bool:
    """True when `error` says the folder may not be written (permissions, a read-only drive)."""
    return isinstance(error, OSError) and error.errno in _REFUSED_ERRNOS


def existing_parent(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (what a folder about to be made would live on)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    """Bytes free on the drive that holds (or will hold) `path`."""
    return shutil.disk_usage(existing_parent(path)).free


def why_write_failed(error: BaseException, folder: Path) -> str:
    """Plain words for a write into `folder` that raised `error` (a clause: the caller adds what to do)."""
    if is_disk_full(error):
        return f"the drive holding {folder} is full"
    if is_write_refused(error):
        return f"there is no permission to write in {folder}"
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return f"writing in {folder} failed ({reason})"


def replace_file(source: Path | str, target: Path | str) -> None:
    """os.replace(source, target), tried again for up to REPLACE_PATIENCE_S while Windows says another program
    holds one of them (see _BUSY_WINERRORS); any other failure, and every failure elsewhere (where
    PermissionError has no `winerror`: a refused folder stays refused), is raised at once."""
    deadline = time.monotonic() + REPLACE_PATIENCE_S
    wait = _REPLACE_FIRST_WAIT_S
    while True:
        try:
            os.replace(source, target)
            return
        except PermissionError as error:
            if getattr(error, "winerror", None) not in _BUSY_WINERRORS or time.monotonic() + wait > deadline:
                raise
        time.sleep(wait)
        wait = min(2 * wait, _REPLACE_LONGEST_WAIT_S)


def write_text_atomically(path: Path, text: str, private: bool = False) -> None:
    """Replace `path` with `text` whole: written to a hidden temporary file beside it, then renamed over it, so
    a crash never leaves half a file. `private`: the file is 0600 before a byte is written (private_files).
    Raises the OSError of a failed write (a full drive, a refused folder), with the temporary file removed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if private:
            private_file(tmp)
        tmp.write_text(text, encoding="utf-8")
        replace_file(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
