"""Draft tree search: Algorithm 2 of the SpecExec paper (parallel best-first search on -log p).

The tree is the K most likely continuations by *cumulative* draft log-probability. Each draft forward
expands the B best not-yet-expanded nodes that are inside the current top K (one global threshold: the
K-th best cumulative log-probability seen so far). Because a child never scores above its parent, the
global top K is a connected subtree, and once every top-K node above the depth cap has been expanded no
unseen node can enter it: the final trim gives exactly the top K.

Cost per target pass: the number of draft forwards is what counts (each is a whole draft model pass, and
on a GPU a forward of a few hundred tokens costs about as much as one of a few). So B grows with the
budget (`expansion_width`: at least K / WIDTH_DIVISOR), which changes which nodes are expanded together
but not the final tree, and `max_forwards` caps the forwards of one pass; when the cap stops the search
early the tree is the top K of the nodes found so far (still a connected subtree, by the same argument).

Bookkeeping is in tensors: the expanded nodes ("E") in expansion order, which is also their order in
the draft KV cache after the root, and a bounded pool of candidate children ("C"). Children come from one
top-k over the flattened [rows x vocabulary] scores. No Python loop runs over nodes, nothing indexes by a
boolean mask, and one host read per draft forward decides how many nodes to expand; forward time is
measured with CUDA events on a GPU, so timing adds no synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.causal_lm import CausalLM
from core.kv_cache import InPlaceKVCache
from core.sampling import draft_logprobs, draft_top_k
from core.timing import ForwardTimer
from core.tree_mask import additive_mask, causal_visibility

# B is at least budget / WIDTH_DIVISOR: a whole budget is expanded in about this many forwards (plus the
# tree's depth, since each forward extends a path by one node).
WIDTH_DIVISOR = 8
# Draft forwards per target pass, the prefill/catch-up forward included: enough for a full-depth chain at
# the default depth cap of 32 (forward j adds the nodes of depth j), so with the default settings the cap
# only stops searches that the width limit would stretch further (65 forwards at K=2048 with B=32 before).
DEFAULT_MAX_FORWARDS = 32


def expansion_width(budget: int, minimum: int) -> int:
    """Nodes expanded per draft forward: `minimum` (the user's B), widened to budget / WIDTH_DIVISOR."""
    return max(minimum, -(-budget // WIDTH_DIVISOR))


@dataclass(frozen=True)
class SearchConfig:
    """budget: draft tokens in the tree (root excluded); max_depth: deepest node; expand: the least number
    of nodes per forward (widened by `expansion_width`); max_forwards: draft forwards per pass, at most."""

    budget: int
    max_depth: int
    expand: int
    temperature: float
    top_p: float | None
    max_forwards: int = DEFAULT_MAX_FORWARDS


@dataclass
class DraftTree:
    """A draft tree in topological order; node 0 is the root (the last known token, not a draft token).

    tokens, parents (-1 for the root), depths: long [N]; cum_logp: [N]; cache_rows: long [N], the node's
    row in the draft KV cache, or -1 when the draft never expanded it (its KV must be recomputed later).
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor
    cum_logp: torch.Tensor
    cache_rows: torch.Tensor
    draft_forwards: int
    forward_seconds: float

    @property
    def size(self) -> int:
        return int(self.tokens.shape[0])


def _grow(tensor: torch.Tensor, rows: int, fill) -> torch.Tensor:
    """Return `tensor` with at least `rows` rows along dim 0 (doubling), new rows set to `fill`."""
    if tensor.shape[0] >= rows:
        return tensor
    new = tensor.new_full((max(rows, 2 * tensor.shape[0]),) + tensor.shape[1:], fill)
    new[: tensor.shape[0]] = tensor
    return new


def _grow_square(reach: torch.Tensor, size: int) -> torch.Tensor:
    if reach.shape[0] >= size:
        return reach
    new_size = max(size, 2 * reach.shape[0])
    new = reach.new_zeros((new_size, new_size))
    new[: reach.shape[0], : reach.shape[1]] = reach
    return new


def _best_children(logits: torch.Tensor, parents: torch.Tensor, e_cum: torch.Tensor, e_depth: torch.Tensor,
                   config: SearchConfig) -> tuple[torch.Tensor, ...]:
    """The `budget` best children of the rows just expanded, by cumulative log-prob, from one top-k over
    the flattened scores (only these can enter the pool, which keeps the budget best).

    logits: [b, V] for the nodes `parents` (E indices, long [b]). Returns (token, parent, depth, cum), each
    [c] with c = min(budget, b * V), best first; cum is float64, -inf for tokens the draft excludes.
    """
    if config.top_p is None or config.top_p >= 1.0:
        logp, ids = draft_logprobs(logits, config.temperature, None), None  # [b, V] in the work dtype
    else:  # truncated draft: each row's nucleus first (short, found without sorting the vocabulary)
        logp, ids = draft_top_k(logits, config.temperature, config.top_p, config.budget)  # [b, k'] each
    width = logp.shape[-1]
    parent_cum = e_cum[parents]  # [b] float64
    scores = (logp + parent_cum.to(logp.dtype)[:, None]).reshape(-1)  # [b * width]: ranks the children
    flat = torch.topk(scores, min(config.budget, scores.shape[0])).indices  # [c]
    rows = flat // width
    tokens = flat % width if ids is None else ids.reshape(-1)[flat]
    cum = parent_cum[rows] + logp.reshape(-1)[flat].double()  # exact sum in float64
    return tokens, parents[rows], e_depth[parents][rows] + 1, cum


def build_draft_tree(
    draft: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    config: SearchConfig,
) -> DraftTree:
    """Grow the draft tree rooted at the last of `pending` on top of `cache`.

    `pending`: long [P], tokens the draft cache does not hold yet; the last one is the root. The first
    forward processes them all (prefill or catch-up) together with the root's expansion. Afterwards the
    cache holds its old rows, the pending tokens, then every expanded node in expansion order.
    """
    device = draft.device
    k = config.budget
    depth_cap = config.max_depth
    width = expansion_width(k, config.expand)
    pending = pending.to(device)
    root_row = cache.length + pending.shape[0] - 1  # cache row and absolute position of the root

    if depth_cap <= 0 or k <= 0:
        zero = torch.zeros(1, dtype=torch.long, device=device)
        return DraftTree(
            tokens=pending[-1:].clone(), parents=zero - 1, depths=zero, cum_logp=torch.zeros(1, device=device),
            cache_rows=zero - 1, draft_forwards=0, forward_seconds=0.0,
        )

    timer = ForwardTimer(device)
    visible = causal_visibility(cache.length, pending.shape[0], device)
    positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
    with timer:
        logits = draft.forward(pending, positions, additive_mask(visible, draft.dtype), cache, logit_rows=slice(-1, None))
    forwards = 1

    # Expanded nodes E (index 0 = root); E index j lives at cache row root_row + j.
    capacity = k + width + 1
    e_token = torch.full((capacity,), -1, dtype=torch.long, device=device)
    e_parent = torch.full((capacity,), -1, dtype=torch.long, device=device)
    e_depth = torch.zeros(capacity, dtype=torch.long, device=device)
    e_cum = torch.zeros(capacity, dtype=torch.float64, device=device)
    reach = torch.zeros((capacity, capacity), dtype=torch.bool, device=device)  # reach[i, j]: j is i or its ancestor
    e_token[0] = pending[-1]
    reach[0, 0] = True
    n_expanded = 1

    # Candidate pool C: children of expanded nodes, never expanded, the k best, sorted best first.
    c_token = c_parent = c_depth = torch.empty(0, dtype=torch.long, device=device)
    c_cum = torch.empty(0, dtype=torch.float64, device=device)

    new_parents = torch.zeros(1, dtype=torch.long, device=device)  # E indices of the rows in `logits`
    while True:
        children = _best_children(logits, new_parents, e_cum, e_depth, config)
        c_token, c_parent, c_depth, c_cum = (torch.cat([old, new]) for old, new in zip((c_token, c_parent, c_depth, c_cum), children))
        # trim the pool to its k best (a stable sort keeps earlier entries first on ties)
        order = torch.sort(c_cum, descending=True, stable=True).indices[:k]
        c_token, c_parent, c_depth, c_cum = c_token[order], c_parent[order], c_depth[order], c_cum[order]
        if forwards >= config.max_forwards:
            break

        # global threshold: the k-th best cumulative log-prob among all non-root nodes known so far
        known = torch.cat([e_cum[1:n_expanded], c_cum])
        threshold = torch.topk(known, k).values[-1] if known.shape[0] >= k else known.new_tensor(-float("inf"))
        expandable = (c_cum >= threshold) & (c_depth < depth_cap) & torch.isfinite(c_cum)
        # the first `width` expandable entries of the sorted pool are the best; a stable sort on "not
        # picked" lists them first (in pool order), then the rest of the pool (in pool order). Never more
        # than the draft cache has rows left: the search expands more nodes than the budget (the top K
        # shifts as it goes), and near the planned context those rows run out; the tree is then the top K
        # of the nodes found, as when max_forwards stops the search.
        picked = expandable & (torch.cumsum(expandable, 0) <= min(width, cache.capacity - cache.length))
        count = int(picked.sum())  # host sync, deliberate: the batch size of the next draft forward
        if count == 0:
            break
        moved = torch.sort((~picked).to(torch.uint8), stable=True).indices
        take, rest = moved[:count], moved[count:]

        # move the picked candidates from C to E
        new_index = torch.arange(n_expanded, n_expanded + count, device=device)
        capacity = n_expanded + count
        e_token, e_parent = _grow(e_token, capacity, -1), _grow(e_parent, capacity, -1)
        e_depth, e_cum = _grow(e_depth, capacity, 0), _grow(e_cum, capacity, 0.0)
        reach = _grow_square(reach, capacity)
        e_token[new_index] = c_token[take]
        e_parent[new_index] = c_parent[take]
        e_depth[new_index] = c_depth[take]
        e_cum[new_index] = c_cum[take]
        reach[new_index] = reach[c_parent[take]]
        reach[new_index, new_index] = True
        c_token, c_parent, c_depth, c_cum = c_token[rest], c_parent[rest], c_depth[rest], c_cum[rest]

        # draft forward over the new nodes: each sees the committed prefix, its ancestors and itself
        # visible: [count, cache.length + count]
        tree_cols = cache.length - root_row
        visible = torch.zeros((count, cache.length + count), dtype=torch.bool, device=device)
        visible[:, :root_row] = True
        visible[:, root_row:cache.length] = reach[new_index, :tree_cols]
        visible[:, cache.length:] = torch.eye(count, dtype=torch.bool, device=device)
        with timer:
            logits = draft.forward(
                e_token[new_index], root_row + e_depth[new_index], additive_mask(visible, draft.dtype), cache
            )
        forwards += 1
        new_parents = new_index
        n_expanded += count

    return _final_tree(
        e_token[:n_expanded], e_parent[:n_expanded], e_depth[:n_expanded], e_cum[:n_expanded],
        c_token, c_parent, c_depth, c_cum, k, root_row, forwards, timer.seconds(),
    )


def _final_tree(
    e_token, e_parent, e_depth, e_cum, c_token, c_parent, c_depth, c_cum,
    k: int, root_row: int, forwards: int, forward_seconds: float,
) -> DraftTree:
    """Trim E (minus the root) and C to the k best nodes, in topological order, parents re-indexed."""
    n_e = e_token.shape[0]
    device = e_token.device
    # all nodes: E first (expansion order is topological), then C (parents always in E)
    token = torch.cat([e_token, c_token])
    parent = torch.cat([e_parent, c_parent])
    depth = torch.cat([e_depth, c_depth])
    cum = torch.cat([e_cum, c_cum])
    rows = torch.cat([root_row + torch.arange(n_e, device=device), torch.full_like(c_token, -1)])
    # stable sort by cumulative log-prob: a parent never scores below its child and comes first on ties;
    # candidates the draft excludes (-inf) sort last and never enter the tree
    finite = int(torch.isfinite(cum[1:]).sum())  # host sync, once per search: the tree's size
    order = torch.sort(cum[1:], descending=True, stable=True).indices[: min(k, finite)] + 1
    # sorting by score is already topological (see above); the root goes first
    selected = torch.cat([torch.zeros(1, dtype=torch.long, device=device), order])
    new_index = torch.full((token.shape[0],), -1, dtype=torch.long, device=device)
    new_index[selected] = torch.arange(selected.shape[0], device=device)
    old_parent = parent[selected]
    new_parent = torch.where(old_parent >= 0, new_index[old_parent.clamp_min(0)], old_parent)
    return DraftTree(
        tokens=token[selected], parents=new_parent, depths=depth[selected], cum_logp=cum[selected],
        cache_rows=rows[selected], draft_forwards=forwards, forward_seconds=forward_seconds,
    )
