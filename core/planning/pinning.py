"""How much host memory the weight store can page-lock, and what the rest costs: pure arithmetic, no torch.

A streamed layer copies to the GPU at the pinned rate when its bytes are page-locked. Where the system caps
locking (Windows' WDDM driver at about half of RAM and often far less, WSL2 at under 1 GiB: engineering
facts), the layers past the cap go through a small pinned staging ring (core.offload.staging): worker threads
copy each into a free ring slot from ordinary RAM while the copy engine moves the slot before it, so such a
layer costs the slower of the two rates instead of a pageable copy's (about a third of the pinned rate).

The loader (core.offload.loader) and the fit (core.models.fit) read the same functions here: the cap a
person set (SPECEXEC_PIN_LIMIT_GB), the platform's cap estimated before a load, the ring's depth from the
measured fill and copy rates and the rate a layer stages at (the speed model, core.models.speed.CopyPaths,
prices the pinned and staged parts of a pass with them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from core.errors import InvalidSettingError
from core.system.env import PIN_LIMIT_ENV

GB = 1e9
GIB = 1024**3
# A limit above this is a typo, not a machine (1 PB of RAM).
MAX_PIN_LIMIT_GB = 1e6
# Windows (WDDM) lets a program lock about this share of RAM at best (engineering facts).
WINDOWS_LOCKABLE_SHARE = 0.5
# WSL2 locked 0.75-1 GiB in 2026 reports: the low end, so a plan made with it is not optimistic.
WSL_LOCKABLE_BYTES = int(0.75 * GIB)
# A pageable copy's rate as a share of a pinned copy's: 9.6 GB/s against 25-32 pinned (2026 reports, RTX 3090
# under Windows 11; not measured here). Used where the rate was not measured on the card.
PAGEABLE_SHARE = 0.35
# Host memcpy of one worker thread from ordinary RAM into a pinned slot, where it was not measured: an
# assumption (a desktop's single-thread copy runs 8-20 GB/s), named as such where it is used.
ASSUMED_FILL_BYTES_PER_SECOND = 8e9
# The ring: one slot copying while the others fill; more slots than this add pinned memory, not speed.
MIN_RING_DEPTH, MAX_RING_DEPTH = 2, 4


def parse_pin_limit(text: str | None) -> int | None:
    """Bytes from a limit in GB (10^9 bytes) as SPECEXEC_PIN_LIMIT_GB or `--pin-limit-gb` give it; None for
    no limit (unset or blank). Raises InvalidSettingError for anything else than a finite number from 0 to
    MAX_PIN_LIMIT_GB, in words that say what to write."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text.strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= MAX_PIN_LIMIT_GB:
        raise InvalidSettingError(
            f"{PIN_LIMIT_ENV} must be a number of gigabytes from 0 to {MAX_PIN_LIMIT_GB:.0f} (for example 2 or "
            f"0.5), not {text[:40]!r}: leave it unset to lock as much as the system allows"
        )
    return int(value * GB)


def pin_limit_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """The limit SPECEXEC_PIN_LIMIT_GB sets (None: unset). Raises InvalidSettingError as `parse_pin_limit`."""
    return parse_pin_limit((os.environ if environ is None else environ).get(PIN_LIMIT_ENV))


def is_wsl(proc_version: str) -> bool:
    """Whether a /proc/version text is WSL's (its kernel is built by Microsoft and says so)."""
    return "microsoft" in proc_version.lower()


def running_under_wsl(path: Path = Path("/proc/version")) -> bool:
    """This Linux runs inside WSL (False on other systems, or when /proc/version cannot be read)."""
    try:
        return is_wsl(path.read_text(errors="replace"))
    except OSError:
        return False


def platform_name(system: str, wsl: bool) -> str:
    """The system as a person names it, WSL2 apart from Linux."""
    return "WSL2" if system == "Linux" and wsl else system


def lockable_bytes(
    system: str, wsl: bool, ram_bytes: int, limit: int | None = None, measured: int | None = None
) -> int | None:
    """Host bytes a load can expect to lock before trying: the measured budget when there is one, else the
    platform's cap (Windows: WINDOWS_LOCKABLE_SHARE of RAM; WSL2: WSL_LOCKABLE_BYTES; elsewhere no cap), and
    never more than `limit` (SPECEXEC_PIN_LIMIT_GB). None: no known cap."""
    caps = [cap for cap in (limit, measured) if cap is not None]
    if measured is None:
        if system == "Windows":
            caps.append(int(WINDOWS_LOCKABLE_SHARE * ram_bytes))
        elif platform_name(system, wsl) == "WSL2":
            caps.append(WSL_LOCKABLE_BYTES)
    return min(caps) if caps else None


def ring_depth(copy_bytes_per_second: float, fill_bytes_per_second: float) -> int:
    """Slots of the staging ring: one slot being copied while the others fill, enough filling slots (each
    with its worker) that together they keep up with the copy engine, between MIN_RING_DEPTH and
    MAX_RING_DEPTH. A rate of 0 or less (not measured: the CPU) gives the minimum."""
    if copy_bytes_per_second <= 0 or fill_bytes_per_second <= 0:
        return MIN_RING_DEPTH
    fillers = math.ceil(copy_bytes_per_second / fill_bytes_per_second)
    return max(MIN_RING_DEPTH, min(MAX_RING_DEPTH, 1 + fillers))


def staged_rate(copy_bytes_per_second: float, fill_bytes_per_second: float, depth: int) -> float:
    """Bytes/s of a layer through the ring in steady state: the copy engine's rate, or the fillers' (depth - 1
    workers filling at once) when they are slower."""
    return min(copy_bytes_per_second, max(depth - 1, 1) * fill_bytes_per_second)
