"""The draft tree is exactly the K nodes of highest cumulative draft probability (brute force), the same
with the GPU's fixed-shape search as with the CPU's read-driven one, and the GPU path reads nothing back."""

import pytest
import torch

from core.decoding.device_io import gpu_semantics
from core.bench.device_trace import DeviceTrace
from core.decoding.draft_search import DEFAULT_MAX_FORWARDS, SearchConfig, build_draft_tree
from core.planning.graph_plan import WIDTH_DIVISOR, expansion_width
from core.decoding.sampling import draft_logprobs
from core.modeling.tree_mask import additive_mask, ancestor_matrix, causal_visibility
from conftest import make_tiny_llama

PROMPT = [3, 1, 4, 1, 5]


def next_logprobs(model, ids, temperature, top_p):
    cache = model.new_cache()
    n = len(ids)
    logits = model.forward(
        torch.tensor(ids),
        torch.arange(n),
        additive_mask(causal_visibility(0, n, "cpu"), model.dtype),
        cache,
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
    """node -> token path from the root, for the tree's real nodes (padding nodes left out)."""
    tokens, parents, valid = tree.tokens.tolist(), tree.parents.tolist(), tree.valid.tolist()
    paths = {0: ()}
    for i in range(1, len(tokens)):
        if valid[i]:
            paths[i] = paths[parents[i]] + (tokens[i],)
    return paths


def build_both_ways(model, config, prompt=PROMPT):
    """The tree as a CPU builds it (reads: exact widths, early stop) and as a GPU does (fixed shapes)."""
    cpu = build_draft_tree(model, model.new_cache(), torch.tensor(prompt), config)
    with gpu_semantics():
        gpu = build_draft_tree(model, model.new_cache(), torch.tensor(prompt), config)
    return cpu, gpu


@pytest.mark.parametrize(
    "k,depth,expand,temperature,top_p",
    [
        (1, 3, 1, 1.0, None),
        (7, 3, 2, 1.0, None),
        (20, 3, 4, 0.6, None),
        (40, 3, 3, 1.0, None),
        (60, 4, 16, 1.0, None),
        (25, 2, 5, 1.0, 0.9),
        (30, 4, 1, 0.8, 0.8),
    ],
)
def test_tree_is_exact_top_k(k, depth, expand, temperature, top_p):
    model = make_tiny_llama(5, vocab=6)
    expected = brute_force_top_k(model, k, depth, temperature, top_p)
    for tree in build_both_ways(model, SearchConfig(k, depth, expand, temperature, top_p)):
        assert tree.size == k + 1
        paths = tree_paths(tree)
        got = {paths[i]: float(tree.cum_logp[i]) for i in paths if i}
        assert set(got) == set(expected)
        for path, score in got.items():
            assert abs(score - expected[path]) < 1e-9
        parents = tree.parents.tolist()
        assert parents[0] == -1 and all(0 <= parents[i] < i for i in paths if i)  # topological
        assert int(tree.depths.max()) <= min(depth, tree.max_depth)
        assert all(tree.depths[i] == tree.depths[parents[i]] + 1 for i in paths if i)
        # the tree's own reachability is its ancestor matrix, padding nodes seeing only themselves
        valid = tree.valid
        reference = ancestor_matrix(torch.where(valid, tree.parents, -1)) & valid[:, None] & valid[None, :]
        assert torch.equal(tree.reach, reference | torch.eye(tree.size, dtype=torch.bool))


@pytest.mark.parametrize(
    "k,depth,expand,top_p", [(64, 16, 16, None), (300, 12, 8, None), (40, 6, 4, 0.8), (1, 3, 1, None)]
)
def test_fixed_shape_search_builds_the_cpu_tree(k, depth, expand, top_p):
    """The GPU search (every forward B rows wide, padding masked, a fixed number of forwards, nothing read)
    gives the tree of the CPU search (exact widths, stops when nothing is left to expand)."""
    model = make_tiny_llama(11, vocab=48)
    cpu, gpu = build_both_ways(model, SearchConfig(k, depth, expand, 0.8, top_p))
    assert gpu.draft_forwards == DEFAULT_MAX_FORWARDS and cpu.draft_forwards <= gpu.draft_forwards
    for name in ("tokens", "parents", "depths", "valid", "reach", "births"):
        assert torch.equal(getattr(cpu, name), getattr(gpu, name)), name
    assert torch.allclose(cpu.cum_logp, gpu.cum_logp, atol=1e-12)
    expanded = cpu.cache_rows >= 0
    assert torch.equal(expanded, gpu.cache_rows >= 0)  # the same nodes expanded, though at other cache rows
    assert bool((cpu.births[1:] >= 1).all()) and int(cpu.births.max()) <= cpu.draft_forwards


@pytest.mark.parametrize("gpu", [False, True])
def test_expanded_nodes_have_correct_draft_cache_rows(gpu):
    """Rows recorded for expanded nodes hold that node's KV as a fresh prefill would compute it (written
    through the cache's window, past its committed length, until verification keeps them)."""
    model = make_tiny_llama(6, vocab=8)
    cache = model.new_cache()
    if gpu:
        with gpu_semantics():
            tree = build_draft_tree(model, cache, torch.tensor(PROMPT), SearchConfig(30, 4, 4, 1.0, None))
    else:
        tree = build_draft_tree(model, cache, torch.tensor(PROMPT), SearchConfig(30, 4, 4, 1.0, None))
    assert cache.length == len(PROMPT)
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
        model.forward(
            torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), fresh
        )
        for layer, ref in zip(cache.layers, fresh.layers):
            assert torch.allclose(layer._key_buffer[..., row, :], ref.keys[..., n - 1, :], atol=1e-10)
            assert torch.allclose(layer._value_buffer[..., row, :], ref.values[..., n - 1, :], atol=1e-10)
        checked += 1
    assert checked > 3


def test_ancestor_matrix():
    parents = torch.tensor([-1, 0, 0, 1, 3, 2])
    reach = ancestor_matrix(parents)
    expected = {0: {0}, 1: {0, 1}, 2: {0, 2}, 3: {0, 1, 3}, 4: {0, 1, 3, 4}, 5: {0, 2, 5}}
    for i, ancestors in expected.items():
        assert set(torch.nonzero(reach[i]).flatten().tolist()) == ancestors


@pytest.mark.parametrize("top_p", [None, 0.9])
def test_search_reads_nothing_back_and_copies_nothing(top_p):
    """On a GPU the whole search (its forwards included) is queued without one host sync or copy: traced
    with every tensor tagged as a GPU would hold it."""
    model = make_tiny_llama(8, vocab=32)
    cache = model.new_cache()
    trace = DeviceTrace()
    trace.mark_model(model)
    trace.watch_draft(model)
    pending = torch.tensor(PROMPT)
    trace.mark_device(pending)
    with trace:
        tree = build_draft_tree(model, cache, pending, SearchConfig(40, 5, 4, 1.0, top_p), forwards=6)
    counts = trace.snapshot()
    assert tree.draft_forwards == counts.draft_forwards == 6
    assert dict(counts.syncs) == {} and counts.h2d_bytes == 0
    assert counts.draft_kernels > 0 and counts.kernels > counts.draft_kernels


def test_draft_forwards_are_capped_and_the_tree_stays_valid():
    model = make_tiny_llama(9, vocab=32)
    tree = build_draft_tree(
        model, model.new_cache(), torch.tensor(PROMPT), SearchConfig(300, 12, 1, 1.0, None, max_forwards=5)
    )
    assert tree.draft_forwards == 5
    assert tree.size == 301 and bool(tree.valid.all())
    parents = tree.parents.tolist()
    assert parents[0] == -1 and all(0 <= parents[i] < i for i in range(1, tree.size))
    assert all(tree.cum_logp[i] <= tree.cum_logp[parents[i]] for i in range(1, tree.size))
    assert int(tree.depths.max()) <= tree.max_depth == 5


def test_search_near_the_end_of_the_cache_expands_only_what_fits():
    """A draft cache with a few rows left: the tree is the top K of the nodes the rows allow, and nothing
    is written past the planned capacity."""
    model = make_tiny_llama(12, vocab=32)
    model.max_context, model.max_tree_tokens = 20, 4  # capacity 25 rows
    cache = model.new_cache()
    prompt = list(range(3, 21))  # root at row 17: 7 rows left after it
    for semantics in (False, True):
        cache.crop_to(0)
        if semantics:
            with gpu_semantics():
                tree = build_draft_tree(model, cache, torch.tensor(prompt), SearchConfig(16, 8, 4, 1.0, None))
        else:
            tree = build_draft_tree(model, cache, torch.tensor(prompt), SearchConfig(16, 8, 4, 1.0, None))
        rows = tree.cache_rows[tree.cache_rows >= 0]
        assert int(rows.max()) < cache.capacity and len(rows) <= 1 + 7 - 4 + 4
        assert int(tree.valid.sum()) == 17


def test_expansion_width_grows_with_the_budget():
    assert expansion_width(16, 32) == 32  # small budgets keep the requested width
    assert expansion_width(1024, 32) == 1024 // WIDTH_DIVISOR
    assert expansion_width(2048, 1) == 2048 // WIDTH_DIVISOR
    model = make_tiny_llama(10, vocab=32)
    # B = 1 asked: the search widens it, so 200 tokens take a handful of forwards, not ~200
    tree = build_draft_tree(model, model.new_cache(), torch.tensor(PROMPT), SearchConfig(200, 6, 1, 1.0, None))
    assert tree.draft_forwards <= 6 + WIDTH_DIVISOR + 1
