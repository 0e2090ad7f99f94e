"""Wall-clock timing that means something on an asynchronous device."""

from __future__ import annotations

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued CUDA work so a perf_counter reading covers it; a no-op on the CPU.

    Deliberate host sync: used only around whole forwards to attribute time to draft vs target.
    """
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
