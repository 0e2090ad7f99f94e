"""Decoder layers' weights in ONE allocation per place, each layer a contiguous byte range.

`LayerBlock` holds a chosen set of layers on one device: the host store holds the layers that stream (a
resident layer is uploaded from the checkpoint straight into a device block and has no host copy).

(Whether it fits in host RAM is checked first, by core.planning.host_memory.)

Why one allocation: PyTorch's pinned-memory allocator rounds every allocation up to a power of two (a
0.43 GB layer would take 0.54 GB, and one 35 GB block would take 64 GB). So we allocate plain memory of
the exact size (page aligned) and page-lock it in place with cudaHostRegister, which rounds nothing.
It is page-locked layer by layer (every layer starts on a page): where the system refuses to lock more
(Windows lets a program lock about half of RAM), the layers locked so far keep fast asynchronous copies
and the rest are copied from pageable memory, slower, and the load report says how much is locked.
On a machine without CUDA the block stays plain memory and nothing streams.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Sequence

import torch

from core.offload.layout import LAYER_ALIGN, LayerLayout

log = logging.getLogger(__name__)

__all__ = ["HostWeightStore", "LayerBlock", "pin_in_place"]


# cudaHostRegisterPortable: the locked memory counts as pinned for every CUDA context of the process, not
# only the current device's (torch's own registration helper passes it too).
HOST_REGISTER_PORTABLE = 1


def pin_in_place(buffer: torch.Tensor) -> bool:
    """Page-lock an existing CPU tensor's memory with cudaHostRegister (portable). Returns False on failure
    (the caller logs once): copies then still work, but as slower pageable copies."""
    if not torch.cuda.is_available():
        return False
    try:
        cudart = torch.cuda.cudart()
        status = int(cudart.cudaHostRegister(buffer.data_ptr(), buffer.numel() * buffer.element_size(),
                                             HOST_REGISTER_PORTABLE))
    except (RuntimeError, AttributeError, AssertionError) as error:  # no cudart bindings in this build
        log.warning("could not page-lock host memory (%s)", error)
        return False
    return status == 0


def _unpin(pointer: int, keep_alive: torch.Tensor) -> None:
    """Unregister before the memory goes: `keep_alive` (the block itself) is only released after this."""
    try:
        torch.cuda.cudart().cudaHostUnregister(pointer)
    except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to protect
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
    """The host block of the layers that stream, page-locked in place layer by layer when `pin` (and CUDA
    is there), until the system refuses: `pinned_bytes` of `nbytes` are locked (`pinned`: all of them).
    `pin_layer` is the locking call (tests pass one that refuses past a limit, as Windows does)."""

    def __init__(self, layouts: Sequence[LayerLayout], pin: bool, layers: Iterable[int] | None = None,
                 pin_layer: Callable[[torch.Tensor], bool] = pin_in_place) -> None:
        super().__init__(layouts, layers, "cpu")
        self.pinned_bytes = 0
        for index in self.offsets if pin else ():
            layer = self.layer_bytes(index)
            if not pin_layer(layer):
                log.warning("page-locked %.1f of %.1f GiB of the weight store, then the system refused more: "
                            "the other layers are copied from pageable memory, more slowly",
                            self.pinned_bytes / 1024**3, self.nbytes / 1024**3)
                break
            weakref.finalize(self, _unpin, layer.data_ptr(), self._raw)
            self.pinned_bytes += layer.numel()

    @property
    def pinned(self) -> bool:
        """Every layer is page-locked (a store of no layers counts as not pinned, as before)."""
        return self.nbytes > 0 and self.pinned_bytes == self.nbytes
