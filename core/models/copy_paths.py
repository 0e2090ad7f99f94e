"""How the streamed layers will reach the GPU where the system caps page-locked memory (Windows, WSL2, a
measured cap, SPECEXEC_PIN_LIMIT_GB): the share that stays pinned, the staging ring's depth and rate, or
pageable copies, and what that means in words. Pure arithmetic, no torch."""

from __future__ import annotations

from core.errors import InvalidSettingError
from core.hardware.description import HardwareDescription
from core.models.speed import CopyPaths
from core.planning.pin_record import measured_pin_budget
from core.planning.pinning import (
    ASSUMED_FILL_BYTES_PER_SECOND,
    MIN_RING_DEPTH,
    PAGEABLE_SHARE,
    lockable_bytes,
    pin_limit_from_env,
    platform_name,
    ring_depth,
    staged_rate,
)
from core.planning.sizes import format_bytes


def copy_paths(
    layer_bytes: int,
    streamed_bytes: int,
    hw: HardwareDescription,
    rate: float,
    limit: int | None = None,
    measured: int | None = None,
) -> tuple[CopyPaths, str | None]:
    """How the streamed layers will copy, as the loader will place them (core.offload.loader): the system's cap
    on locked memory (`measured`: what a load on this computer could lock before the system refused,
    core.planning.pin_record; else Windows about half of RAM, WSL2 under 1 GiB: core.planning.pinning) and `limit`
    (SPECEXEC_PIN_LIMIT_GB when None and set) decide what stays pinned; the staging ring is taken first, at
    the depth the copy rate and the assumed fill rate ask for, where the cap leaves room for it; the rest
    copies through it, or from pageable memory without one. Returns the paths and, when part stages, what
    that means in words."""
    system, wsl = hw.platform.get("system", ""), hw.platform.get("wsl") == "yes"
    limit = limit if limit is not None else _env_pin_limit()
    cap = lockable_bytes(system, wsl, hw.ram.total_bytes, measured=measured)
    if streamed_bytes <= 0 or all(c is None or c >= streamed_bytes for c in (cap, limit)):
        return CopyPaths(rate, rate), None
    depth = ring_depth(rate, ASSUMED_FILL_BYTES_PER_SECOND)
    if cap is not None:
        depth = min(depth, cap // max(layer_bytes, 1))
    if depth >= MIN_RING_DEPTH:
        staged = staged_rate(rate, ASSUMED_FILL_BYTES_PER_SECOND, depth)
        how = (
            f"through a staging ring of {depth} pinned buffers (~{staged / 1e9:.0f} GB/s, estimated from an "
            f"assumed {ASSUMED_FILL_BYTES_PER_SECOND / 1e9:.0f} GB/s per filling thread)"
        )
    else:
        depth, staged = 0, rate * PAGEABLE_SHARE
        how = f"from pageable memory (~{staged / 1e9:.0f} GB/s, estimated: no room even for the staging ring)"
    store = streamed_bytes if cap is None else max(0, cap - depth * layer_bytes)
    store = store if limit is None else min(store, limit)
    share = min(1.0, store / streamed_bytes)
    where = platform_name(system, wsl)
    if limit is not None and limit == store:
        why = f"SPECEXEC_PIN_LIMIT_GB caps locking at {limit / 1e9:.1f} GB"
    elif measured is not None:
        why = f"{where} let the last load here lock only {format_bytes(measured)}"
    elif where == "WSL2":
        why = "WSL2 lets a program lock under 1 GiB of memory (the app on Windows itself may lock more)"
    else:
        why = f"{where} lets a program lock only about half of the memory"
    return (
        CopyPaths(rate, staged, share),
        f"{why}, so {format_bytes((1 - share) * streamed_bytes)} of the model copies to the GPU {how}",
    )


def measured_pin_budget_here(hw: HardwareDescription) -> int | None:
    """The budget a load measured on this computer (a description from a fixture file is another machine)."""
    return measured_pin_budget() if hw.source == "probe" else None


def _env_pin_limit() -> int | None:
    """SPECEXEC_PIN_LIMIT_GB for the prediction; a value the engine will refuse (in words, at load) predicts
    as no limit rather than breaking the prediction of every pair."""
    try:
        return pin_limit_from_env()
    except InvalidSettingError:
        return None
