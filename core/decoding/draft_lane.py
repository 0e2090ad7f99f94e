"""The draft's own stream, so a shadow search runs on the GPU while the target's pass runs on its stream.

Ordering is by events only, never by a whole-device wait: `mark()` records where the shadow may start on the
current (compute) stream (after the main search, before the target's pass is issued); work issued inside
`run()` goes on the draft's stream after that mark; `join()` makes the current stream wait for everything
issued on the draft's stream so far, and tells the caching allocator that the tensors handed over are used
there. Off CUDA (a CPU, or the meta device standing in for a GPU) there is one stream and every call is a
no-op: the shadow then runs in sequence after the target, with the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class DraftLane:
    def __init__(self, device: torch.device | str) -> None:
        device = torch.device(device)
        self._cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self._cuda else None
        self._start: torch.cuda.Event | None = None

    def mark(self) -> None:
        """Where the next `run()` starts: everything issued on the current stream so far."""
        if self._cuda:
            self._start = torch.cuda.Event()
            self._start.record()

    @contextmanager
    def run(self) -> Iterator[None]:
        """Issue the block's work on the draft's stream, after the last `mark()` (after everything issued on
        the current stream, when none was made since the last run)."""
        if not self._cuda:
            yield
            return
        if self._start is None:
            self.mark()
        self.stream.wait_event(self._start)
        self._start = None
        with torch.cuda.stream(self.stream):
            yield

    def join(self, *tensors: torch.Tensor) -> None:
        """The current stream waits for the draft's stream; `tensors` (made there) are used on it from now on."""
        if not self._cuda:
            return
        done = torch.cuda.Event()
        done.record(self.stream)
        current = torch.cuda.current_stream(self.stream.device)
        current.wait_event(done)
        for tensor in tensors:
            tensor.record_stream(current)
