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
at a device-held offset and attends over a bucketed column count (core/decoding/captured_forward.py), so on CUDA it is
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
from core.decoding.captured_forward import run_draft_forward
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
    search: "DraftSearch | None" = None  # the search it was cut from, for a shadow search to go on with
    seed_nodes: torch.Tensor | None = None  # long [1]: nodes of the kept subtree it started from (None: none)

    @property
    def size(self) -> int:
        """N, padding nodes included."""
        return int(self.tokens.shape[0])


def _best_children(
    logits: torch.Tensor,
    parents: torch.Tensor,
    e_cum: torch.Tensor,
    e_depth: torch.Tensor,
    config: SearchConfig,
    count: int,
    known: torch.Tensor | None = None,
) -> tuple[torch.Tensor, ...]:
    """The `count` best children of the rows just expanded, by cumulative log-prob, from one top-k over
    the flattened scores (only these can enter the pool, which keeps the `count` best).

    logits: [b, V] for the nodes `parents` (E indices, long [b]; a padding row's node scores -inf, so its
    children do too). `known`: bool [b, V], children the search holds already (a seed's expanded nodes):
    they score -inf after the softmax, so the others keep their own log-probs. Returns (token, parent,
    depth, cum), each [c] with c = min(count, b * V), best first; cum is float64, -inf for tokens the draft
    excludes.
    """
    if config.top_p is None or config.top_p >= 1.0:
        logp, ids = draft_logprobs(logits, config.temperature, None), None  # [b, V] in the work dtype
        if known is not None:
            logp = logp.masked_fill(known, -torch.inf)
    else:  # truncated draft: each row's nucleus first (short, found without sorting the vocabulary)
        logp, ids = draft_top_k(logits, config.temperature, config.top_p, count)  # [b, k'] each
        if known is not None:
            logp = logp.masked_fill(known.gather(1, ids), -torch.inf)
    width = logp.shape[-1]
    parent_cum = e_cum[parents]  # [b] float64
    scores = (logp + parent_cum.to(logp.dtype)[:, None]).reshape(-1)  # [b * width]: ranks the children
    flat = torch.topk(scores, min(count, scores.shape[0])).indices  # [c]
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
        tokens=pending[-1:].clone(),
        parents=zero - 1,
        depths=zero,
        cum_logp=torch.zeros(1, dtype=torch.float64, device=device),
        cache_rows=zero - 1,
        births=zero,
        valid=torch.ones(1, dtype=torch.bool, device=device),
        reach=torch.ones((1, 1), dtype=torch.bool, device=device),
        root_row=root_row,
        max_depth=0,
        draft_forwards=0,
        timer=ForwardTimer(device),
    )


@dataclass
class SearchSeed:
    """What a search starts from besides its root: the expanded nodes kept from the last pass's grown search
    under the token the target emitted (core.decoding.subtree_keep builds it). Fixed sizes, on the draft's
    device; depths and cumulative log-probs relative to the new root.

    e_token, e_parent, e_depth: long [S], e_cum: float64 [S] (-inf: an empty slot), reach: bool [S, S]: the
    kept expanded nodes, the root's slot first (its row is written by the search's catch-up forward), each
    real one's KV already at cache row root_row + its index; n_expanded: long [1], slots in use (root
    included); nodes: long [1], kept expanded nodes (root excluded), for the pass's stats. No candidates: the
    search's catch-up forward re-scores every kept node's row, so all their children come back from fresh
    logits (the grown search's pool had trimmed some of them against nodes outside the kept subtree). Host
    values: root_row (the search must root there, else the seed is stale), depth_bound (no node deeper)."""

    e_token: torch.Tensor
    e_parent: torch.Tensor
    e_depth: torch.Tensor
    e_cum: torch.Tensor
    reach: torch.Tensor
    n_expanded: torch.Tensor
    nodes: torch.Tensor
    root_row: int
    depth_bound: int

    @property
    def slots(self) -> int:
        return int(self.e_token.shape[0])


class DraftSearch:
    """The search's state between forwards: the expanded nodes E (expansion order = cache order after the
    root), the candidate pool C, and the last forward's logits not merged into C yet.

    `grow(budget, forwards)` expands the best candidates inside the top `budget` for up to `forwards`
    forwards; `tree(k)` trims to the top k. The pool keeps `pool` candidates (at least the budget): a pool
    larger than the tree's budget changes no tree (its top entries are the smaller pool's) and lets a
    shadow search (core.decoding.methods.specexec) keep growing the same search past the budget while the
    target scores the tree cut from it. `extra_forwards`: forwards beyond `forwards` the E buffers leave
    room for (the shadow's)."""

    def __init__(
        self,
        draft: CausalLM,
        cache: InPlaceKVCache,
        pending: torch.Tensor,
        config: SearchConfig,
        forwards: int,
        pool: int,
        extra_forwards: int = 0,
        seed: SearchSeed | None = None,
    ) -> None:
        device = draft.device
        self.draft, self.cache, self.config = draft, cache, config
        self.pool = max(pool, config.budget)
        self.root_row = cache.length + pending.shape[0] - 1  # cache row and absolute position of the root
        if seed is not None and seed.root_row != self.root_row:
            seed = None  # kept for another root: start afresh
        self.seeded = seed is not None
        room = cache.capacity - self.root_row - 1
        # Each expansion forward writes a block of `width` rows after the last expanded node; every block must
        # fit below the cache's capacity, so near the planned context the tree is the top K of fewer nodes.
        self.width = min(search_width(config.budget, config.expand), room)
        self.expand_limit = room + 1 - self.width  # E indices a block may start at, at most
        self.read_free = host_reads_are_free(device)
        self.timer = ForwardTimer(device)
        planned = forwards - 1 + extra_forwards if self.width > 0 else 0
        slots = seed.slots if seed is not None else 1
        e_size = max(slots, min(slots + self.width * planned, room + 1)) if planned > 0 else slots
        self.e_size = e_size

        # Expanded nodes E (index 0 = root); E index j lives at cache row root_row + j. Unused slots score -inf.
        self.e_token = torch.zeros(e_size, dtype=torch.long, device=device)
        self.e_parent = torch.full((e_size,), -1, dtype=torch.long, device=device)
        self.e_depth = torch.zeros(e_size, dtype=torch.long, device=device)
        self.e_birth = torch.zeros(e_size, dtype=torch.long, device=device)
        self.e_cum = torch.full((e_size,), -torch.inf, dtype=torch.float64, device=device)
        self.reach = torch.zeros(
            (e_size, e_size), dtype=torch.bool, device=device
        )  # reach[i, j]: j is i or its ancestor
        # Candidate pool C: children of expanded nodes, never expanded, the best first (-inf = empty).
        self.c_token = torch.zeros(self.pool, dtype=torch.long, device=device)
        self.c_parent = torch.zeros(self.pool, dtype=torch.long, device=device)
        self.c_depth = torch.zeros(self.pool, dtype=torch.long, device=device)
        self.c_birth = torch.zeros(self.pool, dtype=torch.long, device=device)
        self.c_cum = torch.full((self.pool,), -torch.inf, dtype=torch.float64, device=device)
        self.n_expanded = torch.ones(1, dtype=torch.long, device=device)  # E nodes so far, on the device
        self.e_bound = slots  # a host bound on n_expanded
        self.depth_bound = 0  # a host bound on the depth of any node
        if seed is not None:
            self._plant(seed)
        self.e_token[:1] = pending[-1:]
        self.e_parent[:1], self.e_depth[:1], self.e_birth[:1], self.e_cum[:1] = -1, 0, 0, 0.0
        self.reach[0, 0] = True

        # the first forward: the pending tokens (prefill or catch-up), the root's logits last, then the seed's
        # kept nodes re-scored (their rows rewritten in place with the same values)
        tokens, positions, visible = self._first_rows(pending, slots)
        with self.timer:
            logits = draft.forward(
                tokens, positions, additive_mask(visible, draft.dtype), cache, logit_rows=slice(-slots, None)
            )
        cache.crop_to(self.root_row + 1)  # the kept rows stay past `length`, as every tree row does
        self.logits: torch.Tensor | None = logits  # [slots, V], not merged into the pool yet
        self.new_parents = torch.arange(slots, device=device)  # E indices of the rows in `logits`
        self.known = self._known_children(logits.shape[-1]) if seed is not None else None
        self.forward = 1
        self.depth_bound += 1

    def _first_rows(self, pending: torch.Tensor, slots: int) -> tuple[torch.Tensor, ...]:
        """Tokens, positions and visibility of the first forward: the pending chain (causal), then the E slots
        1..slots-1 (a seed's kept nodes; each sees the prefix, the root, its kept ancestors and itself, at cache
        row root_row + its E index, right after the root's)."""
        device, length, p = pending.device, self.cache.length, pending.shape[0]
        chain = causal_visibility(length, p, device)  # [P, length + P]
        if slots == 1:
            return pending, torch.arange(length, length + p, device=device), chain
        tree = self.reach[1:slots, 1:slots]  # [S - 1, S - 1]
        visible = torch.cat(
            [
                torch.cat([chain, torch.zeros((p, slots - 1), dtype=torch.bool, device=device)], dim=1),
                torch.cat([torch.ones((slots - 1, length + p), dtype=torch.bool, device=device), tree], dim=1),
            ]
        )
        positions = torch.cat([torch.arange(length, length + p, device=device), self.root_row + self.e_depth[1:slots]])
        return torch.cat([pending, self.e_token[1:slots]]), positions, visible

    def _plant(self, seed: SearchSeed) -> None:
        """Start from the kept subtree: its nodes count as found by the first forward (birth 1); nodes below the
        depth cap (the cap shrinks near max_new_tokens) are dropped."""
        s, cap = seed.slots, self.config.max_depth
        self.e_token[:s], self.e_parent[:s], self.e_depth[:s] = seed.e_token, seed.e_parent, seed.e_depth
        self.e_cum[:s] = torch.where(seed.e_depth > cap, -torch.inf, seed.e_cum)
        self.e_birth[1:s] = 1
        self.reach[:s, :s] = seed.reach
        self.n_expanded = seed.n_expanded.clone()
        self.depth_bound = seed.depth_bound

    def _known_children(self, vocab_size: int) -> torch.Tensor:
        """bool [S, V] for the first forward's rows (E slots 0..S-1): children the seed holds as expanded nodes
        already, and every child of a node at the depth cap (a fresh search never expands one)."""
        s = self.logits.shape[0]
        child = torch.isfinite(self.e_cum[1:s])  # [S - 1]: real kept nodes, each its parent's child
        flat = self.e_parent[1:s].clamp_min(0) * vocab_size + self.e_token[1:s]
        known = torch.zeros(s * vocab_size, dtype=torch.float32, device=flat.device)
        known = known.index_add_(0, flat, child.float()).reshape(s, vocab_size) > 0
        return known | (self.e_depth[:s] >= self.config.max_depth)[:, None]

    def _merge(self) -> None:
        """Merge the children of the last forward's rows into the pool (a stable sort keeps earlier entries
        first on ties: parents before children)."""
        if self.logits is None:
            return
        logits, config = self.logits, self.config
        if config.child_mask is not None:  # a grammar: the draft proposes only what it allows
            allowed = config.child_mask(self.e_token, self.e_parent, self.new_parents)
            logits = logits.masked_fill(~_fit_vocab(allowed, logits.shape[-1]), -torch.inf)
        token, parent, depth, cum = _best_children(
            logits, self.new_parents, self.e_cum, self.e_depth, config, self.pool, self.known
        )
        self.known = None
        birth = torch.full_like(token, self.forward)
        merged = [
            torch.cat(pair)
            for pair in (
                (self.c_token, token),
                (self.c_parent, parent),
                (self.c_depth, depth),
                (self.c_birth, birth),
                (self.c_cum, cum),
            )
        ]
        order = torch.sort(merged[-1], descending=True, stable=True).indices[: self.pool]
        self.c_token, self.c_parent, self.c_depth, self.c_birth, self.c_cum = (values[order] for values in merged)
        self.logits = None

    def grow(self, budget: int, forwards: int) -> int:
        """Up to `forwards` expansion forwards inside the top `budget` (at most the pool); returns how many ran.
        A CPU stops when nothing is left to expand (a read, free there); a GPU runs them all (padding rows)."""
        device, cache, width = self.draft.device, self.cache, self.width
        budget = min(budget, self.pool)
        made = 0
        for _ in range(forwards if width > 0 else 0):
            self._merge()
            # global threshold: the budget-th best cumulative log-prob among all non-root nodes known so far
            threshold = torch.topk(torch.cat([self.e_cum[1:], self.c_cum]), budget).values[-1]
            expandable = (self.c_cum >= threshold) & (self.c_depth < self.config.max_depth) & torch.isfinite(self.c_cum)
            rank = torch.cumsum(expandable, 0)
            picked = expandable & (rank <= width) & (self.n_expanded + rank <= self.expand_limit)
            rows_now = width
            if self.read_free:  # a CPU: read how many were picked (free) and compute only those rows
                rows_now = int(picked.sum())
                if rows_now == 0:
                    break
            # the picked entries of the sorted pool first (in pool order), then padding rows
            take = torch.sort((~picked).to(torch.uint8), stable=True).indices[:rows_now]
            real = picked[take]  # bool [rows_now]: False for padding rows
            new_index = self.n_expanded + torch.arange(rows_now, device=device)  # E indices of this block
            self.e_token.index_copy_(0, new_index, self.c_token[take])
            self.e_parent.index_copy_(0, new_index, self.c_parent[take])
            self.e_depth.index_copy_(0, new_index, self.c_depth[take])
            self.e_birth.index_copy_(0, new_index, self.c_birth[take])
            self.e_cum.index_copy_(0, new_index, torch.where(real, self.c_cum[take], -torch.inf))
            own = torch.zeros((rows_now, self.e_size), dtype=torch.bool, device=device).scatter_(
                1, new_index[:, None], True
            )
            self.reach.index_copy_(0, new_index, (self.reach[self.c_parent[take]] | own) & real[:, None])
            self.c_cum = self.c_cum.index_put(
                (take,), torch.where(real, -torch.inf, self.c_cum[take])
            )  # they leave the pool
            # the block starts at E index n_expanded: read it where that is free, else its bound
            bound = int(self.n_expanded) if self.read_free else min(self.e_bound, self.expand_limit)

            # draft forward over the block: each row sees the committed prefix, its ancestors and itself
            # visible: [rows_now, cols]; E index j is column root_row + j
            root_row = self.root_row
            cols = column_bucket(root_row + bound + rows_now, cache.capacity)  # the prefix, root and tree so far
            visible = torch.zeros((rows_now, cols), dtype=torch.bool, device=device)
            visible[:, :root_row] = True
            tree_cols = min(cols - root_row, self.e_size)
            visible[:, root_row : root_row + tree_cols] = self.reach[new_index, :tree_cols]
            with self.timer:
                self.logits = run_draft_forward(
                    self.draft,
                    cache,
                    self.e_token[new_index],
                    root_row + self.e_depth[new_index],
                    additive_mask(visible, self.draft.dtype),
                    root_row + new_index,
                    cols,
                )
            self.n_expanded = self.n_expanded + real.sum()
            self.new_parents = new_index
            self.forward += 1
            self.e_bound += width
            self.depth_bound += 1
            made += 1
        self._merge()
        return made

    def tree(self, k: int) -> DraftTree:
        """The top k of the nodes found so far (see `_final_tree`)."""
        self._merge()
        return _final_tree(
            (self.e_token, self.e_parent, self.e_depth, self.e_birth, self.e_cum),
            (self.c_token, self.c_parent, self.c_depth, self.c_birth, self.c_cum),
            self.reach,
            k,
            self.root_row,
            min(self.config.max_depth, self.depth_bound),
            self.forward,
            self.timer,
        )


def build_draft_tree(
    draft: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    config: SearchConfig,
    forwards: int | None = None,
    seed: SearchSeed | None = None,
    pool: int | None = None,
    extra_forwards: int = 0,
) -> DraftTree:
    """Grow the draft tree rooted at the last of `pending` on top of `cache`.

    `pending`: long [P] on the draft's device, tokens the draft cache does not hold yet; the last one is the
    root. The first forward processes them all (prefill or catch-up) together with the root's expansion.
    `forwards`: draft forwards to make, the first included (None: config.max_forwards; never more).
    `seed`: a subtree kept from the last pass (used when it is rooted here); `pool`, `extra_forwards`: room
    for a shadow search to go on from the returned tree's `search` (DraftSearch) after it.
    Afterwards the cache holds its old rows and the pending tokens (`length`), and beyond them, written
    through a window, every expanded node in expansion order (committed by keep_rows after verification).
    """
    k = config.budget
    root_row = cache.length + pending.shape[0] - 1
    if config.max_depth <= 0 or k <= 0:
        return _root_only(pending, root_row)
    total_forwards = max(1, min(config.max_forwards, forwards or config.max_forwards))
    search = DraftSearch(draft, cache, pending, config, total_forwards, pool or k, extra_forwards, seed)
    search.grow(k, total_forwards - 1)
    tree = search.tree(k)
    tree.search = search
    tree.seed_nodes = seed.nodes if search.seeded else None
    return tree


def _final_tree(
    e_nodes: tuple[torch.Tensor, ...],
    c_nodes: tuple[torch.Tensor, ...],
    e_reach: torch.Tensor,
    k: int,
    root_row: int,
    max_depth: int,
    forwards: int,
    timer: ForwardTimer,
) -> DraftTree:
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
        tokens=token[selected],
        parents=new_parent,
        depths=torch.where(valid, depth[selected], 0),
        cum_logp=cum[selected],
        cache_rows=torch.where(sel_e & valid, root_row + selected, -1),
        births=birth[selected],
        valid=valid,
        reach=reach,
        root_row=root_row,
        max_depth=max_depth,
        draft_forwards=forwards,
        timer=timer,
    )
