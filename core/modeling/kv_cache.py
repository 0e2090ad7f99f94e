"""A KV cache preallocated once that commits an accepted tree path without copying the prefix.

transformers' DynamicLayer concatenates on every forward, copying the whole prefix each time. Our layer
keeps one buffer per layer, allocated at its first write with the planned number of rows (the planned
context plus one pass's tree: what the VRAM plan counted), writes new keys at the end, and on commit moves
only the accepted tokens' rows next to the kept prefix (row indices on the device: no host read, no copy). Keys already carry RoPE for their absolute
positions, so moving rows needs no re-rotation. It never grows: doubling a 70B's cache would take GBs the
plan never counted, so a write past the planned rows is refused with ContextLengthError.

For the fixed-shape forwards (core/decoding/captured_forward.py: the draft's search, a resident target's
one-token step) a `window` makes every layer write its new rows at indices held in a device tensor and attend
over a fixed number of rows, so the same kernels (a CUDA graph) serve every forward of that width: the write
position lives on the device, not in `length` (`grow` moves `length` past a step's row afterwards).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
        self.window: tuple[torch.Tensor, int] | None = None  # (rows to write, rows to attend over), see update
        self.columns: int | None = None  # rows attention reads after a plain write (None: the written ones)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, heads, _, head_dim = key_states.shape
        shape = (batch, heads, self.capacity, head_dim)
        # zeros, not uninitialised memory: a windowed forward attends over rows not written yet, masked, and a
        # masked row still enters the sums as 0 * value, which is NaN if the memory happens to hold a NaN
        self._key_buffer = key_states.new_zeros(shape)
        self._value_buffer = value_states.new_zeros(shape[:3] + value_states.shape[-1:])
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

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new rows and return the keys/values attention reads: after the last row (the
        default; attention reads the first `columns` rows when they are set and more than the rows written:
        the caller masks the rest), or, under a window (rows [n] on the device, cols), at `rows`, attending
        over [0, cols)."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self.window is not None:
            rows, cols = self.window
            self._key_buffer.index_copy_(-2, rows, key_states)
            self._value_buffer.index_copy_(-2, rows, value_states)
            return self._key_buffer[..., :cols, :], self._value_buffer[..., :cols, :]
        new = key_states.shape[-2]
        self._check_capacity(self.length + new)
        self._key_buffer[..., self.length : self.length + new, :] = key_states
        self._value_buffer[..., self.length : self.length + new, :] = value_states
        self.length += new
        self._refresh_views()
        if self.columns is not None and self.columns > self.length:
            return self._key_buffer[..., : self.columns, :], self._value_buffer[..., : self.columns, :]
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

    def move_rows(self, sources: torch.Tensor, targets: torch.Tensor) -> None:
        """Copy rows `sources` to rows `targets` (long [n], on the device; any overlap: the sources are read
        first); `length` does not move."""
        if not self.is_initialized:
            return
        self._key_buffer[..., targets, :] = self._key_buffer[..., sources, :]
        self._value_buffer[..., targets, :] = self._value_buffer[..., sources, :]

    def grow(self, count: int) -> None:
        """The `count` rows a windowed forward wrote right after the last one join the layer's tokens."""
        self._check_capacity(self.length + count)
        self.length += count
        if self.is_initialized:
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
        """Keep tokens [0, start) followed by `rows` (absolute indices >= start, in order; long, on the
        cache's device, so that committing reads nothing back to the host)."""
        for layer in self.layers:
            layer.keep_rows(start, rows)

    def move_rows(self, sources: torch.Tensor, targets: torch.Tensor) -> None:
        """Copy rows `sources` to rows `targets` in every layer, past `length` or not (a kept subtree's rows
        moving under their new root: core.decoding.subtree_keep)."""
        for layer in self.layers:
            layer.move_rows(sources, targets)

    def check_room(self, rows: int) -> None:
        """Raises ContextLengthError when the cache cannot hold `rows` rows (before a forward writes any)."""
        self.layers[0]._check_capacity(rows)

    def grow(self, count: int) -> None:
        """After a windowed forward that wrote `count` rows right after `length` (a one-token step,
        core.decoding.captured_forward.run_step_forward): those rows become part of the cache."""
        for layer in self.layers:
            layer.grow(count)

    @property
    def windowed(self) -> bool:
        """Whether a search forward's window is set (see `window`)."""
        return self.layers[0].window is not None

    def attend_columns(self, columns: int | None) -> None:
        """Until called again with None, every layer's plain write returns its first `columns` rows to attention
        (core.modeling.causal_lm.bucketed_columns: a few shapes per conversation); the caller masks the rows
        past the written ones. The rows are allocated already: columns never exceed the capacity."""
        if columns is not None and columns > self.capacity:
            self.layers[0]._check_capacity(columns)
        for layer in self.layers:
            layer.columns = columns

    @contextmanager
    def window(self, rows: torch.Tensor, cols: int) -> Iterator[None]:
        """Within this block each layer writes its new rows at `rows` (long [n], device) and attends over the
        first `cols` rows; `length` does not move (the caller commits what stays with keep_rows). The caller
        keeps `rows` below `cols` <= capacity and masks every column a row must not see."""
        if cols > self.capacity:
            self.layers[0]._check_capacity(cols)
        for layer in self.layers:
            layer.window = (rows, cols)
        try:
            yield
        finally:
            for layer in self.layers:
                layer.window = None
