"""A KV cache preallocated once that commits an accepted tree path without copying the prefix.

transformers' DynamicLayer concatenates on every forward, copying the whole prefix each time. Our layer
keeps one buffer per layer, allocated at its first write with the planned number of rows (the planned
context plus one pass's tree: what the VRAM plan counted), writes new keys at the end, and on commit moves
only the accepted tokens' rows next to the kept prefix. Keys already carry RoPE for their absolute
positions, so moving rows needs no re-rotation. It never grows: doubling a 70B's cache would take GBs the
plan never counted, so a write past the planned rows is refused with ContextLengthError.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from core.errors import ContextLengthError


class InPlaceKVLayer(CacheLayerMixin):
    """One decoder layer's keys/values in a preallocated buffer [batch, kv_heads, capacity, head_dim]."""

    is_sliding = False
    is_croppable = True

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.length = 0
        self.capacity = capacity
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, heads, _, head_dim = key_states.shape
        shape = (batch, heads, self.capacity, head_dim)
        self._key_buffer = key_states.new_empty(shape)
        self._value_buffer = value_states.new_empty(shape[:3] + value_states.shape[-1:])
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def _check_capacity(self, needed: int) -> None:
        if needed > self.capacity:
            raise ContextLengthError(
                f"the conversation needs {needed} KV-cache rows but the cache was planned for {self.capacity} "
                f"tokens (context length plus one draft tree); start a new conversation or load the model with "
                f"a longer context length"
            )

    def _refresh_views(self) -> None:
        self.keys = self._key_buffer[..., : self.length, :]
        self.values = self._value_buffer[..., : self.length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        self._check_capacity(self.length + new)
        self._key_buffer[..., self.length : self.length + new, :] = key_states
        self._value_buffer[..., self.length : self.length + new, :] = value_states
        self.length += new
        self._refresh_views()
        return self.keys, self.values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last `-tokens_to_remove` tokens (negative, like DynamicLayer) or keep the first n (n >= 0)."""
        keep = self.length + tokens_to_remove if tokens_to_remove < 0 else min(tokens_to_remove, self.length)
        self.length = max(keep, 0)
        if self.is_initialized:
            self._refresh_views()

    def keep_rows(self, start: int, rows: torch.Tensor) -> None:
        """Keep tokens [0, start) and then the given absolute rows, in that order; drop everything else."""
        if not self.is_initialized:
            return
        count = rows.numel()
        if count:
            # Advanced indexing copies the selected rows first, so overlapping source/destination is safe.
            self._key_buffer[..., start : start + count, :] = self._key_buffer[..., rows, :]
            self._value_buffer[..., start : start + count, :] = self._value_buffer[..., rows, :]
        self.length = start + count
        self._refresh_views()

    def reset(self) -> None:
        self.length = 0
        if self.is_initialized:
            self._refresh_views()


class InPlaceKVCache(Cache):
    """A transformers Cache made of InPlaceKVLayer, one per decoder layer."""

    def __init__(self, num_layers: int, capacity: int) -> None:
        super().__init__(layers=[InPlaceKVLayer(capacity) for _ in range(num_layers)])

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def capacity(self) -> int:
        """Rows the cache was planned for; it never holds more."""
        return self.layers[0].capacity

    def crop_to(self, length: int) -> None:
        """Keep the first `length` tokens."""
        for layer in self.layers:
            layer.crop(length)

    def keep_rows(self, start: int, rows: torch.Tensor) -> None:
        """Keep tokens [0, start) followed by `rows` (absolute indices >= start, in order)."""
        rows = rows.to(self.layers[0]._key_buffer.device) if self.layers[0].is_initialized else rows
        for layer in self.layers:
            layer.keep_rows(start, rows)
