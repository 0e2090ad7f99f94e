"""Files and folders only the user can read: conversations, logs, settings and keys hold what people typed, so
they are created 0600 in 0700 folders (never readable by other accounts for a moment), and tightened when an
older version left them 0644 / 0755. On Windows the modes do nothing; the per-user profile folders already
keep other accounts out.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
FOLDER_MODE = 0o700


def private_folder(path: Path) -> Path:
    """`path` (and missing parents) created, and `path` itself set to 0700."""
    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    os.chmod(path, FOLDER_MODE)
    return path


def private_file(path: Path) -> Path:
    """`path` created empty if missing, and set to 0600 (its content untouched)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE))
    os.chmod(path, FILE_MODE)
    return path
