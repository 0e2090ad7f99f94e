"""Wall-clock timing that means something on an asynchronous device."""

from __future__ import annotations

import time

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued CUDA work so a perf_counter reading covers it; a no-op on the CPU.

    Deliberate host sync, and a whole-device one (it waits for the copy stream's prefetch too): used only
    by measurements (the auto-tuner's cost model), never in the decoding loop.
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
        """Total seconds of the timed blocks (on CUDA: waits for the last one to finish, so the decoding loop
        reads it after the pass's host read, when it is finished already)."""
        if self._events:
            self._events[-1][1].synchronize()  # deliberate, once: all blocks' events are then readable
            self._seconds += sum(start.elapsed_time(end) for start, end in self._events) / 1000.0
            self._events.clear()
        return self._seconds


class PassClock:
    """Timestamps of one pass (start, after drafting, end) that make the host wait for nothing.

    On CUDA each mark is an event on the current stream; `intervals()` is meant to be called after the pass's
    one host read, which has already waited for the compute stream, so reading the events waits no more. On
    the CPU, where work is synchronous, perf_counter is exact.
    """

    def __init__(self, device: torch.device | str) -> None:
        self._cuda = torch.device(device).type == "cuda"
        self._marks: list = []
        self.mark()

    def mark(self) -> None:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())

    def intervals(self) -> list[float]:
        """Seconds between consecutive marks."""
        if self._cuda:
            self._marks[-1].synchronize()  # already complete after the pass's read: returns at once
            return [a.elapsed_time(b) / 1000.0 for a, b in zip(self._marks, self._marks[1:])]
        return [b - a for a, b in zip(self._marks, self._marks[1:])]
