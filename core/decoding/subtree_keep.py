"""Keeping the grown subtree under the token the target emitted, for the next search to start from.

While the target scores a tree, a shadow search goes on growing the search it was cut from (past the
budget, best first: core.decoding.methods.specexec). When the verdict is read, the emitted tokens (the accepted
path, then the target's own next token x) are walked down the grown search's expanded nodes E. If x is an
expanded node there, every expanded node under it and every candidate under those is kept: re-rooted at x
(depths and cumulative log-probs relative to it), renumbered in their expansion order (still topological),
and their draft KV rows moved to where the next search expects them, right after x's row. Everything else is
dropped. The next search then writes x's row with its catch-up forward and grows on from the kept nodes
(core.decoding.draft_search.SearchSeed); the tokens emitted stay the target's samples whatever it keeps.

No host read: the walk and the selection are device ops of fixed size, the kept count stays on the device
(read with the next pass's one read), and the seed has a fixed number of slots known on the host. On a CPU,
where a read is free, that number is the real count.

Layout (rows of the draft cache): the old root at `root_row`, E index j at root_row + j. After the commit of
the accepted path's first `expanded` rows (core.decoding.methods.tree_forward.commit_draft_path) the cache
holds rows up to root_row + expanded; the next catch-up forward writes the remaining path tokens and x, so x
lands at root_row + m + 1 (m accepted tokens), and kept node j at root_row + m + 1 + j. A kept node's old row
is root_row + (its E index), and its E index exceeds x's, which is at least m + 1: the commit and the
catch-up never overwrite a row before it moves, and the move reads all sources before writing.
"""

from __future__ import annotations

import torch

from core.decoding.device_io import to_device
from core.decoding.draft_search import DraftSearch, SearchSeed
from core.modeling.kv_cache import InPlaceKVCache


def keep_subtree(search: DraftSearch, emitted: list[int], cache: InPlaceKVCache, max_nodes: int) -> SearchSeed | None:
    """The seed for the next search: the subtree of `search` under the last of `emitted` (the accepted
    tokens, then the target's next token), at most `max_nodes` expanded nodes under it; its KV rows moved.
    None when there is no room for any (the next search then starts from its root alone)."""
    device = search.e_token.device
    accepted = len(emitted) - 1
    old_root = search.root_row
    new_root = old_root + accepted + 1
    bound = int(search.n_expanded) if search.read_free else search.e_bound  # a read only where it is free
    slots = min(bound - accepted - 1, max_nodes + 1, cache.capacity - new_root, search.e_size)
    if slots < 1:
        return None

    # walk the emitted tokens down E: node = E index of the deepest match, alive while every token matched
    tokens = to_device(emitted, device)
    real = torch.isfinite(search.e_cum)
    node = torch.zeros(1, dtype=torch.long, device=device)
    alive = torch.ones(1, dtype=torch.bool, device=device)
    for i in range(len(emitted)):
        match = (search.e_parent == node) & (search.e_token == tokens[i]) & real  # [E]: at most one
        alive = alive & match.any()
        node = torch.where(alive, match.to(torch.uint8).argmax(), node)
    kept = search.reach.index_select(1, node)[:, 0] & real & alive  # [E]: x and every expanded node under it

    # kept nodes first, in expansion order (x first: it precedes its descendants); the first `slots` stay E
    order = torch.sort((~kept).to(torch.uint8), stable=True).indices  # [E]
    chosen, rest = order[:slots], order[slots:]
    in_e = kept[chosen]  # [S]
    new_index = torch.full((search.e_size,), -1, dtype=torch.long, device=device)
    new_index[chosen] = torch.where(in_e, torch.arange(slots, device=device), -1)
    base_depth, base_cum = search.e_depth[node], search.e_cum[node]

    def renumber(parents: torch.Tensor) -> torch.Tensor:
        return torch.where(parents >= 0, new_index[parents.clamp_min(0)], -1)

    e_parent = torch.where(in_e, renumber(search.e_parent[chosen]), -1)
    e_depth = torch.where(in_e, search.e_depth[chosen] - base_depth, 0)
    e_cum = torch.where(in_e, search.e_cum[chosen] - base_cum, -torch.inf)
    reach = search.reach[chosen][:, chosen] & in_e[:, None] & in_e[None, :]
    n_expanded = in_e.sum().clamp_min(1).reshape(1)

    # candidates: the pool's entries under kept E nodes, and kept E nodes that did not fit (they become
    # candidates again: their parent is kept, their own children are dropped with them); the search has
    # merged its last forward's children already (its tree and its grow end with that)
    c_parent = renumber(search.c_parent)
    c_ok = (c_parent >= 0) & torch.isfinite(search.c_cum)
    r_parent = renumber(search.e_parent[rest])
    r_ok = kept[rest] & (r_parent >= 0)
    cand = [
        torch.cat(pair)
        for pair in (
            (search.c_token, search.e_token[rest]),
            (c_parent, r_parent),
            (search.c_depth - base_depth, search.e_depth[rest] - base_depth),
            (
                torch.where(c_ok, search.c_cum - base_cum, -torch.inf),
                torch.where(r_ok, search.e_cum[rest] - base_cum, -torch.inf),
            ),
        )
    ]
    best = torch.sort(cand[-1], descending=True, stable=True).indices[: search.pool]
    c_token, c_parent, c_depth, c_cum = (values[best] for values in cand)
    c_parent = c_parent.clamp_min(0)  # empty entries (-inf) point at the root; they are never used

    # the kept rows move right after x's new row; other slots copy a row onto itself
    targets = new_root + torch.arange(slots, device=device)
    sources = torch.where(in_e & (torch.arange(slots, device=device) > 0), old_root + chosen, targets)
    cache.move_rows(sources, targets)

    nodes = (n_expanded - 1) + torch.isfinite(c_cum).sum()
    return SearchSeed(
        e_token=search.e_token[chosen],
        e_parent=e_parent,
        e_depth=e_depth,
        e_cum=e_cum,
        reach=reach,
        n_expanded=n_expanded,
        c_token=c_token,
        c_parent=c_parent,
        c_depth=c_depth,
        c_cum=c_cum,
        nodes=nodes,
        root_row=new_root,
        pool=search.pool,
        depth_bound=max(0, search.depth_bound - accepted - 1),
    )
