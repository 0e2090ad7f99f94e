"""Keeping the grown subtree under the token the target emitted, for the next search to start from.

While the target scores a tree, a shadow search goes on growing the search it was cut from (past the
budget, best first: core.decoding.methods.specexec). When the verdict is read, the emitted tokens (the accepted
path, then the target's own next token x) are walked down the grown search's expanded nodes E. If x is an
expanded node there, every expanded node under it is kept: re-rooted at x (depths and cumulative log-probs
relative to it), renumbered in their expansion order (still topological), and their draft KV rows moved to
where the next search expects them, right after x's row. Everything else is dropped, the grown search's
candidates included: its pool kept the best children of *all* its rows, so it had trimmed children of kept
nodes that rank high under x. The next search writes x's row with its catch-up forward, re-scores the kept
nodes' rows in the same forward and merges all their children afresh (core.decoding.draft_search.SearchSeed),
so its tree is the top-K tree a fresh search from x builds: keeping spares forwards, never nodes. The tokens
emitted stay the target's samples whatever it keeps.

No host read: the walk and the selection are device ops of fixed size, the kept count stays on the device
(read with the next pass's one read), and the seed has a fixed number of slots known on the host. On a CPU,
where a read is free, that number is the real count (no padding rows in the re-scoring).

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
    """The seed for the next search: the expanded nodes of `search` under the last of `emitted` (the
    accepted tokens, then the target's next token), at most `max_nodes` of them under it; their KV rows
    moved. None when there is no room for any, or (where a read is free) nothing under that token: the next
    search then starts from its root alone."""
    device = search.e_token.device
    accepted = len(emitted) - 1
    old_root = search.root_row
    new_root = old_root + accepted + 1

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

    # slots: x and the kept nodes, a host bound (the real count where a read is free)
    bound = int(kept.sum()) if search.read_free else search.e_bound - accepted - 1
    slots = min(bound, max_nodes + 1, cache.capacity - new_root, search.e_size)
    if slots < 1 or (search.read_free and slots < 2):
        return None

    # kept nodes first, in expansion order (x first: it precedes its descendants); the first `slots` stay E
    order = torch.sort((~kept).to(torch.uint8), stable=True).indices  # [E]
    chosen = order[:slots]
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
    n_expanded = in_e.sum().clamp_min(1).reshape(1)  # kept nodes that did not fit come back as candidates

    # the kept rows move right after x's new row; other slots copy a row onto itself
    targets = new_root + torch.arange(slots, device=device)
    sources = torch.where(in_e & (torch.arange(slots, device=device) > 0), old_root + chosen, targets)
    cache.move_rows(sources, targets)

    return SearchSeed(
        e_token=search.e_token[chosen],
        e_parent=e_parent,
        e_depth=e_depth,
        e_cum=e_cum,
        reach=reach,
        n_expanded=n_expanded,
        nodes=n_expanded - 1,
        root_row=new_root,
        depth_bound=max(0, search.depth_bound - accepted - 1),
    )
