"""The staging ring: a few pinned buffers through which the streamed layers that could not stay pinned copy.

Where the system caps page-locked memory (Windows, WSL2, SPECEXEC_PIN_LIMIT_GB), the host store keeps the
layers it could lock pinned and the rest in ordinary RAM. A pageable copy runs at about a third of a pinned
one and blocks the host, so those layers go through this ring instead: `depth` pinned slots of one layer
each, taken before the store is locked and before the large GPU allocations (so the budget is not eaten),
filled ahead of the copy engine by `depth - 1` worker threads copying from ordinary RAM, and reused in order.

The staged layers come up in the same cyclic order every pass (the order the streamer issues their copies),
so the ring fills the next ones while the copy engine moves the current one:

    acquire(layer)  -> waits for that layer's fill (done ahead, normally), returns its slot's bytes
    release(slot)   -> after the host-to-device copy from the slot was issued: on CUDA an event recorded on
                       the copy stream, which the fill of the slot's next layer waits for in its worker
                       (never the host), so a slot is overwritten only once the copy engine has read it

A pass that stops half way (or any other order) is noticed at the next `acquire`: the ring drains its fills
and starts again at that layer. On the CPU the same code runs, the copies synchronous and in order.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

from core.offload.layout import LAYER_ALIGN
from core.offload.pin_budget import PinBudget, pin_in_place, unpin
from core.offload.weight_store import HostWeightStore
from core.planning.pinning import MIN_RING_DEPTH, ring_depth

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RingRates:
    """Bytes/s measured with the ring's first slot: `copy` from it to the device (0: not measured, the CPU),
    `fill` into it from ordinary RAM by one worker."""

    copy: float
    fill: float


class StagingRing:
    """Up to `depth` pinned slots of `slot_bytes` each, locked through `budget` (fewer when it says no).

    `usable` is False when fewer than MIN_RING_DEPTH slots could be locked: staging through one slot would
    serialise fill and copy, no better than a pageable copy. `start` binds it to the store and the order of
    the staged layers; `trace` (when `record_trace`) lists (layer, slot) of every fill in issue order.
    """

    def __init__(self, slot_bytes: int, depth: int, budget: PinBudget, record_trace: bool = False) -> None:
        self.slot_bytes = slot_bytes
        self.budget = budget
        self.slots: list[torch.Tensor] = []
        self._raw: list[torch.Tensor] = []
        self._unpins: list[weakref.finalize] = []
        self.trace: list[tuple[int, int]] | None = [] if record_trace else None
        self._pool: ThreadPoolExecutor | None = None
        self.grow(depth)

    # --- slots ------------------------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        return len(self.slots)

    @property
    def usable(self) -> bool:
        return self.depth >= MIN_RING_DEPTH

    @property
    def nbytes(self) -> int:
        return self.depth * self.slot_bytes

    def grow(self, depth: int) -> None:
        """Lock slots until there are `depth` (before `start`), stopping where the budget says no."""
        while self.depth < depth:
            raw = torch.empty(self.slot_bytes + LAYER_ALIGN, dtype=torch.uint8)
            start = (-raw.data_ptr()) % LAYER_ALIGN
            slot = raw[start : start + self.slot_bytes]
            if not self.budget.lock(slot, within_limit=False):
                return
            if self.budget.locker is pin_in_place:
                self._unpins.append(weakref.finalize(self, _unpin_slot, slot.data_ptr(), raw))
            self._raw.append(raw)
            self.slots.append(slot)

    def close(self) -> None:
        """Give the slots back (a store that got pinned whole needs no ring) and stop the workers."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.budget.give_back(self.nbytes)
        for unpin_now in self._unpins:
            unpin_now()  # a finalizer runs once: called here, it does nothing at collection
        self.slots, self._raw, self._unpins = [], [], []

    def measure(self, source: torch.Tensor, device: torch.device) -> RingRates:
        """Time one fill of slot 0 from `source` (ordinary RAM, a layer's size at most) and, on CUDA, one
        copy from the slot to `device`: the rates the ring's depth follows (core.planning.pinning)."""
        slot = self.slots[0][: source.numel()]
        source.zero_()  # first touch: page faults are not the fill rate
        slot.copy_(source)
        start = time.perf_counter()
        slot.copy_(source)
        fill = source.numel() / max(time.perf_counter() - start, 1e-9)
        if device.type != "cuda":
            return RingRates(copy=0.0, fill=fill)
        target = torch.empty(source.numel(), dtype=torch.uint8, device=device)
        target.copy_(slot, non_blocking=True)  # warm-up
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream(device)
        begin.record(stream)
        target.copy_(slot, non_blocking=True)
        end.record(stream)
        end.synchronize()
        seconds = begin.elapsed_time(end) / 1000
        del target
        return RingRates(copy=source.numel() / max(seconds, 1e-9), fill=fill)

    # --- streaming --------------------------------------------------------------------------------------

    def start(self, source: Callable[[int], torch.Tensor], order: Sequence[int], device: torch.device) -> None:
        """Stage `order` (the streamed layers the store could not lock, in copy order) cyclically; `source(i)`
        is layer i's bytes in ordinary RAM (the host store's `layer_bytes`)."""
        if not self.usable:
            raise ValueError("a staging ring needs at least two locked slots")
        if not order:
            raise ValueError("a staging ring needs layers to stage")
        self.source = source
        self.order = tuple(order)
        self._position = {layer: index for index, layer in enumerate(self.order)}
        self._cuda = device.type == "cuda"
        self.drained = [torch.cuda.Event() for _ in self.slots] if self._cuda else []
        self._pending: deque[tuple[int, int, Future]] = deque()
        self._next = 0
        self._pool = ThreadPoolExecutor(max_workers=self.depth - 1, thread_name_prefix="specexec-staging")
        weakref.finalize(self, self._pool.shutdown, wait=False)
        self._fill_from(0)

    def acquire(self, layer: int) -> tuple[int, torch.Tensor]:
        """(slot, the layer's bytes in it) once its fill is done; the copy from it is issued next."""
        if not self._pending or self._pending[0][0] != layer:
            self._restart(layer)
        _, slot, fill = self._pending.popleft()
        fill.result()  # normally done long ago; re-raises a worker's error
        return slot, self.slots[slot][: self.source(layer).numel()]

    def release(self, slot: int, stream: torch.cuda.Stream | None = None) -> None:
        """The copy from `slot` was issued (on `stream` on CUDA): refill the slot with the next layer in order
        once the copy engine has read it."""
        if self._cuda:
            self.drained[slot].record(stream)
        self._submit(slot)

    def _fill_from(self, position: int) -> None:
        self._next = position
        for slot in range(self.depth):
            self._submit(slot)

    def _submit(self, slot: int) -> None:
        layer = self.order[self._next % len(self.order)]
        self._next += 1
        if self.trace is not None:
            self.trace.append((layer, slot))
        self._pending.append((layer, slot, self._pool.submit(self._fill, layer, slot)))

    def _fill(self, layer: int, slot: int) -> None:
        """In a worker: wait until the copy engine has read the slot (never the host), then fill it."""
        if self._cuda:
            self.drained[slot].synchronize()
        source = self.source(layer)
        self.slots[slot][: source.numel()].copy_(source)

    def _restart(self, layer: int) -> None:
        """Another order than planned (a pass stopped half way): finish the fills in flight, start at `layer`."""
        if layer not in self._position:
            raise KeyError(f"layer {layer} is not staged by this ring")
        while self._pending:
            self._pending.popleft()[2].result()
        self._fill_from(self._position[layer])


def open_ring(
    store: HostWeightStore, device: torch.device, budget: PinBudget, record_trace: bool = False
) -> tuple[StagingRing | None, RingRates | None]:
    """The staging ring for `store`, locked before the store's layers: MIN_RING_DEPTH slots, the fill and
    copy rates measured with the first, then grown to the depth those rates ask for (core.planning.pinning,
    as far as the budget allows). None when the store holds no layer or fewer than two slots could be locked
    (then the layers the store cannot lock copy from pageable memory, and the load report says so)."""
    if not store.offsets:
        return None, None
    slot_bytes = max(store.layouts[i].nbytes for i in store.offsets)
    ring = StagingRing(slot_bytes, MIN_RING_DEPTH, budget, record_trace=record_trace)
    if not ring.usable:
        ring.close()
        return None, None
    rates = ring.measure(store.layer_bytes(next(iter(store.offsets))), device)
    ring.grow(ring_depth(rates.copy, rates.fill))
    return ring, rates


def _unpin_slot(pointer: int, keep_alive: torch.Tensor) -> None:
    """Unregister a slot before its memory goes (`keep_alive` is released only after this)."""
    unpin(pointer)
