"""The draft tree is exactly the K nodes of highest cumulative draft probability (brute force)."""


import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from core.draft_search import WIDTH_DIVISOR, SearchConfig, build_draft_tree, expansion_width
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


class _HostSyncCounter(TorchDispatchMode):
    """Counts, outside the draft model's own forward, the ops that make the host wait for the device:
    reading a scalar (`.item()`, `int(t)`) and data-dependent shapes (nonzero, boolean-mask indexing)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_model = False
        self.scalar_reads = 0
        self.data_dependent = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.in_model:
            name = func.overloadpacket.__name__
            if name == "_local_scalar_dense":
                self.scalar_reads += 1
            elif name in ("nonzero", "masked_select", "nonzero_static"):
                self.data_dependent += 1
        return func(*args, **(kwargs or {}))


class _Counted:
    """The draft model with its forwards excluded from the counter (they are the model's business)."""

    def __init__(self, model, counter: _HostSyncCounter) -> None:
        self.model, self.counter = model, counter

    def __getattr__(self, name):
        return getattr(self.model, name)

    def forward(self, *args, **kwargs):
        self.counter.in_model = True
        try:
            return self.model.forward(*args, **kwargs)
        finally:
            self.counter.in_model = False


def test_search_bookkeeping_reads_the_host_once_per_forward():
    model = make_tiny_llama(8, vocab=32)
    counter = _HostSyncCounter()
    with counter:
        tree = build_draft_tree(_Counted(model, counter), model.new_cache(), torch.tensor(PROMPT), SearchConfig(40, 5, 4, 1.0, None))
    assert tree.draft_forwards >= 3
    assert counter.data_dependent == 0  # no nonzero / boolean indexing
    assert counter.scalar_reads <= tree.draft_forwards + 1  # the next batch size per forward, the tree size once


def test_draft_forwards_are_capped_and_the_tree_stays_valid():
    model = make_tiny_llama(9, vocab=32)
    tree = build_draft_tree(model, model.new_cache(), torch.tensor(PROMPT), SearchConfig(300, 12, 1, 1.0, None, max_forwards=5))
    assert tree.draft_forwards == 5
    assert tree.size == 301
    parents = tree.parents.tolist()
    assert parents[0] == -1 and all(0 <= parents[i] < i for i in range(1, tree.size))
    assert all(tree.cum_logp[i] <= tree.cum_logp[parents[i]] for i in range(1, tree.size))


def test_expansion_width_grows_with_the_budget():
    assert expansion_width(16, 32) == 32  # small budgets keep the requested width
    assert expansion_width(1024, 32) == 1024 // WIDTH_DIVISOR
    assert expansion_width(2048, 1) == 2048 // WIDTH_DIVISOR
    model = make_tiny_llama(10, vocab=32)
    # B = 1 asked: the search widens it, so 200 tokens take a handful of forwards, not ~200
    tree = build_draft_tree(model, model.new_cache(), torch.tensor(PROMPT), SearchConfig(200, 6, 1, 1.0, None))
    assert tree.draft_forwards <= 6 + WIDTH_DIVISOR + 1
