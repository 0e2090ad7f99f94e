"""The CUDA graphs' pool scratch computed from the engine's own forward on the meta device.

The graphs of one draft cache share one memory pool, which keeps the scratch of the largest forward ever
captured (every forward's intermediates are dead once it ends, and captures on one stream reuse the pool's
freed blocks). That forward is the search forward at the planned width over the cache's whole capacity.
Here the draft's architecture is built on the meta device (shapes only, no memory) and that forward runs
under `PeakMemoryMode`, which adds up the bytes of the tensors alive at each moment. Attention is counted as
a GPU runs the engine's masked attention: PyTorch's memory-efficient kernel, whose meta version allocates
what the kernel does (its output and log-sum-exp), not the unfused fallback the meta device would otherwise
take (a float32 scores matrix per head). core/planning/graph_plan.py adds what each graph keeps
(`planned_graph_bytes`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from core.planning.graph_plan import draft_graph_bytes


class PeakMemoryMode(TorchDispatchMode):
    """Counts the bytes of tensors created inside it that are alive at once, and the peak of that sum.

    A tensor's storage counts from the op that creates it (an output whose storage no input shares) until
    the last tensor viewing it is garbage collected; in-place ops and views of tensors made outside the
    mode (weights, KV buffers) add nothing. Works on any device, the meta device included."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._storages: dict[int, list[int]] = {}  # storage key -> [bytes, tensors alive that view it]

    def _release(self, key: int) -> None:
        entry = self._storages[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.live -= entry[0]
            del self._storages[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            key = tensor.untyped_storage()._cdata
            if key in inputs and key not in self._storages:
                continue  # an in-place result or a view of a tensor made outside the mode
            entry = self._storages.get(key)
            if entry is None:
                entry = self._storages[key] = [tensor.untyped_storage().nbytes(), 0]
                self.live += entry[0]
                self.peak = max(self.peak, self.live)
            entry[1] += 1
            weakref.finalize(tensor, self._release, key)
        return out


@contextmanager
def fused_attention() -> Iterator[None]:
    """Within this block scaled_dot_product_attention calls the memory-efficient kernel's op directly (what a
    GPU dispatches masked 16-bit attention to), so the meta device allocates as that kernel does."""
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention

    def efficient(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        bias = None if attn_mask is None else attn_mask.expand(*query.shape[:-1], key.shape[-2])
        return torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, bias, False, dropout_p, is_causal, scale=scale
        )[0]

    functional.scaled_dot_product_attention = efficient
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original


def search_forward_peak_bytes(config, dtype: torch.dtype, width: int, capacity: int) -> int:
    """Peak bytes of intermediates of one windowed forward of `width` rows over `capacity` attention columns (a
    draft search forward; at width 1 a resident target's one-token step), for a model of this transformers
    config in `dtype`, computed on the meta device. The embedding runs outside the count, as outside a graph."""
    from transformers import AutoModelForCausalLM

    from core.decoding.captured_forward import windowed_states
    from core.modeling.causal_lm import CausalLM
    from core.modeling.tree_mask import additive_mask

    meta = torch.device("meta")
    with meta:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa").eval()
    lm = CausalLM(model=model, name="graph-memory", eos_token_ids=(), max_context=capacity)
    cache = lm.new_cache()
    lm.extend(torch.zeros(1, dtype=torch.long, device=meta), cache)  # allocates the KV buffers, outside the count
    ids = torch.zeros(width, dtype=torch.long, device=meta)
    rows = torch.arange(capacity - width, capacity, device=meta)
    mask = additive_mask(torch.ones((width, capacity), dtype=torch.bool, device=meta), dtype)
    hidden = lm.embed(ids)  # a graph's static input, counted with what each graph keeps
    with torch.no_grad(), fused_attention(), PeakMemoryMode() as counter:
        windowed_states(lm, cache, hidden, rows, mask, rows, capacity)
    return counter.peak


def planned_graph_bytes(config, dtype: torch.dtype, width: int, capacity: int) -> int:
    """VRAM the captured search forwards of a draft cache of `capacity` rows may keep at `width` rows per
    forward: the meta-device scratch plus what core.planning.graph_plan.draft_graph_bytes adds."""
    scratch = search_forward_peak_bytes(config, dtype, width, capacity)
    return draft_graph_bytes(scratch, config.hidden_size, dtype.itemsize, width, capacity)
