"""Draft tree search: Algorithm 2 of the SpecExec paper (parallel best-first search on -log p).

The tree is the K most likely continuations by *cumulative* draft log-probability. Each draft forward
expands the B best not-yet-expanded nodes that are inside the current top K (one global threshold: the
K-th best cumulative log-probability seen so far). Because a child never scores above its parent, the
global top K is a connected subtree, and once every top-K node above the depth cap has been expanded no
unseen node can enter it: the final trim gives exactly the top K.

Bookkeeping is in tensors: the expanded nodes ("E") in expansion order, which is also their order in
the draft KV cache after the root, and a bounded pool of candidate children ("C"). No Python loop runs
over nodes; one host sync per draft forward decides how many nodes to expand.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from core.causal_lm import CausalLM
from core.kv_cache import InPlaceKVCache
from core.sampling import draft_top_k
from core.tree_mask import additive_mask, causal_visibility
from core.timing import synchronize


@dataclass(frozen=True)
class SearchConfig:
    """budget: draft tokens in the tree (root excluded); max_depth: deepest node; expand: nodes per forward."""

    budget: int
    max_depth: int
    expand: int
    temperature: float
    top_p: float | None


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
    pending = pending.to(device)
    root_row = cache.length + pending.shape[0] - 1  # cache row and absolute position of the root
    empty_long = torch.empty(0, dtype=torch.long, device=device)

    if depth_cap <= 0 or k <= 0:
        zero = torch.zeros(1, dtype=torch.long, device=device)
        return DraftTree(
            tokens=pending[-1:].clone(), parents=zero - 1, depths=zero, cum_logp=torch.zeros(1, device=device),
            cache_rows=zero - 1, draft_forwards=0, forward_seconds=0.0,
        )

    forward_seconds = 0.0
    started = time.perf_counter()
    visible = causal_visibility(cache.length, pending.shape[0], device)
    positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
    logits = draft.forward(pending, positions, additive_mask(visible, draft.dtype), cache, logit_rows=slice(-1, None))
    synchronize(device)
    forward_seconds += time.perf_counter() - started
    forwards = 1

    # Expanded nodes E (index 0 = root); E index j lives at cache row root_row + j.
    capacity = k + config.expand + 1
    e_token = torch.full((capacity,), -1, dtype=torch.long, device=device)
    e_parent = torch.full((capacity,), -1, dtype=torch.long, device=device)
    e_depth = torch.zeros(capacity, dtype=torch.long, device=device)
    e_cum = torch.zeros(capacity, dtype=torch.float64, device=device)
    reach = torch.zeros((capacity, capacity), dtype=torch.bool, device=device)  # reach[i, j]: j is i or its ancestor
    e_token[0] = pending[-1]
    reach[0, 0] = True
    n_expanded = 1

    # Candidate pool C: children of expanded nodes, never expanded, at most k of them.
    c_token, c_parent, c_depth = empty_long, empty_long, empty_long
    c_cum = torch.empty(0, dtype=torch.float64, device=device)

    new_parents = torch.zeros(1, dtype=torch.long, device=device)  # E indices of the rows in `logits`
    while True:
        # children of the nodes just expanded: top-k per row by cumulative log-probability
        # logits: [b, V] -> top_vals, top_ids: [b, k]
        top_vals, top_ids = draft_top_k(logits, config.temperature, config.top_p, k)
        top_vals = top_vals.double()
        child_cum = (e_cum[new_parents][:, None] + top_vals).reshape(-1)
        child_token = top_ids.reshape(-1)
        child_parent = new_parents[:, None].expand_as(top_ids).reshape(-1)
        child_depth = (e_depth[new_parents] + 1)[:, None].expand_as(top_ids).reshape(-1)
        keep = torch.isfinite(child_cum)
        c_token = torch.cat([c_token, child_token[keep]])
        c_parent = torch.cat([c_parent, child_parent[keep]])
        c_depth = torch.cat([c_depth, child_depth[keep]])
        c_cum = torch.cat([c_cum, child_cum[keep]])

        # trim the pool to its k best (a stable sort keeps earlier entries first on ties)
        order = torch.sort(c_cum, descending=True, stable=True).indices[:k]
        c_token, c_parent, c_depth, c_cum = c_token[order], c_parent[order], c_depth[order], c_cum[order]

        # global threshold: the k-th best cumulative log-prob among all non-root nodes known so far
        known = torch.cat([e_cum[1:n_expanded], c_cum])
        threshold = torch.topk(known, k).values[-1] if known.shape[0] >= k else known.new_tensor(-float("inf"))
        expandable = (c_cum >= threshold) & (c_depth < depth_cap)
        picked = torch.nonzero(expandable).squeeze(-1)[: config.expand]  # pool is sorted: these are the best
        count = int(picked.shape[0])  # host sync: the batch size of the next draft forward
        if count == 0:
            break

        # move the picked candidates from C to E
        new_index = torch.arange(n_expanded, n_expanded + count, device=device)
        capacity = n_expanded + count
        e_token, e_parent = _grow(e_token, capacity, -1), _grow(e_parent, capacity, -1)
        e_depth, e_cum = _grow(e_depth, capacity, 0), _grow(e_cum, capacity, 0.0)
        reach = _grow_square(reach, capacity)
        e_token[new_index] = c_token[picked]
        e_parent[new_index] = c_parent[picked]
        e_depth[new_index] = c_depth[picked]
        e_cum[new_index] = c_cum[picked]
        reach[new_index] = reach[c_parent[picked]]
        reach[new_index, new_index] = True
        remaining = torch.ones_like(c_cum, dtype=torch.bool)
        remaining[picked] = False
        c_token, c_parent, c_depth, c_cum = c_token[remaining], c_parent[remaining], c_depth[remaining], c_cum[remaining]

        # draft forward over the new nodes: each sees the committed prefix, its ancestors and itself
        # visible: [count, cache.length + count]
        tree_cols = cache.length - root_row
        visible = torch.zeros((count, cache.length + count), dtype=torch.bool, device=device)
        visible[:, :root_row] = True
        visible[:, root_row:cache.length] = reach[new_index, :tree_cols]
        visible[:, cache.length:] = torch.eye(count, dtype=torch.bool, device=device)
        started = time.perf_counter()
        logits = draft.forward(
            e_token[new_index], root_row + e_depth[new_index], additive_mask(visible, draft.dtype), cache
        )
        synchronize(device)
        forward_seconds += time.perf_counter() - started
        forwards += 1
        new_parents = new_index
        n_expanded += count

    return _final_tree(
        e_token[:n_expanded], e_parent[:n_expanded], e_depth[:n_expanded], e_cum[:n_expanded],
        c_token, c_parent, c_depth, c_cum, k, root_row, forwards, forward_seconds,
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
    # stable sort by cumulative log-prob: a parent never scores below its child and comes first on ties
    order = torch.sort(cum[1:], descending=True, stable=True).indices[:k] + 1
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
