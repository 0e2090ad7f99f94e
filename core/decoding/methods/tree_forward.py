"""Scoring a draft tree with the target and committing the accepted path to both KV caches.

Nothing here reads a value back to the host: the tree mask comes from the tree's ancestor matrix (the draft
search's own reachability), positions from its depths, and the commits move KV rows chosen by index tensors
on the device.
"""

from __future__ import annotations

import torch

from core.modeling.causal_lm import CausalLM, RowLogits
from core.modeling.kv_cache import InPlaceKVCache
from core.modeling.tree_mask import additive_mask, causal_visibility


def score_tree(
    model: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    tree_tokens: torch.Tensor,
    tree_depths: torch.Tensor,
    tree_reach: torch.Tensor,
) -> RowLogits:
    """One forward over pending tokens (a chain ending in the root) plus every draft node.

    pending: long [P] on the device, its last token is tree node 0; tree_tokens, tree_depths: long [N];
    tree_reach: bool [N, N], reach[i, j] when j is i or an ancestor of i (a padding node reaches only
    itself). Returns the logits of the N tree rows, computed when read (row i: the model's distribution
    after tree node i). Explicit position ids: root position + depth.
    """
    device = model.device
    past, n_chain, n_tree = cache.length, pending.shape[0], tree_tokens.shape[0] - 1
    total = past + n_chain + n_tree
    # visible: [n_chain + n_tree, total]
    visible = torch.zeros((n_chain + n_tree, total), dtype=torch.bool, device=device)
    visible[:n_chain, : past + n_chain] = causal_visibility(past, n_chain, device)
    visible[n_chain:, : past + n_chain] = True
    visible[n_chain:, past + n_chain :] = tree_reach[1:, 1:]
    root_position = past + n_chain - 1
    positions = torch.cat([torch.arange(past, past + n_chain, device=device), root_position + tree_depths[1:]])
    ids = torch.cat([pending, tree_tokens[1:]])
    return model.row_logits(ids, positions, additive_mask(visible, model.dtype), cache, rows=slice(n_chain - 1, None))


def commit_target_path(cache: InPlaceKVCache, chain_end: int, path: torch.Tensor) -> None:
    """After score_tree: keep rows [0, chain_end) (prefix and pending chain, root last) and the accepted
    nodes path[1:] (long, on the device), whose rows follow the root in tree order."""
    cache.keep_rows(chain_end, path[1:] + chain_end - 1)


def commit_draft_path(cache: InPlaceKVCache, root_row: int, rows: torch.Tensor) -> None:
    """Keep the draft cache's prefix up to the root and then `rows` (long [m], on the device): the cache rows
    of the accepted path's leading nodes the draft expanded, the root's first. Expanded nodes form a prefix
    of the path (only expanded nodes have children), so the rest simply stays pending for the next search.
    m = 0 (the draft did not run this pass) leaves the cache as it is."""
    if rows.shape[0]:
        cache.keep_rows(root_row, rows)
