"""Forwards of fixed shape, eager everywhere and replayed from CUDA graphs on CUDA: the draft's search forward
and a resident target's one-token step.

An eager forward launches about a thousand kernels (~10 us each from Python), as much host time as the GPU time
of a 7B draft's forward or of a resident 32B target's one-token step. A CUDA graph launches them all at once. It
can only be captured because these forwards have static shapes: every forward of a search has the same width
(padding rows masked), and a plain decoding step has one row; each writes its keys/values at rows held in a
device tensor (`InPlaceKVCache.window`) and attends over a column count rounded up to a bucket
(core.planning.graph_plan.column_bucket), so one graph per (width, columns) serves every forward with that shape:
the inputs (embedded tokens, positions, mask, rows) are copied into the graph's static buffers and the graph is
replayed. The graph starts after the embedding: an offloaded target keeps its table in host RAM, a lookup on the
host that a replay would not repeat, so the embedding (one kernel, or that lookup and one copy) runs eagerly.

Which forwards are captured:
- the draft's search forwards (`run_draft_forward`), on CUDA;
- plain decoding's one-token step (`run_step_forward`) of a target that streams no layer (a resident target: the
  built-in pair, or a 4-bit target whose every layer fits), when its VRAM plan left room for the graphs
  (`CausalLM.step_graph_room`, set by core.offload.loader from core.planning.graph_plan.step_graph_bytes). A
  target that streams layers stays eager: its forward waits on copies and binds ring slots every pass. The
  SpecExec draft's catch-up forward stays eager too: its length is the tokens the last pass accepted (1 to the
  tree's depth), one shape per length, each a graph kept in VRAM for one forward a pass.

What the graphs keep, and why it stays small and planned (core/planning/graph_plan.py and
core/decoding/graph_memory.py count it for the plan):
- One capture stream and one memory pool per KV cache (`CacheGraphs`). The caching allocator reuses a pool's
  freed blocks only on the stream that freed them, so graphs captured on one stream share the pool's scratch:
  the pool holds the largest forward's intermediates once, not once per graph. One stream also means one cuBLAS
  workspace.
- A graph's output is the final-normed hidden states [width, hidden]; the LM head runs eagerly on them (one
  kernel), so no graph keeps a [width, vocabulary] logits buffer, and nothing else is kept.
- Coarse buckets: a few sizes up to 1,024 columns, then about 25% apart, so a 4k context has 10 or 11 and a 32k
  context 19; at most MAX_WIDTHS widths are captured per cache (the tree budget fixes the draft's width, and the
  automatic budget chooses among a few; a target's step has one); any other shape runs eagerly.
- No whole-device wait: `torch.cuda.graph`'s context manager synchronises the device and empties the cache on
  entry (it would also wait for an offloaded target's prefetch); the capture here uses capture_begin/capture_end
  on the cache's own stream, which the current stream waits for and vice versa.
- A capture that fails turns graphs off for the process (one log line) and every forward runs eagerly.

Capture is on by default on CUDA and never elsewhere; SPECEXEC_CUDA_GRAPHS=0 turns it off (the app sets it for
its engine when the GPU check's graphs check did not pass). The CPU runs the same windowed forwards eagerly, so
everything but the capture itself is exercised by the CPU tests. `compare_captured_with_eager` checks capture on
the user's own GPU (`specexec doctor`).
"""

from __future__ import annotations

import logging
import os
import weakref

import torch

from core.errors import InvalidSettingError
from core.modeling.attention import attention_fix_enabled
from core.modeling.causal_lm import CausalLM
from core.modeling.kv_cache import InPlaceKVCache
from core.modeling.tree_mask import additive_mask
from core.planning.graph_plan import MAX_WIDTHS, column_bucket
from core.system.env import CUDA_GRAPHS_ENV

log = logging.getLogger(__name__)

# One entry per KV cache (graphs bake in its buffers' addresses). Weak keys: a finished conversation's cache
# takes its graphs, stream and pool with it.
_GRAPHS: weakref.WeakKeyDictionary[InPlaceKVCache, "CacheGraphs"] = weakref.WeakKeyDictionary()
# Why capture was given up for this process (None while it works).
_capture_failure: str | None = None


def capture_enabled(device: torch.device) -> bool:
    """Whether fixed-shape forwards are replayed from CUDA graphs on this device."""
    return device.type == "cuda" and os.environ.get(CUDA_GRAPHS_ENV, "1") != "0" and _capture_failure is None


def windowed_step(model: CausalLM) -> bool:
    """Whether plain decoding's one-token step runs windowed (`run_step_forward`, the shape a graph captures):
    the model streams no layer, and the attention fix is on (SPECEXEC_ATTENTION_FIX=0 keeps the old step, whose
    keys grow by a row per token, for the GPU check's "before")."""
    return not model.streams_layers and attention_fix_enabled()


def step_capture_enabled(model: CausalLM) -> bool:
    """Whether the model's one-token step is replayed from CUDA graphs: a windowed step, on CUDA with capture
    on, and a VRAM plan that left room for the graphs."""
    return capture_enabled(model.device) and windowed_step(model) and model.step_graph_room


def windowed_states(model: CausalLM, cache: InPlaceKVCache, hidden, positions, mask, rows, cols: int) -> torch.Tensor:
    """What a graph captures: the decoder stack over embedded tokens `hidden` [1, W, H], the new keys/values
    written at `rows`, attention over rows [0, cols); final-normed hidden states [W, H]."""
    with cache.window(rows, cols):
        return model.decoder_states(hidden, positions, mask, cache)


class CacheGraphs:
    """One KV cache's captured forwards: one capture stream and one memory pool serve all of them."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)
        self.pool = torch.cuda.graph_pool_handle()
        self.forwards: dict[tuple[int, int], CapturedForward] = {}

    def may_capture(self, width: int) -> bool:
        """A new graph of this width stays within MAX_WIDTHS widths."""
        widths = {w for w, _ in self.forwards}
        return width in widths or len(widths) < MAX_WIDTHS


class CapturedForward:
    """One CUDA graph of a windowed forward of a fixed (width, columns) shape on one cache: its static inputs
    and its output, the final-normed hidden states. Keeps no reference to the cache or the model (the graph
    holds their buffers' addresses), so the per-cache registry can let the cache go."""

    def __init__(self, graph: torch.cuda.CUDAGraph, inputs: tuple[torch.Tensor, ...], hidden: torch.Tensor) -> None:
        self.graph, self.inputs, self.hidden = graph, inputs, hidden

    @classmethod
    def capture(
        cls, model: CausalLM, cache: InPlaceKVCache, graphs: CacheGraphs, hidden, positions, mask, rows, cols: int
    ) -> tuple["CapturedForward", torch.Tensor]:
        """Capture the forward on these inputs; returns the graph and the hidden states of this call.

        A warm-up forward on the cache's stream comes first (it compiles Triton kernels and sets up cuBLAS
        outside the capture; its result is this call's, and the KV rows it writes are the ones the call
        writes anyway), then the capture on the same stream, into the cache's pool (nothing runs)."""
        current = torch.cuda.current_stream(model.device)
        inputs = tuple(t.clone() for t in (hidden, positions, mask, rows))
        graphs.stream.wait_stream(current)
        with torch.cuda.stream(graphs.stream):
            first = windowed_states(model, cache, *inputs, cols)
            graph = torch.cuda.CUDAGraph()
            graph.capture_begin(pool=graphs.pool, capture_error_mode="thread_local")
            try:
                output = windowed_states(model, cache, *inputs, cols)
            finally:
                graph.capture_end()
        current.wait_stream(graphs.stream)
        first.record_stream(current)  # read there, allocated on the capture stream
        return cls(graph, inputs, output), first

    def replay(self, hidden, positions, mask, rows) -> torch.Tensor:
        """Hidden states [width, hidden] of the forward on these inputs (the graph's output buffer: read it
        before the next replay of this shape)."""
        for static, value in zip(self.inputs, (hidden, positions, mask, rows)):
            static.copy_(value)
        self.graph.replay()
        return self.hidden


def _give_up_capture(error: BaseException) -> None:
    """Turn graphs off for this process after a failed capture: one log line, the graphs dropped."""
    global _capture_failure
    _capture_failure = f"{type(error).__name__}: {error}"
    _GRAPHS.clear()
    log.warning(
        "CUDA graphs are off for this process: capturing a forward failed (%s); the models run without them, "
        "a little slower.",
        _capture_failure,
    )


def _replayed_states(model: CausalLM, cache: InPlaceKVCache, hidden, positions, mask, rows, cols: int) -> torch.Tensor:
    """`windowed_states` replayed from the cache's graph of this shape, captured by this call if there is none
    yet and the cache may take another width; eagerly otherwise, or after a failed capture."""
    graphs = _GRAPHS.get(cache)
    if graphs is None:
        graphs = _GRAPHS[cache] = CacheGraphs(model.device)
    key = (hidden.shape[1], cols)
    captured = graphs.forwards.get(key)
    if captured is not None:
        return captured.replay(hidden, positions, mask, rows)
    if not graphs.may_capture(key[0]):
        return windowed_states(model, cache, hidden, positions, mask, rows, cols)
    try:
        captured, first = CapturedForward.capture(model, cache, graphs, hidden, positions, mask, rows, cols)
    except RuntimeError as error:  # a driver or library that cannot capture: eager from now on
        _give_up_capture(error)
        return windowed_states(model, cache, hidden, positions, mask, rows, cols)
    graphs.forwards[key] = captured
    return first


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
    Returns logits [W, V]: when `capture_enabled`, the decoder stack replayed from a CUDA graph, the embedding
    and the LM head run eagerly around it (the same kernels as `draft.forward` under the window, which runs
    otherwise: `specexec bench trace` counts draft forwards by that method)."""
    if not capture_enabled(draft.device):
        with cache.window(rows, cols):
            return draft.forward(ids, positions, mask, cache)
    states = _replayed_states(draft, cache, draft.embed(ids), positions, mask, rows, cols)
    return draft.model.lm_head(states)


def run_step_forward(model: CausalLM, cache: InPlaceKVCache, ids: torch.Tensor) -> torch.Tensor:
    """One token of plain decoding on a model that streams no layer (`windowed_step`): ids long [1] on the
    device, at position cache.length; its keys/values written at that row, attention over the column bucket
    that holds it (the columns past it masked), then the cache holds the row. Returns logits [1, V], the same
    as `model.forward` of that token with the attention fix on: the same shapes, masks and kernels. Replayed
    from a CUDA graph when `step_capture_enabled`.

    Raises ContextLengthError when the cache has no row left (before anything runs)."""
    hidden, rows, mask, cols = _step_inputs(model, cache, ids)
    if step_capture_enabled(model):
        states = _replayed_states(model, cache, hidden, rows, mask, rows, cols)
    else:
        states = windowed_states(model, cache, hidden, rows, mask, rows, cols)
    cache.grow(1)
    return model.model.lm_head(states)


def _step_inputs(model: CausalLM, cache: InPlaceKVCache, ids: torch.Tensor):
    """A one-token step's embedded token [1, 1, H], its row (= its position) long [1], its mask
    [1, 1, 1, cols] and its column bucket."""
    length, device = cache.length, model.device
    cache.check_room(length + 1)
    cols = column_bucket(length + 1, cache.capacity)
    rows = torch.arange(length, length + 1, device=device)
    mask = additive_mask(torch.arange(cols, device=device)[None] <= length, model.dtype)
    return model.embed(ids), rows, mask, cols


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
    _check_cuda(draft, "the draft")
    from core.modeling.tree_mask import block_visibility

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
        eager = draft.model.lm_head(windowed_states(draft, cache, draft.embed(ids), rows, mask, rows, cols)).double()
        outputs = [run_draft_forward(draft, cache, ids, rows, mask, rows, cols).double() for _ in range(2)]
        worst = max(worst, _worst_difference(eager, outputs))
    return worst


def compare_step_captured_with_eager(
    model: CausalLM, contexts: tuple[int, ...] = (64, 300, 700), seed: int = 0
) -> float:
    """The same check for a resident target's one-token step (`run_step_forward`): for each context length it
    prefills random tokens up to it, then runs one step of a random token eagerly and twice through the engine's
    capture (the first call captures), dropping the step's row after each, so all three see the same cache.

    Raises InvalidSettingError when the model is not on a CUDA device or its step is not captured
    (`step_capture_enabled`: it streams layers, or graphs are off), RuntimeError when capture failed."""
    _check_cuda(model, "the target")
    if not step_capture_enabled(model):
        raise InvalidSettingError(
            f"{model.name}'s one-token step is not captured (it streams layers, or graphs are off)"
        )
    device = model.device
    generator = torch.Generator(device=device).manual_seed(seed)
    cache = model.new_cache()
    worst = 0.0
    for context in contexts:
        prefix = torch.randint(3, model.vocab_size, (context - cache.length,), device=device, generator=generator)
        model.extend(prefix, cache)
        ids = torch.randint(3, model.vocab_size, (1,), device=device, generator=generator)
        hidden, rows, mask, cols = _step_inputs(model, cache, ids)
        eager = model.model.lm_head(windowed_states(model, cache, hidden, rows, mask, rows, cols)).double()
        outputs = []
        for _ in range(2):
            outputs.append(run_step_forward(model, cache, ids).double())
            cache.crop_to(context)
        worst = max(worst, _worst_difference(eager, outputs))
    return worst


def _check_cuda(model: CausalLM, role: str) -> None:
    if model.device.type != "cuda":
        raise InvalidSettingError(f"CUDA graphs need a CUDA device; {role} is on {model.device}")


def _worst_difference(eager: torch.Tensor, outputs: list[torch.Tensor]) -> float:
    """The largest absolute difference of the captured outputs from the eager one (host syncs: a one-off check).
    Raises RuntimeError when capture failed on the way (the outputs were then eager)."""
    if _capture_failure is not None:
        raise RuntimeError(_capture_failure)
    return max(float((out - eager).abs().max()) for out in outputs)
