"""What a running part has found so far, so that a part killed at its time limit still reports it.

A part notes its findings as it goes (`note`; a callable is evaluated only when the findings are read, so a
part can note a live list once); `python -m core.bench.gpu_check` turns the `timeout` command's SIGTERM into
`PartKilled` and writes `findings()` beside the error. `say` prints a timed progress line to the part's log,
so a log shows where a slow part spent its time."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

_found: dict[str, Any] = {}
_started = time.perf_counter()


class PartKilled(BaseException):
    """The part was told to stop (SIGTERM from `timeout`). A BaseException, so that no `except Exception` in
    the code under test swallows it."""


def reset() -> None:
    """Forget what the last part noted and restart the clock (several parts in one process)."""
    global _started
    _found.clear()
    _started = time.perf_counter()


def note(**items: Any) -> None:
    """Record findings under these names (a callable: evaluated when the findings are read)."""
    _found.update(items)


def findings() -> dict[str, Any]:
    """Everything noted so far, callables evaluated."""
    return {name: value() if isinstance(value, Callable) else value for name, value in _found.items()}


def say(text: str) -> None:
    """One progress line on stderr with the seconds since the part started."""
    print(f"[{time.perf_counter() - _started:7.2f} s] {text}", file=sys.stderr, flush=True)
