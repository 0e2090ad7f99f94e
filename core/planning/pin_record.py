"""The pin budget a GPU load measured on this computer, kept for the next prediction (no torch).

A load locks the streamed layers until the system refuses once (core.offload.pin_budget): what it had locked
then is this machine's real budget, which on Windows can be far below the half of RAM the driver allows on
paper. The loader keeps it here; the fit (core.models.copy_paths) plans with it instead of the platform's
estimate. A later load that locks more without a refusal forgets it (the wall moved: other programs closed).
Like the measured speeds it is a cache: missing, damaged or over a month old reads as not measured.
"""

from __future__ import annotations

import time
from pathlib import Path

from core.system.json_cache import read_entries, write_entries

PIN_FILE = "pin-budget.json"
MAX_AGE_S = 30 * 24 * 3600


def pin_record_path() -> Path:
    from core.system.locations import cache_dir

    return cache_dir() / "autotune" / PIN_FILE


def measured_pin_budget(path: Path | None = None, now: float | None = None) -> int | None:
    """Bytes the last refused load could lock here, unless none was recorded, it is damaged or stale."""
    entries = read_entries(path or pin_record_path())
    try:
        locked, measured_at = int(entries["locked_bytes"]), float(entries["measured_at"])
    except (KeyError, TypeError, ValueError, OverflowError):  # none, or the file edited by hand
        return None
    fresh = (time.time() if now is None else now) - measured_at < MAX_AGE_S
    return locked if fresh and locked >= 0 else None


def record_load(locked_bytes: int, refused: bool, path: Path | None = None, now: float | None = None) -> None:
    """After a GPU load: keep `locked_bytes` when the system refused more; forget an older, lower wall when
    this load locked more without a refusal."""
    path = path or pin_record_path()
    if refused:
        write_entries(path, {"locked_bytes": locked_bytes, "measured_at": time.time() if now is None else now})
        return
    known = measured_pin_budget(path, now)
    if known is not None and locked_bytes > known:
        write_entries(path, {})
