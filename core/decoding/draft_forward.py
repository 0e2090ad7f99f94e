"""The draft model's search forward at a fixed width: eager everywhere, replayed from a CUDA graph on CUDA.

An eager draft forward launches about a thousand kernels (~10 us each from Python), as much host time as
the forward's GPU time for a 7B draft. A CUDA graph launches them all at once. It can only be captured
because the search's forwards have static shapes: every forward of a search has the same width (padding
rows masked), writes its keys/values at rows held in a device tensor (`InPlaceKVCache.window`) and attends
over a column count rounded up to a bucket (core.planning.graph_plan.column_bucket), so one graph per (width,
columns) serves every forward with that shape: the inputs (ids, positions, mask, rows) are copied into the
graph's static buffers and the graph is replayed.

What the graphs keep, and why it stays small and planned (core/planning/graph_plan.py and core/decoding/graph_memory.py count
it for the plan):
- One capture stream and one memory pool per draft cache (`DraftGraphs`). The caching allocator reuses a
  pool's freed blocks only on the stream that freed them, so graphs captured on one stream share the pool's
  scratch: the pool holds the largest forward's intermediates once, not once per graph. One stream also
  means one cuBLAS workspace.
- A graph's output is the draft's final-normed hidden states [width, hidden]; the LM head runs eagerly on
  them (one kernel), so no graph keeps a [width, vocabulary] logits buffer, and nothing else is kept.
- Coarse buckets: a few sizes up to 1,024 columns, then about 25% apart, so a 4k context has 10 or 11 and
  a 32k context 19; at most MAX_WIDTHS widths are captured per cache (the tree budget fixes the width, and
  the automatic budget chooses among a few); any other shape runs eagerly.
- No whole-device wait: `torch.cuda.graph`'s context manager synchronises the device and empties the cache
  on entry (it would also wait for an offloaded target's prefetch); the capture here uses
  capture_begin/capture_end on the cache's own stream, which the current stream waits for and vice versa.
- A capture that fails turns graphs off for the process (one log line) and the draft runs eagerly.

Capture is on by default on CUDA and never elsewhere; SPECEXEC_CUDA_GRAPHS=0 turns it off (the app sets it
for its engine when the GPU check's graphs check did not pass). The CPU runs the same windowed forward
eagerly, so everything but the capture itself is exercised by the CPU tests.
`compare_captured_with_eager` checks capture on the user's own GPU (`specexec doctor`).
"""

from __future__ import annotations

import logging
import os
import weakref

import torch

from core.modeling.causal_lm import CausalLM
from core.system.env import CUDA_GRAPHS_ENV
from core.errors import InvalidSettingError
from core.planning.graph_plan import MAX_WIDTHS, column_bucket
from core.modeling.kv_cache import InPlaceKVCache

log = logging.getLogger(__name__)

# One entry per draft KV cache (graphs bake in its buffers' addresses). Weak keys: a finished
# conversation's cache takes its graphs, stream and pool with it.
_GRAPHS: weakref.WeakKeyDictionary[InPlaceKVCache, "DraftGraphs"] = weakref.WeakKeyDictionary()
# Why capture was given up for this process (None while it works).
_capture_failure: str | None = None


def capture_enabled(device: torch.device) -> bool:
    """Whether draft forwards are replayed from CUDA graphs on this device."""
    return device.type == "cuda" and os.environ.get(CUDA_GRAPHS_ENV, "1") != "0" and _capture_failure is None


def search_hidden_states(draft: CausalLM, cache: InPlaceKVCache, ids, positions, mask, rows, cols: int) -> torch.Tensor:
    """The decoder stack of a windowed search forward (what a graph captures): final-normed hidden states
    [W, hidden], the new keys/values written at `rows`, attention over rows [0, cols)."""
    with cache.window(rows, cols):
        return draft.hidden_states(ids, positions, mask, cache)


class DraftGraphs:
    """One draft cache's captured forwards: one capture stream and one memory pool serve all of them."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)
        self.pool = torch.cuda.graph_pool_handle()
        self.forwards: dict[tuple[int, int], CapturedForward] = {}

    def may_capture(self, width: int) -> bool:
        """A new graph of this width stays within MAX_WIDTHS widths."""
        widths = {w for w, _ in self.forwards}
        return width in widths or len(widths) < MAX_WIDTHS


class CapturedForward:
    """One CUDA graph of a windowed draft forward of a fixed (width, columns) shape on one cache: its
    static inputs and its output, the final-normed hidden states. Keeps no reference to the cache or the
    model (the graph holds their buffers' addresses), so the per-cache registry can let the cache go."""

    def __init__(self, graph: torch.cuda.CUDAGraph, inputs: tuple[torch.Tensor, ...], hidden: torch.Tensor) -> None:
        self.graph, self.inputs, self.hidden = graph, inputs, hidden

    @classmethod
    def capture(
        cls, draft: CausalLM, cache: InPlaceKVCache, graphs: DraftGraphs, ids, positions, mask, rows, cols: int
    ) -> tuple["CapturedForward", torch.Tensor]:
        """Capture the forward on these inputs; returns the graph and the hidden states of this call.

        A warm-up forward on the cache's stream comes first (it compiles Triton kernels and sets up cuBLAS
        outside the capture; its result is this call's, and the KV rows it writes are the ones the call
        writes anyway), then the capture on the same stream, into the cache's pool (nothing runs)."""
        device = draft.device
        current = torch.cuda.current_stream(device)
        inputs = tuple(t.clone() for t in (ids, positions, mask, rows))
        graphs.stream.wait_stream(current)
        with torch.cuda.stream(graphs.stream):
            first = search_hidden_states(draft, cache, *inputs, cols)
            graph = torch.cuda.CUDAGraph()
            graph.capture_begin(pool=graphs.pool, capture_error_mode="thread_local")
            try:
                hidden = search_hidden_states(draft, cache, *inputs, cols)
            finally:
                graph.capture_end()
        current.wait_stream(graphs.stream)
        first.record_stream(current)  # read there, allocated on the capture stream
        return cls(graph, inputs, hidden), first

    def replay(self, ids, positions, mask, rows) -> torch.Tensor:
        """Hidden states [width, hidden] of the forward on these inputs (the graph's output buffer: read it
        before the next replay of this shape)."""
        for static, value in zip(self.inputs, (ids, positions, mask, rows)):
            static.copy_(value)
        self.graph.replay()
        return self.hidden


def _give_up_capture(error: BaseException) -> None:
    """Turn graphs off for this process after a failed capture: one log line, the graphs dropped."""
    global _capture_failure
    _capture_failure = f"{type(error).__name__}: {error}"
    _GRAPHS.clear()
    log.warning(
        "CUDA graphs are off for this process: capturing a draft forward failed (%s); the draft model "
        "runs without them, a little slower.",
        _capture_failure,
    )


def _eager_logits(draft: CausalLM, cache: InPlaceKVCache, ids, positions, mask, rows, cols: int) -> torch.Tensor:
    with cache.window(rows, cols):
        return draft.forward(ids, positions, mask, cache)


def run_draft_forward(
    draft: CausalLM,
    cache: InPlaceKVCache,
    ids: torch.Tensor,
    positions: torch.Tensor,
    mask: torch.Tensor,
    rows: torch.Tensor,
    cols: int,
) -> torch.Tensor:
    """One search forward of the draft: ids, positions, rows long [W] on the device, mask additive
    [1, 1, W, cols]; the new keys/values go to cache rows `rows`, attention reads rows [0, cols).
    Returns logits [W, V]: when `capture_enabled`, the decoder stack replayed from a CUDA graph and the LM
    head run eagerly on its output (the same kernels as `draft.forward`, which runs otherwise)."""
    if not capture_enabled(draft.device):
        return _eager_logits(draft, cache, ids, positions, mask, rows, cols)
    graphs = _GRAPHS.get(cache)
    if graphs is None:
        graphs = _GRAPHS[cache] = DraftGraphs(draft.device)
    key = (ids.shape[0], cols)
    captured = graphs.forwards.get(key)
    if captured is not None:
        return draft.model.lm_head(captured.replay(ids, positions, mask, rows))
    if not graphs.may_capture(key[0]):
        return _eager_logits(draft, cache, ids, positions, mask, rows, cols)
    try:
        captured, hidden = CapturedForward.capture(draft, cache, graphs, ids, positions, mask, rows, cols)
    except RuntimeError as error:  # a driver or library that cannot capture: eager from now on
        _give_up_capture(error)
        return _eager_logits(draft, cache, ids, positions, mask, rows, cols)
    graphs.forwards[key] = captured
    return draft.model.lm_head(hidden)


def captured_shapes(cache: InPlaceKVCache) -> list[tuple[int, int]]:
    """The (width, columns) shapes captured for this cache so far (none off CUDA)."""
    graphs = _GRAPHS.get(cache)
    return sorted(graphs.forwards) if graphs is not None else []


def compare_captured_with_eager(
    draft: CausalLM, width: int = 32, contexts: tuple[int, ...] = (64, 300, 700), seed: int = 0
) -> float:
    """For the GPU check of `specexec doctor`: the largest absolute difference between the logits of draft
    search forwards replayed from CUDA graphs and the same forwards run eagerly, on the same inputs and
    cache contents, over several column buckets of one cache (so several graphs share its stream and pool,
    as in a conversation).

    For each context length it prefills random tokens up to it, then runs one windowed forward of `width`
    random tokens (each attending to the context and to itself) eagerly, through the engine's capture
    (`run_draft_forward`: the first call captures) and through the captured graph again. 0.0, or a few units
    in the last place of the draft's dtype, means capture is safe with this GPU and driver.

    Raises InvalidSettingError when the draft is not on a CUDA device (there is nothing to capture), and
    RuntimeError when capture failed (graphs were then turned off for this process).
    """
    if draft.device.type != "cuda":
        raise InvalidSettingError(f"CUDA graphs need a CUDA device; the draft is on {draft.device}")
    from core.modeling.tree_mask import additive_mask, block_visibility

    device = draft.device
    generator = torch.Generator(device=device).manual_seed(seed)
    cache = draft.new_cache()
    worst = 0.0
    for context in contexts:
        prefix = torch.randint(3, draft.vocab_size, (context - cache.length,), device=device, generator=generator)
        draft.extend(prefix, cache)
        ids = torch.randint(3, draft.vocab_size, (width,), device=device, generator=generator)
        rows = torch.arange(context, context + width, device=device)
        cols = column_bucket(context + width, cache.capacity)
        mask = additive_mask(block_visibility(context, width, cols, device), draft.dtype)
        eager = _eager_logits(draft, cache, ids, rows, mask, rows, cols).double()
        outputs = [run_draft_forward(draft, cache, ids, rows, mask, rows, cols).double() for _ in range(2)]
        if _capture_failure is not None:
            raise RuntimeError(_capture_failure)
        worst = max(worst, *(float((out - eager).abs().max()) for out in outputs))  # host syncs: a one-off check
    return worst
