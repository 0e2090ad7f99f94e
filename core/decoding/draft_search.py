"""Draft tree search: Algorithm 2 of the SpecExec paper (parallel best-first search on -log p).

The tree is the K most likely continuations by *cumulative* draft log-probability. Each draft forward
expands the B best not-yet-expanded nodes that are inside the current top K (one global threshold: the
K-th best cumulative log-probability seen so far). Because a child never scores above its parent, the
global top K is a connected subtree, and once every top-K node above the depth cap has been expanded no
unseen node can enter it: the final trim gives exactly the top K.

Cost per target pass: the number of draft forwards is what counts (each is a whole draft model pass, and
on a GPU a forward of a few hundred tokens costs about as much as one of a few). So B grows with the
budget (core.planning.graph_plan.search_width: at least K / WIDTH_DIVISOR), which changes which nodes are expanded
together but not the final tree. The caller says how many forwards a pass makes (adaptive depth,
core/decoding/autotune/depth.py, or `max_forwards`); when that stops the search early the tree is the top K of the
nodes found so far (still a connected subtree, by the same argument).

Static shapes, no host reads (the GPU loop): the search runs a number of forwards fixed on the host, every
forward expands exactly B rows (the picked candidates first, padding rows after them, masked), and all the
bookkeeping is in device tensors of fixed size: the expanded nodes ("E") in expansion order, which is also
their order in the draft KV cache after the root, and a pool of the K best candidate children ("C").
Children come from one top-k over the flattened [rows x vocabulary] scores. The forward writes its KV rows
at a device-held offset and attends over a bucketed column count (core/decoding/draft_forward.py), so on CUDA it is
replayed from a CUDA graph. The tree comes out at its full size K + 1 with a `valid` mask (a tree has fewer
real nodes only when the draft excludes tokens or the search is cut short), together with its ancestor
matrix, so the target pass needs no read either.

On a CPU, where reading a value costs nothing (core.decoding.device_io.host_reads_are_free), the same search reads
how many nodes each forward expands: it runs forwards of exactly that width and stops when nothing is left
to expand, which builds the identical tree without computing padding rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.modeling.causal_lm import CausalLM
from core.decoding.device_io import host_reads_are_free
from core.decoding.draft_forward import run_draft_forward
from core.planning.graph_plan import column_bucket, search_width
from core.modeling.kv_cache import InPlaceKVCache
from core.decoding.sampling import draft_logprobs, draft_top_k
from core.decoding.timing import ForwardTimer
from core.modeling.tree_mask import additive_mask, causal_visibility

# Draft forwards per target pass, the prefill/catch-up forward included: enough for a full-depth chain at
# the default depth cap of 32 (forward j adds the nodes of depth j). With adaptive depth off a GPU pass
# makes exactly this many (it cannot see that the tree is complete without a host read).
DEFAULT_MAX_FORWARDS = 32


@dataclass(frozen=True)
class SearchConfig:
    """budget: draft tokens in the tree (root excluded); max_depth: deepest node; expand: the least number
    of nodes per forward (widened by core.planning.graph_plan.expansion_width); max_forwards: draft forwards per pass, at most."""

    budget: int
    max_depth: int
    expand: int
    temperature: float
    top_p: float | None
    max_forwards: int = DEFAULT_MAX_FORWARDS
    # A grammar's masks for the children of expanded nodes (core.decoding.constraints.GrammarConstraint.child_allowed:
    # (E tokens, E parents, E indices of the rows) -> bool [rows, V]); None: every token may be proposed.
    child_mask: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None


@dataclass
class DraftTree:
    """A draft tree of fixed size N (= budget + 1, or 1 without draft tokens) in topological order; node 0
    is the root (the last known token, not a draft token). All tensors are on the draft's device.

    tokens, parents (-1 for the root), depths: long [N]; cum_logp: float64 [N]; cache_rows: long [N], the
    node's row in the draft KV cache, or -1 when the draft never expanded it (its KV must be recomputed
    later); births: long [N], the draft forward (1-based) whose logits proposed the node, 0 for the root;
    valid: bool [N], False for padding nodes (they have no parent, depth 0, and see only themselves);
    reach: bool [N, N], reach[i, j] when j is i or an ancestor of i.
    root_row: the root's row in the draft cache; max_depth: a host bound on the depth of any node.
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor
    cum_logp: torch.Tensor
    cache_rows: torch.Tensor
    births: torch.Tensor
    valid: torch.Tensor
    reach: torch.Tensor
    root_row: int
    max_depth: int
    draft_forwards: int
    timer: ForwardTimer

    @property
    def size(self) -> int:
        """N, padding nodes included."""
        return int(self.tokens.shape[0])


def _best_children(logits: torch.Tensor, parents: torch.Tensor, e_cum: torch.Tensor, e_depth: torch.Tensor,
                   config: SearchConfig) -> tuple[torch.Tensor, ...]:
    """The `budget` best children of the rows just expanded, by cumulative log-prob, from one top-k over
    the flattened scores (only these can enter the pool, which keeps the budget best).

    logits: [b, V] for the nodes `parents` (E indices, long [b]; a padding row's node scores -inf, so its
    children do too). Returns (token, parent, depth, cum), each [c] with c = min(budget, b * V), best
    first; cum is float64, -inf for tokens the draft excludes.
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


def _fit_vocab(mask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """A mask over the target's vocabulary [b, V'] cut or padded (with False) to the draft's V."""
    if mask.shape[-1] >= vocab_size:
        return mask[:, :vocab_size]
    return torch.nn.functional.pad(mask, (0, vocab_size - mask.shape[-1]))


def _root_only(pending: torch.Tensor, root_row: int) -> DraftTree:
    device = pending.device
    zero = torch.zeros(1, dtype=torch.long, device=device)
    return DraftTree(
        tokens=pending[-1:].clone(), parents=zero - 1, depths=zero, cum_logp=torch.zeros(1, dtype=torch.float64, device=device),
        cache_rows=zero - 1, births=zero, valid=torch.ones(1, dtype=torch.bool, device=device),
        reach=torch.ones((1, 1), dtype=torch.bool, device=device), root_row=root_row, max_depth=0,
        draft_forwards=0, timer=ForwardTimer(device),
    )


def build_draft_tree(
    draft: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    config: SearchConfig,
    forwards: int | None = None,
) -> DraftTree:
    """Grow the draft tree rooted at the last of `pending` on top of `cache`.

    `pending`: long [P] on the draft's device, tokens the draft cache does not hold yet; the last one is the
    root. The first forward processes them all (prefill or catch-up) together with the root's expansion.
    `forwards`: draft forwards to make, the first included (None: config.max_forwards; never more).
    Afterwards the cache holds its old rows and the pending tokens (`length`), and beyond them, written
    through a window, every expanded node in expansion order (committed by keep_rows after verification).
    """
    device = draft.device
    k = config.budget
    depth_cap = config.max_depth
    root_row = cache.length + pending.shape[0] - 1  # cache row and absolute position of the root
    if depth_cap <= 0 or k <= 0:
        return _root_only(pending, root_row)
    total_forwards = max(1, min(config.max_forwards, forwards or config.max_forwards))
    # Each expansion forward writes a block of `width` rows after the last expanded node; every block must
    # fit below the cache's capacity, so near the planned context the tree is the top K of fewer nodes.
    room = cache.capacity - root_row - 1
    width = min(search_width(k, config.expand), room)
    if width <= 0:
        total_forwards = 1
    expand_limit = room + 1 - width  # E indices a block may start at, at most
    read_free = host_reads_are_free(device)

    timer = ForwardTimer(device)
    visible = causal_visibility(cache.length, pending.shape[0], device)
    positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
    with timer:
        logits = draft.forward(pending, positions, additive_mask(visible, draft.dtype), cache, logit_rows=slice(-1, None))

    # Expanded nodes E (index 0 = root); E index j lives at cache row root_row + j. Unused slots score -inf.
    e_size = min(1 + max(width, 0) * (total_forwards - 1), room + 1) if total_forwards > 1 else 1
    e_token = torch.zeros(e_size, dtype=torch.long, device=device)
    e_token[:1] = pending[-1:]
    e_parent = torch.full((e_size,), -1, dtype=torch.long, device=device)
    e_depth = torch.zeros(e_size, dtype=torch.long, device=device)
    e_birth = torch.zeros(e_size, dtype=torch.long, device=device)
    e_cum = torch.full((e_size,), -torch.inf, dtype=torch.float64, device=device)
    e_cum[:1] = 0.0
    reach = torch.zeros((e_size, e_size), dtype=torch.bool, device=device)  # reach[i, j]: j is i or its ancestor
    reach[0, 0] = True
    n_expanded = torch.ones(1, dtype=torch.long, device=device)  # E nodes so far, on the device

    # Candidate pool C: children of expanded nodes, never expanded, the k best, best first (-inf = empty).
    c_token = torch.zeros(k, dtype=torch.long, device=device)
    c_parent = torch.zeros(k, dtype=torch.long, device=device)
    c_depth = torch.zeros(k, dtype=torch.long, device=device)
    c_birth = torch.zeros(k, dtype=torch.long, device=device)
    c_cum = torch.full((k,), -torch.inf, dtype=torch.float64, device=device)

    new_parents = torch.zeros(1, dtype=torch.long, device=device)  # E indices of the rows in `logits`
    forward = 1
    while True:
        if config.child_mask is not None:  # a grammar: the draft proposes only what it allows
            logits = logits.masked_fill(~_fit_vocab(config.child_mask(e_token, e_parent, new_parents), logits.shape[-1]), -torch.inf)
        token, parent, depth, cum = _best_children(logits, new_parents, e_cum, e_depth, config)
        birth = torch.full_like(token, forward)
        # the pool's k best (a stable sort keeps earlier entries first on ties: parents before children)
        merged = [torch.cat(pair) for pair in ((c_token, token), (c_parent, parent), (c_depth, depth), (c_birth, birth), (c_cum, cum))]
        order = torch.sort(merged[-1], descending=True, stable=True).indices[:k]
        c_token, c_parent, c_depth, c_birth, c_cum = (values[order] for values in merged)
        if forward >= total_forwards:
            break

        # global threshold: the k-th best cumulative log-prob among all non-root nodes known so far
        threshold = torch.topk(torch.cat([e_cum[1:], c_cum]), k).values[-1]
        expandable = (c_cum >= threshold) & (c_depth < depth_cap) & torch.isfinite(c_cum)
        rank = torch.cumsum(expandable, 0)
        picked = expandable & (rank <= width) & (n_expanded + rank <= expand_limit)
        rows_now = width
        if read_free:  # a CPU: read how many were picked (free) and compute only those rows
            rows_now = int(picked.sum())
            if rows_now == 0:
                break
        # the picked entries of the sorted pool first (in pool order), then padding rows
        take = torch.sort((~picked).to(torch.uint8), stable=True).indices[:rows_now]
        real = picked[take]  # bool [rows_now]: False for padding rows
        new_index = n_expanded + torch.arange(rows_now, device=device)  # E indices of this block
        e_token.index_copy_(0, new_index, c_token[take])
        e_parent.index_copy_(0, new_index, c_parent[take])
        e_depth.index_copy_(0, new_index, c_depth[take])
        e_birth.index_copy_(0, new_index, c_birth[take])
        e_cum.index_copy_(0, new_index, torch.where(real, c_cum[take], -torch.inf))
        own = torch.zeros((rows_now, e_size), dtype=torch.bool, device=device).scatter_(1, new_index[:, None], True)
        reach.index_copy_(0, new_index, (reach[c_parent[take]] | own) & real[:, None])
        c_cum = c_cum.index_put((take,), torch.where(real, -torch.inf, c_cum[take]))  # they leave the pool
        # the block starts at E index n_expanded: read it where that is free, else its bound
        bound = int(n_expanded) if read_free else min(1 + width * (forward - 1), expand_limit)

        # draft forward over the block: each row sees the committed prefix, its ancestors and itself
        # visible: [rows_now, cols]; E index j is column root_row + j
        cols = column_bucket(root_row + bound + rows_now, cache.capacity)  # the prefix, root and tree so far
        visible = torch.zeros((rows_now, cols), dtype=torch.bool, device=device)
        visible[:, :root_row] = True
        tree_cols = min(cols - root_row, e_size)
        visible[:, root_row : root_row + tree_cols] = reach[new_index, :tree_cols]
        with timer:
            logits = run_draft_forward(
                draft, cache, e_token[new_index], root_row + e_depth[new_index],
                additive_mask(visible, draft.dtype), root_row + new_index, cols,
            )
        n_expanded = n_expanded + real.sum()
        new_parents = new_index
        forward += 1

    return _final_tree(
        (e_token, e_parent, e_depth, e_birth, e_cum), (c_token, c_parent, c_depth, c_birth, c_cum), reach,
        k, root_row, min(depth_cap, forward), forward, timer,
    )


def _final_tree(e_nodes: tuple[torch.Tensor, ...], c_nodes: tuple[torch.Tensor, ...], e_reach: torch.Tensor,
                k: int, root_row: int, max_depth: int, forwards: int, timer: ForwardTimer) -> DraftTree:
    """Trim E (minus the root) and C to the k best nodes, in topological order, parents re-indexed, with
    the ancestor matrix of the result. Fixed size k + 1; slots past the finite nodes are padding."""
    e_size = e_nodes[0].shape[0]
    device = e_reach.device
    # all nodes: E first (expansion order is topological), then C (parents always in E)
    token, parent, depth, birth, cum = (torch.cat(pair) for pair in zip(e_nodes, c_nodes))
    is_e = torch.arange(token.shape[0], device=device) < e_size
    # stable sort by cumulative log-prob: a parent never scores below its child and comes first on ties;
    # candidates the draft excludes (-inf) sort last and are padding
    order = torch.sort(cum[1:], descending=True, stable=True).indices[:k] + 1
    selected = torch.cat([torch.zeros(1, dtype=torch.long, device=device), order])  # [n], root first
    n = selected.shape[0]
    valid = torch.isfinite(cum[selected])
    new_index = torch.full((token.shape[0],), -1, dtype=torch.long, device=device)
    new_index[selected] = torch.arange(n, device=device)
    old_parent = parent[selected]
    new_parent = torch.where(valid & (old_parent >= 0), new_index[old_parent.clamp_min(0)], -1)
    # ancestors: an E node's row of e_reach, a C node's parent's row; then the columns of the selected E nodes
    sel_e = is_e[selected]
    e_row = torch.where(sel_e, selected, parent[selected].clamp_min(0))
    columns = torch.where(sel_e, selected, e_size)  # e_size: an all-False column for C nodes
    ancestors = torch.cat([e_reach[e_row], torch.zeros((n, 1), dtype=torch.bool, device=device)], dim=1)[:, columns]
    eye = torch.eye(n, dtype=torch.bool, device=device)
    reach = (ancestors & valid[:, None] & valid[None, :]) | eye
    return DraftTree(
        tokens=token[selected], parents=new_parent, depths=torch.where(valid, depth[selected], 0),
        cum_logp=cum[selected], cache_rows=torch.where(sel_e & valid, root_row + selected, -1),
        births=birth[selected], valid=valid, reach=reach, root_row=root_row, max_depth=max_depth,
        draft_forwards=forwards, timer=timer,
    )
