"""Decoder layers' weights in ONE allocation per place, each layer a contiguous byte range.

`LayerBlock` holds a chosen set of layers on one device: the host store holds the layers that stream (a
resident layer is uploaded from the checkpoint straight into a device block and has no host copy).

(Whether it fits in host RAM is checked first, by core.planning.host_memory.)

Why one allocation: PyTorch's pinned-memory allocator rounds every allocation up to a power of two (a
0.43 GB layer would take 0.54 GB, and one 35 GB block would take 64 GB). So we allocate plain memory of
the exact size (page aligned) and page-lock it in place with cudaHostRegister, which rounds nothing.
It is page-locked layer by layer (every layer starts on a page) through the load's PinBudget
(core.offload.pin_budget): where the system refuses to lock more (Windows, WSL2) or SPECEXEC_PIN_LIMIT_GB
says stop, the layers locked so far keep fast asynchronous copies and the rest stage through the pinned
ring (core.offload.staging); the load report says how much is locked. On a machine without CUDA the block
stays plain memory and nothing streams (a CPU run that streams as on a GPU counts locks without making them).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence

import torch

from core.offload.layout import LAYER_ALIGN, LayerLayout
from core.offload.pin_budget import PinBudget, pin_in_place, unpin

__all__ = ["HostWeightStore", "LayerBlock"]


class LayerBlock:
    """One allocation on `device` holding `layers` (indices into `layouts`; None = all) at exact offsets.

    layer_bytes(i): uint8 view of layer i (what one host-to-device copy moves); tensor(i, name): typed
    view of one of its tensors (what the loader writes into). Asking for a layer the block does not hold
    raises KeyError.
    """

    def __init__(
        self, layouts: Sequence[LayerLayout], layers: Iterable[int] | None = None, device: torch.device | str = "cpu"
    ) -> None:
        self.layouts = list(layouts)
        held = range(len(self.layouts)) if layers is None else sorted(set(layers))
        self.offsets: dict[int, int] = {}
        total = 0
        for index in held:
            self.offsets[index] = total
            total += self.layouts[index].nbytes
        self.nbytes = total
        self.device = torch.device(device)
        # Over-allocate one page so the block can start on a page boundary (cudaHostRegister, DMA).
        self._raw = torch.empty(total + LAYER_ALIGN, dtype=torch.uint8, device=self.device)
        start = (-self._raw.data_ptr()) % LAYER_ALIGN
        self.buffer = self._raw[start : start + total]

    def __len__(self) -> int:
        return len(self.offsets)

    def __contains__(self, index: int) -> bool:
        return index in self.offsets

    def layer_bytes(self, index: int) -> torch.Tensor:
        start = self.offsets[index]
        return self.buffer[start : start + self.layouts[index].nbytes]

    def tensor(self, index: int, name: str) -> torch.Tensor:
        entry = self.layouts[index].entry(name)
        if entry is None:
            raise KeyError(name)
        return entry.view(self.layer_bytes(index))


class HostWeightStore(LayerBlock):
    """The host block of the layers that stream, page-locked in place layer by layer through `budget` when
    `pin`, until the budget says no: `pinned_layers` are locked, `pinned_bytes` of `nbytes` (`pinned`: all).
    budget: the load's PinBudget (None: a budget of its own, no limit, locking with cudaHostRegister)."""

    def __init__(
        self,
        layouts: Sequence[LayerLayout],
        pin: bool,
        layers: Iterable[int] | None = None,
        budget: PinBudget | None = None,
    ) -> None:
        super().__init__(layouts, layers, "cpu")
        self.pinned_layers: set[int] = set()
        self.pinned_bytes = 0
        if pin:
            self.pin_layers(budget if budget is not None else PinBudget(None, pin_in_place))

    def pin_layers(self, budget: PinBudget) -> None:
        """Lock the layers in order until `budget` says no (the loader calls it after taking the staging ring)."""
        for index in self.offsets:
            layer = self.layer_bytes(index)
            if not budget.lock(layer):
                break
            if budget.locker is pin_in_place:
                weakref.finalize(self, _unpin_layer, layer.data_ptr(), self._raw)
            self.pinned_layers.add(index)
            self.pinned_bytes += layer.numel()

    @property
    def pinned(self) -> bool:
        """Every layer is page-locked (a store of no layers counts as not pinned, as before)."""
        return self.nbytes > 0 and self.pinned_bytes == self.nbytes


def _unpin_layer(pointer: int, keep_alive: torch.Tensor) -> None:
    """Unregister before the memory goes: `keep_alive` (the block itself) is only released after this."""
    unpin(pointer)
