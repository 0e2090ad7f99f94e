"""Small JSON caches in the user's cache folder (measured speeds, cost models): read whatever is usable,
write atomically. A cache is never the only copy of anything: a missing or damaged file reads as empty (the
figures are measured again), and a folder that cannot be written costs a measurement next time, nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.system.disk import write_text_atomically


def read_entries(path: Path) -> dict:
    """The file's top-level object, or {} when it is missing, damaged or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_entries(path: Path, entries: dict) -> None:
    """Replace the file with `entries`, whole (written beside it, then renamed); an unwritable folder is
    ignored (see the module docstring)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, json.dumps(entries, indent=1, sort_keys=True))
    except OSError:
        pass
