"""Executing the streaming schedule: a ring of device slots fed from the host weight store.

`LayerStreamer.run(layers)` walks `plan_pass` (core.offload.schedule) and yields each decoder layer
module, bound to the bytes it must run on, in order. On CUDA:

- copies run on a dedicated copy stream; `loaded[s]` is recorded after each copy into slot s and the
  compute stream waits on it right before the layer that uses s;
- `released[s]` is recorded on the compute stream after that layer, and the next copy into s waits on it,
  so a slot is overwritten only after the compute that read it has finished;
- nothing in a pass waits on the host (no synchronize, no .item()).

After a pass the first layers of the next one are copied right away (`prefetch`, automatic by default), so
the copies overlap the draft model's search. On the CPU the same plan runs with synchronous copies between
host buffers (used by tests to check the ring logic end to end), or, by default, nothing streams at all and
every layer is bound straight to the host store.

Streamed layers the host store could not page-lock copy from a pinned staging ring (core.offload.staging)
when one is given: the ring hands over the layer's bytes in a locked slot, and after the copy is issued it
refills that slot, once the copy engine has read it, with the next staged layer.

Resident layers are bound to `resident_block`, a block on the device the loader filled straight from the
checkpoint: they have no copy in the host store (which holds the streamed layers only).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from core.offload.layout import LayerBinding, LayerLayout
from core.offload.schedule import (
    Action,
    Compute,
    Copy,
    check_plan,
    plan_pass,
    plan_prefetch,
    ring_size,
    streamed_layers,
)
from core.offload.staging import StagingRing
from core.offload.weight_store import HostWeightStore, LayerBlock


class LayerStreamer:
    """Keeps `resident` layers on `device` for good and streams the others through `n_slots` ring slots.

    layers: the model's decoder layer modules (built on the meta device; their tensors are bound here).
    store: the host block of the streamed layers. resident_block: the block holding the resident layers
    (on the device; on a CPU run without streaming, the host block of every layer); needed when any are.
    stream: False on the CPU means "no ring, every layer is resident in host RAM" (the in-RAM case).
    record_trace: keep the executed actions in `self.trace` (tests).
    ring: the staging ring for the streamed layers the store did not lock (None: they copy from pageable memory).
    """

    def __init__(
        self,
        store: HostWeightStore,
        layers: nn.ModuleList,
        resident: Sequence[int],
        n_slots: int,
        device: torch.device | str,
        stream: bool = True,
        auto_prefetch: bool = True,
        record_trace: bool = False,
        resident_block: LayerBlock | None = None,
        ring: StagingRing | None = None,
    ) -> None:
        self.store = store
        self.device = torch.device(device)
        self.n_layers = len(layers)
        self.bindings = [LayerBinding(layer, store.layouts[i]) for i, layer in enumerate(layers)]
        self.auto_prefetch = auto_prefetch
        self.trace: list[Action] | None = [] if record_trace else None
        if not stream:
            if self.device.type != "cpu":
                raise ValueError("on a GPU the offloaded layers must stream (stream=True)")
            resident = range(self.n_layers)
        self.resident = tuple(sorted(set(resident)))
        self.streamed = streamed_layers(self.n_layers, self.resident)
        self.n_slots = ring_size(n_slots, len(self.streamed))
        self.slot_bytes = max((store.layouts[i].nbytes for i in self.streamed), default=0)
        self._prefetched = 0
        self._plans: dict[int, tuple[Action, ...]] = {}
        # slot -> id(layout) -> views (the loader shares one layout object between identical layers)
        self._slot_views: list[dict[int, list[torch.Tensor]]] = [{} for _ in range(self.n_slots)]
        self._cuda = self.device.type == "cuda"
        self.resident_bytes = self._place_resident_layers(resident_block)
        self.slots = [torch.empty(self.slot_bytes, dtype=torch.uint8, device=self.device) for _ in range(self.n_slots)]
        self.staged = tuple(i for i in self.streamed if i not in store.pinned_layers) if ring is not None else ()
        self.ring = ring if self.staged else None
        if self.ring is not None:
            self.ring.start(store.layer_bytes, self.staged, self.device)
        if self._cuda:
            self.copy_stream = torch.cuda.Stream(self.device)
            self.loaded = [torch.cuda.Event() for _ in range(self.n_slots)]
            self.released = [torch.cuda.Event() for _ in range(self.n_slots)]

    # --- what the plan costs ---------------------------------------------------------------------------

    @property
    def bytes_streamed_per_pass(self) -> int:
        return sum(self.store.layouts[i].nbytes for i in self.streamed)

    @property
    def device_bytes(self) -> int:
        """Device memory held for layer weights: resident layers plus ring slots (0 when bound to the store)."""
        if self.device.type == "cpu" and not self.streamed:
            return 0
        return self.resident_bytes + self.n_slots * self.slot_bytes

    # --- setup -----------------------------------------------------------------------------------------

    def _place_resident_layers(self, block: LayerBlock | None) -> int:
        """Bind resident layers once to their block; returns the block's bytes."""
        if not self.resident:
            return 0
        if block is None or any(i not in block for i in self.resident):
            raise ValueError("resident layers need a block that holds them (resident_block)")
        for i in self.resident:
            self.bindings[i].bind(block.layouts[i].views(block.layer_bytes(i)))
        self._resident_block = block
        return block.nbytes

    def _views(self, slot: int, layout: LayerLayout) -> list[torch.Tensor]:
        cached = self._slot_views[slot].get(id(layout))
        if cached is None:
            cached = self._slot_views[slot][id(layout)] = layout.views(self.slots[slot][: layout.nbytes])
        return cached

    # --- executing the plan ----------------------------------------------------------------------------

    @property
    def staged_bytes_per_pass(self) -> int:
        """Of the streamed bytes, those that go through the staging ring."""
        return sum(self.store.layouts[i].nbytes for i in self.staged)

    def _copy(self, action: Copy) -> None:
        ring_slot = None
        if self.ring is not None and action.layer not in self.store.pinned_layers:
            ring_slot, source = self.ring.acquire(action.layer)
        else:
            source = self.store.layer_bytes(action.layer)
        target = self.slots[action.slot][: source.numel()]
        if self._cuda:
            with torch.cuda.stream(self.copy_stream):
                self.copy_stream.wait_event(self.released[action.slot])
                target.copy_(source, non_blocking=True)
                self.loaded[action.slot].record(self.copy_stream)
                if ring_slot is not None:
                    self.ring.release(ring_slot, self.copy_stream)
        else:  # the same asynchronous copy call as on CUDA (a CPU runs it at once)
            target.copy_(source, non_blocking=True)
            if ring_slot is not None:
                self.ring.release(ring_slot)
        if self.trace is not None:
            self.trace.append(action)

    def _acquire(self, action: Compute) -> None:
        if action.slot is not None:
            if self._cuda:
                torch.cuda.current_stream(self.device).wait_event(self.loaded[action.slot])
            self.bindings[action.layer].bind(self._views(action.slot, self.store.layouts[action.layer]))
        if self.trace is not None:
            self.trace.append(action)

    def _release(self, action: Compute) -> None:
        if action.slot is not None and self._cuda:
            self.released[action.slot].record(torch.cuda.current_stream(self.device))

    def _abort(self) -> None:
        """A pass stopped half way: forget prefetch state; later copies wait for all queued compute."""
        self._prefetched = 0
        if self._cuda:
            for event in self.released:
                event.record(torch.cuda.current_stream(self.device))

    def plan(self) -> tuple[Action, ...]:
        """The plan the next pass will follow (depends on whether a prefetch was issued)."""
        plan = self._plans.get(self._prefetched)
        if plan is None:
            plan = plan_pass(self.n_layers, self.resident, self.n_slots, self._prefetched)
            prefetched = plan_prefetch(self.n_layers, self.resident, self.n_slots)[: self._prefetched]
            check_plan(plan, self.n_layers, {c.slot: c.layer for c in prefetched})  # once per plan, O(layers)
            self._plans[self._prefetched] = plan
        return plan

    def run(self, layers: nn.ModuleList) -> Iterator[nn.Module]:
        """Yield layers 0..L-1 in order, each bound to its weights; copies are issued around them."""
        plan = self.plan()
        self._prefetched = 0
        finished = False
        try:
            for action in plan:
                if isinstance(action, Copy):
                    self._copy(action)
                    continue
                self._acquire(action)
                yield layers[action.layer]
                self._release(action)
            finished = True
        finally:
            if not finished:
                self._abort()
        if self.auto_prefetch:
            self.prefetch()

    def prefetch(self) -> None:
        """Start copying the first streamed layers of the next pass (no-op if already done or nothing streams)."""
        if self._prefetched or not self.streamed:
            return
        copies = plan_prefetch(self.n_layers, self.resident, self.n_slots)
        for action in copies:
            self._copy(action)
        self._prefetched = len(copies)
