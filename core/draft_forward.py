"""The draft model's search forward at a fixed width: eager everywhere, replayed from a CUDA graph on CUDA.

An eager draft forward launches about a thousand kernels (~10 us each from Python), as much host time as
the forward's GPU time for a 7B draft. A CUDA graph launches them all at once. It can only be captured
because the search's forwards have static shapes: every forward of a search has the same width (padding
rows masked), writes its keys/values at rows held in a device tensor (`InPlaceKVCache.window`) and attends
over a column count rounded up to a bucket, so one graph per (width, columns) serves every forward with
that shape: the inputs (ids, positions, mask, rows) are copied into the graph's static buffers and the
graph is replayed.

Capture is on by default on CUDA and never elsewhere; SPECEXEC_CUDA_GRAPHS=0 turns it off (the app sets it
for its engine when the GPU check's graphs check did not pass). The CPU runs the same windowed forward
eagerly, so everything but the capture itself is exercised by the CPU tests.
`compare_captured_with_eager` checks capture on the user's own GPU (the installer's GPU check).
"""

from __future__ import annotations

import os
import weakref

import torch

from core.causal_lm import CausalLM
from core.doctor.report import CUDA_GRAPHS_ENV
from core.errors import InvalidSettingError
from core.kv_cache import InPlaceKVCache

# One entry per draft KV cache (graphs bake in its buffers' addresses): its memory pool and its graphs by
# (width, columns). Weak keys: a finished conversation's cache takes its graphs with it.
_GRAPHS: weakref.WeakKeyDictionary[InPlaceKVCache, dict] = weakref.WeakKeyDictionary()


def capture_enabled(device: torch.device) -> bool:
    """Whether draft forwards are replayed from CUDA graphs on this device."""
    return device.type == "cuda" and os.environ.get(CUDA_GRAPHS_ENV, "1") != "0"


def _eager(draft: CausalLM, cache: InPlaceKVCache, ids, positions, mask, rows, cols: int) -> torch.Tensor:
    with cache.window(rows, cols):
        return draft.forward(ids, positions, mask, cache)


class CapturedForward:
    """One CUDA graph of a windowed draft forward of a fixed (width, columns) shape on one cache.

    Built from a first real call: a warm-up forward on a side stream (its logits are that call's result; the
    KV rows it writes are the ones the call writes anyway), then the capture on the same stream (nothing runs).
    Later calls copy their inputs into the static buffers and replay. Keeps no reference to the cache or the
    model (the graph holds their buffers' addresses), so the per-cache registry can let the cache go.
    """

    def __init__(self, draft: CausalLM, cache: InPlaceKVCache, ids, positions, mask, rows, cols: int, pool) -> None:
        self.ids, self.positions, self.mask, self.rows = (t.clone() for t in (ids, positions, mask, rows))
        device = draft.device
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            self.first_logits = _eager(draft, cache, self.ids, self.positions, self.mask, self.rows, cols)
        self.first_logits.record_stream(torch.cuda.current_stream(device))  # read there, allocated here
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool, stream=stream):
            self.logits = _eager(draft, cache, self.ids, self.positions, self.mask, self.rows, cols)
        torch.cuda.current_stream(device).wait_stream(stream)

    def replay(self, ids, positions, mask, rows) -> torch.Tensor:
        """Logits [width, V] of the forward on these inputs (the graph's output buffer: read it before the
        next replay of this shape)."""
        for static, value in ((self.ids, ids), (self.positions, positions), (self.mask, mask), (self.rows, rows)):
            static.copy_(value)
        self.graph.replay()
        return self.logits


def run_draft_forward(draft: CausalLM, cache: InPlaceKVCache, ids: torch.Tensor, positions: torch.Tensor,
                      mask: torch.Tensor, rows: torch.Tensor, cols: int) -> torch.Tensor:
    """One search forward of the draft: ids, positions, rows long [W] on the device, mask additive
    [1, 1, W, cols]; the new keys/values go to cache rows `rows`, attention reads rows [0, cols).
    Returns logits [W, V]. Replayed from a CUDA graph when `capture_enabled`."""
    if not capture_enabled(draft.device):
        return _eager(draft, cache, ids, positions, mask, rows, cols)
    graphs = _GRAPHS.setdefault(cache, {"pool": torch.cuda.graph_pool_handle()})
    key = (ids.shape[0], cols)
    captured = graphs.get(key)
    if captured is None:
        graphs[key] = CapturedForward(draft, cache, ids, positions, mask, rows, cols, graphs["pool"])
        return graphs[key].first_logits
    return captured.replay(ids, positions, mask, rows)


def compare_captured_with_eager(draft: CausalLM, width: int = 32, context: int = 64, seed: int = 0) -> float:
    """For the GPU check of `specexec doctor` (installer issue 22): the largest absolute difference between
    the logits of a draft search forward replayed from a CUDA graph and the same forward run eagerly, on the
    same inputs and the same cache contents.

    It prefills `context` random tokens into a fresh cache of `draft`, then runs one windowed forward of
    `width` random tokens (each attending to the context and to itself) eagerly, captures the same forward
    (`CapturedForward`) and replays it. 0.0, or a few units in the last place of the draft's dtype, means
    capture is safe with this GPU and driver; anything larger means set SPECEXEC_CUDA_GRAPHS=0.

    Raises InvalidSettingError when the draft is not on a CUDA device (there is nothing to capture).
    """
    if draft.device.type != "cuda":
        raise InvalidSettingError(f"CUDA graphs need a CUDA device; the draft is on {draft.device}")
    from core.tree_mask import additive_mask

    generator = torch.Generator(device=draft.device).manual_seed(seed)
    cache = draft.new_cache()
    prefix = torch.randint(3, draft.vocab_size, (context,), device=draft.device, generator=generator)
    draft.extend(prefix, cache)
    ids = torch.randint(3, draft.vocab_size, (width,), device=draft.device, generator=generator)
    rows = torch.arange(context, context + width, device=draft.device)
    cols = context + width
    visible = torch.zeros((width, cols), dtype=torch.bool, device=draft.device)
    visible[:, :context] = True
    visible[:, context:] = torch.eye(width, dtype=torch.bool, device=draft.device)
    mask = additive_mask(visible, draft.dtype)
    eager = _eager(draft, cache, ids, rows, mask, rows, cols).clone()
    captured = CapturedForward(draft, cache, ids, rows, mask, rows, cols, torch.cuda.graph_pool_handle())
    replayed = captured.replay(ids, rows, mask, rows)
    return float((replayed.double() - eager.double()).abs().max())  # host sync, deliberate: a one-off check
