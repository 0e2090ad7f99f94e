"""Scoring a draft tree with the target and committing the accepted path to both KV caches."""

from __future__ import annotations

from collections.abc import Callable

import torch

from core.causal_lm import CausalLM, RowLogits
from core.decode_state import DecodeState
from core.kv_cache import InPlaceKVCache
from core.timing import synchronize
from core.tree_mask import additive_mask, ancestor_matrix, causal_visibility
from core.verification import Verdict

# (target logits of the N tree rows, absolute position of the root, sequence up to the root) -> Verdict
Verifier = Callable[[RowLogits, int, torch.Tensor], Verdict]


def score_tree(
    model: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    tree_tokens: torch.Tensor,
    tree_parents: torch.Tensor,
    tree_depths: torch.Tensor,
) -> RowLogits:
    """One forward over pending tokens (a chain ending in the root) plus every draft node.

    pending: long [P], its last token is tree node 0; tree_*: long [N]. Returns the logits of the N tree
    rows, computed when read (row i: the model's distribution after tree node i). Explicit position ids:
    root position + depth.
    """
    device = model.device
    past, n_chain, n_tree = cache.length, pending.shape[0], tree_tokens.shape[0] - 1
    total = past + n_chain + n_tree
    visible = torch.zeros((n_chain + n_tree, total), dtype=torch.bool, device=device)
    visible[:n_chain, : past + n_chain] = causal_visibility(past, n_chain, device)
    visible[n_chain:, : past + n_chain] = True
    visible[n_chain:, past + n_chain :] = ancestor_matrix(tree_parents.to(device))[1:, 1:]
    root_position = past + n_chain - 1
    positions = torch.cat([
        torch.arange(past, past + n_chain, device=device),
        root_position + tree_depths[1:].to(device),
    ])
    ids = torch.cat([pending.to(device), tree_tokens[1:].to(device)])
    return model.row_logits(ids, positions, additive_mask(visible, model.dtype), cache, rows=slice(n_chain - 1, None))


def commit_target_path(cache: InPlaceKVCache, chain_end: int, path: list[int]) -> None:
    """After score_tree: keep rows [0, chain_end) (prefix and pending chain, root last) and the accepted
    nodes path[1:], whose rows follow the root in tree order."""
    accepted = torch.tensor(path[1:], dtype=torch.long) + chain_end - 1
    cache.keep_rows(chain_end, accepted)


def commit_draft_path(cache: InPlaceKVCache, cache_rows: torch.Tensor, path: list[int]) -> None:
    """Keep the draft cache's prefix and the rows of the accepted nodes it expanded.

    cache_rows: long [N], -1 for nodes the draft never expanded. Expanded nodes form a prefix of the
    path (only expanded nodes have children), so the rest simply stays pending for the next search.
    """
    rows = cache_rows[torch.tensor(path, dtype=torch.long, device=cache_rows.device)].tolist()  # host sync
    if not rows or rows[0] < 0:
        return  # the draft did not run this pass (depth cap 0): nothing new in its cache
    expanded = _leading_non_negative(rows)
    cache.keep_rows(rows[0], torch.tensor(expanded, dtype=torch.long))


def _leading_non_negative(rows: list[int]) -> list[int]:
    for index, row in enumerate(rows):
        if row < 0:
            return rows[:index]
    return rows


def target_pass(
    state: DecodeState,
    target: CausalLM,
    tree_tokens: torch.Tensor,
    tree_parents: torch.Tensor,
    tree_depths: torch.Tensor,
    draft_cache_rows: torch.Tensor,
    verify: Verifier,
) -> Verdict:
    """The target's half of a speculative pass, shared by the tree methods: score the tree in one forward,
    verify it, keep the accepted path in both caches and append the emitted tokens to the sequence."""
    pending = state.prefill_pending(target, state.target_cache)
    chain_end = state.target_cache.length + pending.shape[0]
    logits = score_tree(target, state.target_cache, pending, tree_tokens, tree_parents, tree_depths)
    verdict = verify(logits, chain_end - 1, torch.tensor(state.tokens, dtype=torch.long))
    commit_target_path(state.target_cache, chain_end, verdict.path)
    commit_draft_path(state.draft_cache, draft_cache_rows, verdict.path)
    synchronize(target.device)
    state.tokens.extend(verdict.emitted)
    return verdict
