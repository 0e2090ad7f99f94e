"""The draft tree is exactly the K nodes of highest cumulative draft probability (brute force)."""


import pytest
import torch

from core.draft_search import SearchConfig, build_draft_tree
from core.sampling import draft_logprobs
from core.tree_mask import additive_mask, ancestor_matrix, causal_visibility
from conftest import make_tiny_llama

PROMPT = [3, 1, 4, 1, 5]


def next_logprobs(model, ids, temperature, top_p):
    cache = model.new_cache()
    n = len(ids)
    logits = model.forward(
        torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), cache,
        logit_rows=slice(-1, None),
    )
    return draft_logprobs(logits[0], temperature, top_p)


def brute_force_top_k(model, k, depth, temperature, top_p):
    """Every node up to `depth` with its cumulative log-prob; return the k best paths."""
    scores = {}
    frontier = {(): 0.0}
    for _ in range(depth):
        nxt = {}
        for path, cum in frontier.items():
            lp = next_logprobs(model, PROMPT + list(path), temperature, top_p)
            for token in range(lp.shape[0]):
                if torch.isfinite(lp[token]):
                    nxt[path + (token,)] = cum + float(lp[token])
        scores.update(nxt)
        frontier = nxt
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    return dict(ranked[:k])


def tree_paths(tree):
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    paths = {0: ()}
    for i in range(1, len(tokens)):
        paths[i] = paths[parents[i]] + (tokens[i],)
    return paths


@pytest.mark.parametrize("k,depth,expand,temperature,top_p", [
    (1, 3, 1, 1.0, None), (7, 3, 2, 1.0, None), (20, 3, 4, 0.6, None), (40, 3, 3, 1.0, None),
    (60, 4, 16, 1.0, None), (25, 2, 5, 1.0, 0.9), (30, 4, 1, 0.8, 0.8),
])
def test_tree_is_exact_top_k(k, depth, expand, temperature, top_p):
    model = make_tiny_llama(5, vocab=6)
    cache = model.new_cache()
    tree = build_draft_tree(model, cache, torch.tensor(PROMPT), SearchConfig(k, depth, expand, temperature, top_p))
    expected = brute_force_top_k(model, k, depth, temperature, top_p)
    paths = tree_paths(tree)
    got = {paths[i]: float(tree.cum_logp[i]) for i in range(1, tree.size)}
    assert set(got) == set(expected)
    for path, score in got.items():
        assert abs(score - expected[path]) < 1e-9
    parents = tree.parents.tolist()
    assert parents[0] == -1 and all(0 <= parents[i] < i for i in range(1, tree.size))  # topological
    assert int(tree.depths.max()) <= depth
    assert all(tree.depths[i] == tree.depths[parents[i]] + 1 for i in range(1, tree.size))


def test_expanded_nodes_have_correct_draft_cache_rows():
    """Rows recorded for expanded nodes hold that node's KV as a fresh prefill would compute it."""
    model = make_tiny_llama(6, vocab=8)
    cache = model.new_cache()
    tree = build_draft_tree(model, cache, torch.tensor(PROMPT), SearchConfig(30, 4, 4, 1.0, None))
    paths = tree_paths(tree)
    rows = tree.cache_rows.tolist()
    assert rows[0] == len(PROMPT) - 1
    checked = 0
    for node, row in enumerate(rows):
        if row < 0:
            continue
        ids = PROMPT + list(paths[node])
        fresh = model.new_cache()
        n = len(ids)
        model.forward(torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), fresh)
        assert torch.allclose(cache.layers[0].keys[..., row, :], fresh.layers[0].keys[..., n - 1, :], atol=1e-10)
        checked += 1
    assert checked > 3


def test_ancestor_matrix():
    parents = torch.tensor([-1, 0, 0, 1, 3, 2])
    reach = ancestor_matrix(parents)
    expected = {0: {0}, 1: {0, 1}, 2: {0, 2}, 3: {0, 1, 3}, 4: {0, 1, 3, 4}, 5: {0, 2, 5}}
    for i, ancestors in expected.items():
        assert set(torch.nonzero(reach[i]).flatten().tolist()) == ancestors
