"""The three ways a streamed layer reaches the GPU, on the lent card: pinned, pageable, and through the staging
ring (core.offload.staging) the engine uses where the system caps page-locked memory (issue 40). The
measurement is the doctor's own (core.doctor.pinning.measure), so the rate the doctor judges on a user's card
and the rate this check records are one number; the speed model's assumed ring rate
(core.planning.pinning.staged_rate) is set beside it."""

from __future__ import annotations

from dataclasses import asdict

import torch

from core.doctor.pinning import LAYER_BYTES, LAYERS
from core.doctor.pinning import measure as measure_paths
from core.planning.pinning import ASSUMED_FILL_BYTES_PER_SECOND, staged_rate

SMALL_LAYER_BYTES = 8 * 1024**2
SMALL_LAYERS = 3


def measure(device: torch.device, small: bool) -> dict:
    layer_bytes, layers = (SMALL_LAYER_BYTES, SMALL_LAYERS) if small else (LAYER_BYTES, LAYERS)
    found = measure_paths(device, layer_bytes, layers)
    result = {**asdict(found), "layers": layers}
    pinned = found.pinned_bytes_per_second
    result["modelled_ring_bytes_per_second"] = (
        None if pinned is None else staged_rate(pinned, ASSUMED_FILL_BYTES_PER_SECOND, max(found.ring_slots, 1))
    )
    result["ring_share_of_pinned"] = (
        None if pinned is None or found.ring_bytes_per_second is None else found.ring_bytes_per_second / pinned
    )
    return result
