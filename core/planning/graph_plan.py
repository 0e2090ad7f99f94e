"""The shapes the engine's CUDA graphs are captured at, and the VRAM they keep: pure arithmetic, no torch.

core/decoding/captured_forward.py captures one graph per (width, column bucket) of a KV cache, all sharing one
memory pool and one capture stream: the draft's search forwards (`draft_graph_bytes`) and a resident target's
one-token step (`step_graph_bytes`). What they may keep: the pool's scratch (the largest forward's
intermediates), per graph its static inputs (the embedded tokens among them), its output and its executable,
and the capture stream's cuBLAS workspace. The engine computes the draft's scratch from its own forward on the
meta device (core/decoding/graph_memory.py); the app's fit prediction, which has no torch, and the offloaded
target's loader (below the decoding layer) use `scratch_estimate_bytes`, which tests/test_draft_graphs.py and
tests/test_step_graphs.py hold to at least the meta-device figure.
"""

from __future__ import annotations

# A search forward expands at least this many nodes (TreeSettings' default B) ...
DEFAULT_EXPAND = 32
# ... and at least budget / WIDTH_DIVISOR: a whole budget is expanded in about this many forwards (plus the
# tree's depth, since each forward extends a path by one node).
WIDTH_DIVISOR = 8
# Column buckets: multiples of SMALL_STEP up to SMALL_LIMIT, then each about GROWTH times the last, rounded
# up to SMALL_STEP. A bucket past what a forward needs costs only attention over masked columns, a small
# part of a draft forward next to reading its weights.
SMALL_STEP = 256
SMALL_LIMIT = 1024
GROWTH = 1.25
# Widths captured per draft cache; a forward of another width runs eagerly (near the end of the planned
# context the search narrows its blocks, and those one-off widths are not worth a graph each).
MAX_WIDTHS = 4
# cuBLAS workspace of a new stream: CUBLAS_WORKSPACE_CONFIG's default is 32 MiB on Hopper and newer
# (":4096:8"), about 8 MiB before; the plan reserves the larger.
CUBLAS_WORKSPACE_BYTES = 32 * 1024**2
# Device memory of one instantiated graph of a draft forward (~1,000-1,500 kernel nodes): an estimate,
# compared with a measurement on an H100 in docs/benchmarks.md (issue 31).
GRAPH_EXEC_BYTES = 2 * 1024**2
# ... for a forward through this many decoder layers (an 8B draft's); deeper models' graphs have more nodes.
GRAPH_EXEC_LAYERS = 32


def expansion_width(budget: int, minimum: int) -> int:
    """Nodes expanded per draft forward: `minimum` (the user's B), widened to budget / WIDTH_DIVISOR."""
    return max(minimum, -(-budget // WIDTH_DIVISOR))


def search_width(budget: int, expand: int = DEFAULT_EXPAND) -> int:
    """Rows of every search forward of a pass at this tree budget (never more than the budget)."""
    return min(expansion_width(budget, expand), budget)


# With the overlap on (core.decoding.methods.specexec), the search's candidate pool (and the shadow's budget) is
# this many times the tree's: the shadow keeps growing best-first inside it, so the subtree under whichever
# token the target emits is several times what the next tree needs. Here because the speed model
# (core.models.speed, no torch) sizes the shadow the same way.
OVERLAP_POOL_FACTOR = 4


def overlap_pool(budget: int) -> int:
    """Candidates the search keeps, and the shadow's budget, with the overlap on."""
    return OVERLAP_POOL_FACTOR * budget


def pool_forwards(budget: int, width: int) -> int:
    """Forwards of `width` rows that expand the whole overlap pool once: the most a shadow search can use."""
    return -(-overlap_pool(budget) // max(width, 1))


def column_bucket(needed: int, capacity: int) -> int:
    """Attention columns of a search forward that needs `needed`: the smallest bucket that holds them. The
    cache's `capacity` is its last bucket, and takes the place of a bucket within SMALL_STEP below it."""
    bucket = SMALL_STEP
    while bucket < needed:
        bucket = bucket + SMALL_STEP if bucket < SMALL_LIMIT else -(-int(bucket * GROWTH) // SMALL_STEP) * SMALL_STEP
    return capacity if bucket > capacity - SMALL_STEP else bucket


def column_buckets(capacity: int) -> list[int]:
    """Every bucket a cache of `capacity` rows can use, smallest first."""
    buckets = [column_bucket(1, capacity)]
    while buckets[-1] < capacity:
        buckets.append(column_bucket(buckets[-1] + 1, capacity))
    return buckets


def grouped_attention(rows: int, kv_heads: int, head_dim: int) -> bool:
    """Whether core.modeling.attention stacks grouped query heads for a forward of `rows` query rows (it does while
    repeating the mask writes less than repeating the keys and values)."""
    return rows < 2 * kv_heads * head_dim


def scratch_estimate_bytes(config, dtype_bytes: int, width: int, capacity: int) -> int:
    """For a draft of this config (a transformers config or a core.planning.sizes.ModelShape), an upper bound
    of a search forward's intermediates at `width` rows over `capacity` columns, as core.decoding.graph_memory counts
    them on the meta device with the GPU's fused attention: the mask repeated once per group of query heads
    (or, past `grouped_attention`'s rows, the keys and values repeated per head), the query, key and output
    copies around attention, the MLP's three intermediates and a few hidden-state copies."""
    hidden, heads, intermediate = config.hidden_size, config.num_attention_heads, config.intermediate_size
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    groups = heads // kv_heads
    if groups == 1:
        repeated = 0
    elif grouped_attention(width, kv_heads, head_dim):
        repeated = groups * width * capacity * dtype_bytes
    else:
        repeated = 2 * heads * capacity * head_dim * dtype_bytes
    attention = 8 * width * heads * head_dim * dtype_bytes
    return repeated + attention + 3 * width * intermediate * dtype_bytes + 6 * width * hidden * dtype_bytes


def graph_exec_bytes(layers: int) -> int:
    """Device memory of one instantiated graph of a forward through `layers` decoder layers: GRAPH_EXEC_BYTES
    per GRAPH_EXEC_LAYERS layers begun."""
    return GRAPH_EXEC_BYTES * max(1, -(-layers // GRAPH_EXEC_LAYERS))


def graph_kept_bytes(
    hidden: int, dtype_bytes: int, width: int, capacity: int, exec_bytes: int = GRAPH_EXEC_BYTES
) -> int:
    """What the graphs of one width keep beyond the pool's scratch, over every column bucket: static inputs
    (positions, rows; the embedded tokens; the mask), the output hidden states and each graph's executable."""
    return sum(
        2 * width * 8 + width * cols * dtype_bytes + 2 * width * hidden * dtype_bytes + exec_bytes
        for cols in column_buckets(capacity)
    )


def draft_graph_bytes(scratch_bytes: int, hidden: int, dtype_bytes: int, width: int, capacity: int) -> int:
    """VRAM the captured search forwards of one draft cache may keep: the pool's scratch, MAX_WIDTHS widths
    of graphs (each counted at `width`, the widest), and the capture stream's cuBLAS workspace."""
    return scratch_bytes + MAX_WIDTHS * graph_kept_bytes(hidden, dtype_bytes, width, capacity) + CUBLAS_WORKSPACE_BYTES


def step_graph_bytes(config, dtype_bytes: int, capacity: int) -> int:
    """VRAM the captured one-token steps of a resident target's cache of `capacity` rows may keep (a transformers
    config or a core.planning.sizes.ModelShape): the scratch bound at one row, one graph per column bucket
    (its executable sized for the model's depth), and the capture stream's cuBLAS workspace."""
    exec_bytes = graph_exec_bytes(config.num_hidden_layers)
    return (
        scratch_estimate_bytes(config, dtype_bytes, 1, capacity)
        + graph_kept_bytes(config.hidden_size, dtype_bytes, 1, capacity, exec_bytes)
        + CUBLAS_WORKSPACE_BYTES
    )
