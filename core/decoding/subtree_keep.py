"""Keeping the grown subtree under the token the target emitted, for the next search to start from.

While the target scores a tree, a shadow search goes on growing the search it was cut from (past the
budget, best first: core.decoding.methods.specexec). Once the target's walk is issued, the emitted tokens
(the accepted path, then the target's own next token x) are walked down the grown search's expanded nodes E.
If x is an expanded node there, every expanded node under it is kept: re-rooted at x (depths and cumulative
log-probs relative to it), renumbered in their expansion order (still topological), and their draft KV rows
moved to where the next search expects them, right after x's row. Everything else is dropped, the grown
search's candidates included: its pool kept the best children of *all* its rows, so it had trimmed children of kept
nodes that rank high under x. The next search writes x's row with its catch-up forward, re-scores the kept
nodes' rows in the same forward and merges all their children afresh (core.decoding.draft_search.SearchSeed),
so its tree is the top-K tree a fresh search from x builds: keeping spares forwards, never nodes. The tokens
emitted stay the target's samples whatever it keeps.

No host read of its own: `find_kept` finds the kept nodes with device ops of fixed size before the pass's
one read, which brings their count back with the verdict (core.decoding.methods.specexec); `keep_subtree`
then makes a seed of exactly that many slots, or none. A seed's slots are rows of the next search's catch-up
forward (it re-scores them), and a draft's 4-bit kernel costs by the rows it multiplies (tinygemm: a pass
over the weights per 16 rows), so a seed sized by a host bound (the budget's rows, padding when little or
nothing was kept, as this module made on a GPU before) would cost the catch-up forward several search
forwards' worth every pass.

Layout (rows of the draft cache): the old root at `root_row`, E index j at root_row + j. After the commit of
the accepted path's first `expanded` rows (core.decoding.methods.tree_forward.commit_draft_path) the cache
holds rows up to root_row + expanded; the next catch-up forward writes the remaining path tokens and x, so x
lands at root_row + m + 1 (m accepted tokens), and kept node j at root_row + m + 1 + j. A kept node's old row
is root_row + (its E index), and its E index exceeds x's, which is at least m + 1: the commit and the
catch-up never overwrite a row before it moves, and the move reads all sources before writing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.decoding.draft_search import DraftSearch, SearchSeed
from core.modeling.kv_cache import InPlaceKVCache


@dataclass(frozen=True)
class KeptNodes:
    """The grown search's expanded nodes under the emitted token, found on the device: `node` (long [1], the
    emitted token's E index; the root's when `mask` is empty), `mask` (bool [E]: that node and every expanded
    node under it, none when the emitted token was never expanded) and `count` (long [1]: how many), which the
    pass's one read brings back."""

    node: torch.Tensor
    mask: torch.Tensor
    count: torch.Tensor


def find_kept(search: DraftSearch, tokens: torch.Tensor, length: torch.Tensor | int) -> KeptNodes:
    """Walk the emitted tokens (`tokens`, long [S] on the device; the first `length` count: the accepted
    tokens, then the target's next one) down the expanded nodes of `search`, with no host read: an expanded
    node lies on the emitted path when its own token and every ancestor's is the emitted token at that depth."""
    real = torch.isfinite(search.e_cum)
    steps = tokens.shape[0]
    at_depth = tokens[(search.e_depth - 1).clamp(0, steps - 1)]  # [E]: the emitted token at each node's depth
    matches = (search.e_depth == 0) | ((search.e_token == at_depth) & (search.e_depth <= length))
    on_path = ~(search.reach & ~matches[None, :]).any(dim=1) & real  # [E]: the node and all its ancestors match
    emitted = on_path & (search.e_depth == length)  # at most one: the emitted token's node
    node = emitted.to(torch.uint8).argmax().reshape(1)
    mask = search.reach.index_select(1, node)[:, 0] & real & emitted.any()
    return KeptNodes(node, mask, mask.sum().reshape(1))


def keep_subtree(
    search: DraftSearch, kept: KeptNodes, count: int, accepted: int, cache: InPlaceKVCache, max_nodes: int
) -> SearchSeed | None:
    """The seed for the next search: the `count` nodes of `kept` (`count`: kept.count as read with the pass;
    `accepted`: the accepted tokens before the emitted one), at most `max_nodes` of them under the emitted
    token; their KV rows moved. None when nothing is kept under that token or there is no room: the next
    search then starts from its root alone."""
    device = search.e_token.device
    old_root = search.root_row
    new_root = old_root + accepted + 1
    slots = min(count, max_nodes + 1, cache.capacity - new_root, search.e_size)
    if slots < 2:
        return None

    # kept nodes first, in expansion order (x first: it precedes its descendants); the first `slots` stay E
    order = torch.sort((~kept.mask).to(torch.uint8), stable=True).indices  # [E]
    chosen = order[:slots]
    in_e = kept.mask[chosen]  # [S]
    new_index = torch.full((search.e_size,), -1, dtype=torch.long, device=device)
    new_index[chosen] = torch.where(in_e, torch.arange(slots, device=device), -1)
    base_depth, base_cum = search.e_depth[kept.node], search.e_cum[kept.node]

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
