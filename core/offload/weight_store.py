"""Decoder layers' weights in ONE allocation per place, each layer a contiguous byte range.

`LayerBlock` holds a chosen set of layers on one device: the host store holds the layers that stream (a
resident layer is uploaded from the checkpoint straight into a device block and has no host copy).

(Whether it fits in host RAM is checked first, by core.offload.host_memory.)

Why one allocation: PyTorch's pinned-memory allocator rounds every allocation up to a power of two (a
0.43 GB layer would take 0.54 GB, and one 35 GB block would take 64 GB). So we allocate plain memory of
the exact size (page aligned) and page-lock it in place with cudaHostRegister, which rounds nothing.
On a machine without CUDA the block stays plain memory and nothing streams.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Sequence

import torch

from core.offload.layout import LAYER_ALIGN, LayerLayout

log = logging.getLogger(__name__)

__all__ = ["HostWeightStore", "LayerBlock", "pin_in_place"]


def pin_in_place(buffer: torch.Tensor) -> bool:
    """Page-lock an existing CPU tensor's memory with cudaHostRegister. Returns False (and logs) on failure:
    copies then still work, but as slower pageable copies."""
    if not torch.cuda.is_available():
        return False
    try:
        cudart = torch.cuda.cudart()
        status = int(cudart.cudaHostRegister(buffer.data_ptr(), buffer.numel() * buffer.element_size(), 0))
    except (RuntimeError, AttributeError, AssertionError) as error:  # no cudart bindings in this build
        log.warning("could not page-lock the weight store (%s); host-to-device copies will be slower", error)
        return False
    if status != 0:
        log.warning("cudaHostRegister failed with CUDA error %d; host-to-device copies will be slower", status)
        return False
    return True


def _unpin(pointer: int, keep_alive: torch.Tensor) -> None:
    """Unregister before the memory goes: `keep_alive` (the block itself) is only released after this."""
    try:
        torch.cuda.cudart().cudaHostUnregister(pointer)
    except Exception:  # interpreter shutdown: nothing left to protect
        pass


class LayerBlock:
    """One allocation on `device` holding `layers` (indices into `layouts`; None = all) at exact offsets.

    layer_bytes(i): uint8 view of layer i (what one host-to-device copy moves); tensor(i, name): typed
    view of one of its tensors (what the loader writes into). Asking for a layer the block does not hold
    raises KeyError.
    """

    def __init__(self, layouts: Sequence[LayerLayout], layers: Iterable[int] | None = None,
                 device: torch.device | str = "cpu") -> None:
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
    """The host block of the layers that stream, page-locked in place when `pin` (and CUDA is there)."""

    def __init__(self, layouts: Sequence[LayerLayout], pin: bool, layers: Iterable[int] | None = None) -> None:
        super().__init__(layouts, layers, "cpu")
        self.pinned = pin_in_place(self.buffer) if pin and self.nbytes > 0 else False
        if self.pinned:
            weakref.finalize(self, _unpin, self.buffer.data_ptr(), self._raw)
