"""Where each tensor of a decoder layer lives inside one contiguous byte buffer, and binding a layer to it.

A layer's parameters and buffers (fp16 matrices, or GPTQ qweight/qzeros/scales/g_idx, norms, biases) are
packed back to back at 256-byte aligned offsets, so the whole layer moves host -> device in one copy and
each tensor is a typed view into the layer's bytes. Binding points the layer module's parameters and
buffers at such views, so the unmodified transformers decoder layer runs on whatever bytes the views
cover: the host store on the CPU, a streaming slot or a resident buffer on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

from core.planning.sizes import LAYER_ALIGN, TENSOR_ALIGN, packed_layer_bytes, round_up  # noqa: F401 - re-exported


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a layer: `name` is its dotted path inside the layer ("self_attn.q_proj.weight")."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    offset: int
    is_parameter: bool

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * torch.empty((), dtype=self.dtype).element_size()

    def view(self, layer_bytes: torch.Tensor) -> torch.Tensor:
        """Typed view of this tensor inside a uint8 buffer holding the layer."""
        return layer_bytes[self.offset : self.offset + self.nbytes].view(self.dtype).view(self.shape)


@dataclass(frozen=True)
class LayerLayout:
    """The packed byte layout of one decoder layer; equal for every layer of a homogeneous model."""

    entries: tuple[TensorEntry, ...]
    nbytes: int

    @cached_property
    def _by_name(self) -> dict[str, TensorEntry]:
        return {entry.name: entry for entry in self.entries}

    def entry(self, name: str) -> TensorEntry | None:
        return self._by_name.get(name)

    def views(self, layer_bytes: torch.Tensor) -> list[torch.Tensor]:
        """Views of every entry in a layer buffer; parameters are wrapped as frozen nn.Parameter."""
        views = []
        for entry in self.entries:
            view = entry.view(layer_bytes)
            views.append(nn.Parameter(view, requires_grad=False) if entry.is_parameter else view)
        return views


def layer_layout(layer: nn.Module) -> LayerLayout:
    """Layout of a (meta-device) decoder layer from its parameters and buffers, in registration order."""
    entries, offset = [], 0
    seen: set[str] = set()
    for module_name, module in layer.named_modules():
        prefix = f"{module_name}." if module_name else ""
        tensors = [(n, t, True) for n, t in module._parameters.items()] + [
            (n, t, False) for n, t in module._buffers.items()
        ]
        for name, tensor, is_parameter in tensors:
            full = prefix + name
            if tensor is None or full in seen:
                continue
            seen.add(full)
            entry = TensorEntry(full, tuple(tensor.shape), tensor.dtype, offset, is_parameter)
            entries.append(entry)
            offset = round_up(offset + entry.nbytes, TENSOR_ALIGN)
    return LayerLayout(tuple(entries), packed_layer_bytes(entry.nbytes for entry in entries))


class LayerBinding:
    """Points one layer module's parameters/buffers at views from `LayerLayout.views`.

    The (module, attribute) targets are resolved once; binding is then one dict store per tensor.
    """

    def __init__(self, layer: nn.Module, layout: LayerLayout) -> None:
        self.layout = layout
        self.targets: list[tuple[dict, str]] = []
        for entry in layout.entries:
            module_path, _, attr = entry.name.rpartition(".")
            module = layer.get_submodule(module_path) if module_path else layer
            self.targets.append((module._parameters if entry.is_parameter else module._buffers, attr))

    def bind(self, views: list[torch.Tensor]) -> None:
        for (table, attr), view in zip(self.targets, views):
            table[attr] = view
