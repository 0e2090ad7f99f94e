"""Check: the three ways a streamed layer reaches the GPU, measured on this card: pinned, pageable, and
through the pinned staging ring the engine uses where the system will not lock every layer.

Windows (WDDM) and WSL2 cap page-locked memory, so part of a big model may have to stage: through the ring
(core.offload.staging) it should copy at close to the pinned rate, a pageable copy at about a third of it.
This check copies LAYERS buffers of LAYER_BYTES each, one after another, from each kind of memory, with the
engine's own ring and pin budget (SPECEXEC_PIN_LIMIT_GB does not apply here: the check locks two slots).

The ring well below the pinned rate is DEGRADED (the worker threads cannot fill as fast as the link carries:
a busy processor or slow RAM), as is a system that refuses to lock even the ring. On the processor the same
code runs with memcpy (the doctor's CPU run and the tests): the path, not the link.
"""

from __future__ import annotations

import platform
import time
from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status
from core.planning.pinning import platform_name, running_under_wsl
from core.planning.sizes import format_bytes

NAME = "pinning"
GB = 1e9
LAYER_BYTES = 256 * 1024**2  # about a 70B GPTQ layer's 0.43 GB halved: long enough copies, little memory
LAYERS = 6
# Below this share of the pinned rate the ring is called slow. A first guess: with the fill ahead of the copy
# engine the ring should reach the copy rate; not yet measured on a GPU.
RING_SHARE_LIMIT = 0.7


@dataclass(frozen=True)
class PinningMeasurement:
    """Bytes/s of LAYERS copies of `layer_bytes` each to `device` from pinned memory, pageable memory and
    through the staging ring (`ring_slots` slots, 0 when the system refused to lock them: then no ring rate)."""

    device: str
    system: str
    layer_bytes: int
    pinned_bytes_per_second: float | None
    pageable_bytes_per_second: float
    ring_bytes_per_second: float | None
    ring_slots: int


def measure(device, layer_bytes: int = LAYER_BYTES, layers: int = LAYERS) -> PinningMeasurement:
    """Measure the three rates on `device` (a CUDA GPU; the CPU runs the same code with memcpy)."""
    import torch

    from core.offload.pin_budget import PinBudget, lock_on_cpu, pin_in_place
    from core.offload.staging import StagingRing
    from core.planning.pinning import MIN_RING_DEPTH

    cuda = device.type == "cuda"
    pageable = [torch.ones(layer_bytes, dtype=torch.uint8) for _ in range(layers)]  # touched: no page faults timed
    target = torch.empty(layer_bytes, dtype=torch.uint8, device=device)
    ring = StagingRing(layer_bytes, MIN_RING_DEPTH, PinBudget(None, pin_in_place if cuda else lock_on_cpu))

    def from_pageable(k: int) -> None:
        target.copy_(pageable[k % layers])

    def from_pinned(k: int) -> None:
        target.copy_(ring.slots[0], non_blocking=True)

    def staged(k: int) -> None:
        slot, data = ring.acquire(k % layers)
        target.copy_(data, non_blocking=True)
        ring.release(slot, torch.cuda.current_stream(device) if cuda else None)

    try:
        pageable_rate = _rate(from_pageable, layers, layer_bytes, device)
        if not ring.usable:
            return PinningMeasurement(str(device), _system(), layer_bytes, None, pageable_rate, None, ring.depth)
        pinned_rate = _rate(from_pinned, layers, layer_bytes, device)
        ring.start(lambda i: pageable[i], range(layers), device)

        ring_rate = _rate(staged, layers, layer_bytes, device)
        return PinningMeasurement(
            str(device), _system(), layer_bytes, pinned_rate, pageable_rate, ring_rate, ring.depth
        )
    finally:
        ring.close()


def _rate(copy, layers: int, layer_bytes: int, device) -> float:
    """Bytes/s of copy(1) .. copy(layers) after a warm-up copy(0), waiting for the device at the end."""
    import torch

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()

    copy(0)
    sync()
    start = time.perf_counter()
    for k in range(1, layers + 1):
        copy(k)
    sync()
    return layers * layer_bytes / max(time.perf_counter() - start, 1e-9)


def _system() -> str:
    return platform_name(platform.system(), running_under_wsl())


def decide(m: PinningMeasurement) -> CheckResult:
    measured = asdict(m)
    pageable = f"pageable {m.pageable_bytes_per_second / GB:.1f} GB/s"
    wsl = " (WSL2 locks well under 1 GiB: running the app on Windows itself allows more)" if m.system == "WSL2" else ""
    if m.pinned_bytes_per_second is None or m.ring_bytes_per_second is None:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"{m.system} refused to page-lock even two buffers of {format_bytes(m.layer_bytes)}, so every "
            f"streamed layer copies from pageable memory ({pageable}){wsl}: close programs that use "
            "much memory, or restart the app.",
            measured,
        )
    pinned, ring = m.pinned_bytes_per_second, m.ring_bytes_per_second
    rates = f"pinned {pinned / GB:.1f} GB/s, through the staging ring {ring / GB:.1f} GB/s, {pageable}"
    if m.device == "cpu":
        return CheckResult(NAME, Status.PASS, f"Copies on the processor (memcpy, not a GPU link): {rates}.", measured)
    if ring < RING_SHARE_LIMIT * pinned:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"Layers that cannot stay pinned copy slowly ({rates}){wsl}: the processor cannot fill the "
            "ring as fast as the link carries: close busy programs.",
            measured,
        )
    return CheckResult(NAME, Status.PASS, f"Copies to the GPU: {rates}{wsl}.", measured)
