"""Wall-clock timing that means something on an asynchronous device."""

from __future__ import annotations

import time

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued CUDA work so a perf_counter reading covers it; a no-op on the CPU.

    Deliberate host sync: used only around whole forwards to attribute time to draft vs target.
    """
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class ForwardTimer:
    """Sums the time of the blocks run under `with timer:` without making the host wait per block.

    On CUDA each block is bracketed by two events on the current stream and `seconds()` reads them once
    (one synchronisation for all blocks); on the CPU, where work is synchronous, perf_counter is exact.
    """

    def __init__(self, device: torch.device | str) -> None:
        self._cuda = torch.device(device).type == "cuda"
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> "ForwardTimer":
        if self._cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self._events.append((start, end))
        else:
            self._started = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self._cuda:
            self._events[-1][1].record()
        else:
            self._seconds += time.perf_counter() - self._started

    def seconds(self) -> float:
        """Total seconds of the timed blocks (on CUDA: waits for the last one to finish)."""
        if self._events:
            self._events[-1][1].synchronize()  # deliberate, once: all blocks' events are then readable
            self._seconds += sum(start.elapsed_time(end) for start, end in self._events) / 1000.0
            self._events.clear()
        return self._seconds
