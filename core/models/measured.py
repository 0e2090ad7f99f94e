"""What a model pair's answers run at on this computer, as measured (no torch: the app's wizard and
`specexec models recommend` read it; the engine writes it).

The engine times a few short forwards of each model when it loads a pair (core/decoding/autotune/cost_model.py) and
works out the fastest way to answer here: plain decoding or SpecExec at some tree budget. That figure,
tokens per second, is kept here per pair and kind of device, and kept again after each answer the engine
tuned (by then corrected by the passes it saw, so a load measured while the machine was busy does not stand
for a month). A prediction for the same pair on the same computer then says what was measured instead of an
estimate from the hardware's specifications, which misses what dominates a tiny model on a processor: the
fixed cost of each forward.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from core.system.json_cache import read_entries, write_entries

SPEEDS_FILE = "measured-speeds.json"
MAX_AGE_S = 30 * 24 * 3600  # as the cost models' cache: drivers, load and thermals drift


@dataclass(frozen=True)
class MeasuredSpeed:
    """tokens_per_second of the fastest way to answer (`method`: "sequential" for plain decoding, or
    "specexec" at `budget`), expected from this machine's timings and the pair's acceptance."""

    tokens_per_second: float
    method: str
    budget: int
    measured_at: float

    def age_words(self, now: float | None = None) -> str:
        days = int(((time.time() if now is None else now) - self.measured_at) // 86400)
        return "today" if days <= 0 else "yesterday" if days == 1 else f"{days} days ago"


def speeds_path() -> Path:
    from core.system.locations import cache_dir

    return cache_dir() / "autotune" / SPEEDS_FILE


def _key(target: str, draft: str | None, device: str) -> str:
    """device: "CPU" or "GPU" (a machine's speeds differ by where the models run)."""
    return json.dumps([target, draft or "", device])


def record_speed(target: str, draft: str | None, device: str, speed: MeasuredSpeed, path: Path | None = None) -> None:
    """Keep `speed` for the pair; a cache folder that cannot be written costs only the prediction."""
    path = path or speeds_path()
    entries = read_entries(path)
    entries[_key(target, draft, device)] = asdict(speed)
    write_entries(path, entries)


def measured_speed(
    target: str, draft: str | None, device: str, path: Path | None = None, now: float | None = None
) -> MeasuredSpeed | None:
    """The pair's measured speed on this computer, unless there is none, it is damaged or over a month old."""
    entry = read_entries(path or speeds_path()).get(_key(target, draft, device))
    if not isinstance(entry, dict):
        return None
    try:
        speed = MeasuredSpeed(
            float(entry["tokens_per_second"]), str(entry["method"]), int(entry["budget"]), float(entry["measured_at"])
        )
    except (KeyError, TypeError, ValueError, OverflowError):  # a file edited by hand: no figure, as if none
        return None
    fresh = (time.time() if now is None else now) - speed.measured_at < MAX_AGE_S
    return speed if fresh and 0 < speed.tokens_per_second < math.inf else None
