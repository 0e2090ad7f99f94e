"""The grown subtree under the emitted token (core.decoding.subtree_keep): what is kept, where its KV rows go,
and that the next search starting from it builds a valid tree whose rows hold what a fresh prefill computes.
CPU path and the GPU's fixed-shape path (gpu_semantics), which must keep the same nodes."""

from __future__ import annotations

import pytest
import torch

from conftest import make_tiny_llama, sharpen
from core.bench.device_trace import DeviceTrace
from core.decoding.device_io import gpu_semantics
from core.decoding.draft_search import SearchConfig, build_draft_tree
from core.decoding.methods.tree_forward import commit_draft_path
from core.decoding.subtree_keep import find_kept, keep_subtree
from core.modeling.tree_mask import additive_mask, causal_visibility

PROMPT = [1, 17, 5, 33, 8, 2, 40]
CONFIG = SearchConfig(12, 8, 3, 1.0, None)
POOL = 48


def _grown(model, gpu: bool):
    """A searched tree of budget 12 whose search then grew 6 shadow forwards inside a pool of 48."""
    cache = model.new_cache()
    tree = build_draft_tree(model, cache, torch.tensor(PROMPT), CONFIG, 4, None, POOL, 6)
    tree.search.grow(POOL, 6)
    return tree, cache


def _keep(search, emitted: list[int], cache, max_nodes: int):
    """What a pass does: find the nodes under the emitted tokens on the device, read their count (the pass's
    read), keep them."""
    kept = find_kept(search, torch.tensor(emitted), len(emitted))
    return keep_subtree(search, kept, int(kept.count), len(emitted) - 1, cache, max_nodes)


def _deep_path(search) -> list[int]:
    """Tokens from the root to an expanded node that has expanded children (so something is kept under it)."""
    n = int(search.n_expanded)
    parents, tokens = search.e_parent[:n].tolist(), search.e_token[:n].tolist()
    has_children = {p for p in parents[1:]}
    node = max(j for j in range(1, n) if j in has_children)
    path = []
    while node > 0:
        path.append(tokens[node])
        node = parents[node]
    return path[::-1]


def _fresh_row(model, ids: list[int], layer: int):
    cache = model.new_cache()
    n = len(ids)
    model.forward(torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), cache)
    return cache.layers[layer].keys[..., n - 1, :], cache.layers[layer].values[..., n - 1, :]


def _seed_paths(seed) -> dict[int, list[int]]:
    """Kept expanded node -> its tokens below the new root."""
    n = int(seed.n_expanded)
    parents, tokens = seed.e_parent[:n].tolist(), seed.e_token[:n].tolist()
    paths = {0: []}
    for j in range(1, n):
        paths[j] = paths[parents[j]] + [tokens[j]]
    return paths


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu-path"])
def test_the_kept_subtree_is_the_grown_one_under_the_emitted_token_with_its_rows_moved(gpu):
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    with gpu_semantics() if gpu else torch.no_grad():
        tree, cache = _grown(model, gpu)
        search = tree.search
        emitted = _deep_path(search)
        n = int(search.n_expanded)
        parents, tokens = search.e_parent[:n].tolist(), search.e_token[:n].tolist()

        # the grown nodes under the emitted path's last node, by their token paths
        def path_of(j):
            out = []
            while j > 0:
                out.append(tokens[j])
                j = parents[j]
            return out[::-1]

        under = {tuple(path_of(j)[len(emitted) :]) for j in range(1, n) if path_of(j)[: len(emitted)] == emitted}
        commit_draft_path(cache, tree.root_row, torch.tensor([tree.root_row]))  # the root alone was expanded
        seed = _keep(search, emitted, cache, max_nodes=64)
    kept = _seed_paths(seed)
    assert {tuple(p) for p in kept.values()} == under and len(under) > 1  # every expanded node under it, nothing else
    assert seed.root_row == tree.root_row + len(emitted)
    assert int(seed.nodes) == len(under) - 1  # the new root excluded
    assert all(d == len(kept[j]) for j, d in enumerate(seed.e_depth[: len(kept)].tolist()))
    # each kept node's KV row (after the new root's) holds what a fresh prefill of its tokens computes
    base = PROMPT + emitted
    for j, path in kept.items():
        if j == 0:
            continue  # the new root's row is written by the next search's catch-up forward
        for layer in range(len(cache.layers)):
            keys, values = _fresh_row(model, base + path, layer)
            row = seed.root_row + j
            assert torch.allclose(cache.layers[layer]._key_buffer[..., row, :], keys, atol=1e-10)
            assert torch.allclose(cache.layers[layer]._value_buffer[..., row, :], values, atol=1e-10)


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu-path"])
def test_nothing_is_kept_when_the_emitted_token_was_never_expanded(gpu):
    """No seed at all, on either path: a seed's slots are rows of the next catch-up forward, so a GPU's seed
    of padding rows (the budget's, before) would cost that forward several search forwards' worth."""
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    with gpu_semantics() if gpu else torch.no_grad():
        tree, cache = _grown(model, gpu)
        search = tree.search
        first = int(search.e_token[1])
        unexpanded = next(t for t in range(48) if not bool(((search.e_parent == 1) & (search.e_token == t)).any()))
        kept = find_kept(search, torch.tensor([first, unexpanded]), 2)
        assert int(kept.count) == 0
        assert keep_subtree(search, kept, int(kept.count), 1, cache, max_nodes=64) is None


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu-path"])
def test_a_seed_has_a_slot_for_each_kept_node_and_no_more(gpu):
    """The seed, and so the next catch-up forward's re-scored rows, is exactly the emitted token and the grown
    nodes under it, however many more the shadow expanded and the budget allows (before, a GPU's seed took
    the budget's rows whatever was kept)."""
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    with gpu_semantics() if gpu else torch.no_grad():
        tree, cache = _grown(model, gpu)
        search = tree.search
        emitted = _deep_path(search)
        kept = find_kept(search, torch.tensor(emitted + [0, 0]), len(emitted))  # a walk's tokens run on
        commit_draft_path(cache, tree.root_row, torch.tensor([tree.root_row]))
        seed = keep_subtree(search, kept, int(kept.count), len(emitted) - 1, cache, max_nodes=64)
    assert 2 <= seed.slots == int(kept.count) == int(seed.nodes) + 1 < int(search.n_expanded)


def test_a_search_from_the_seed_grows_on_and_its_rows_are_right():
    """The next search roots at the emitted token, writes its row by the catch-up forward, keeps the seeded
    nodes (found by forward 1) and expands on from them: every expanded node's row equals a fresh prefill's."""
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    tree, cache = _grown(model, False)
    emitted = _deep_path(tree.search)
    commit_draft_path(cache, tree.root_row, torch.tensor([tree.root_row]))
    seed = _keep(tree.search, emitted, cache, max_nodes=64)
    tokens = PROMPT + emitted
    pending = torch.tensor(tokens[cache.length :])
    nxt = build_draft_tree(model, cache, pending, CONFIG, 3, seed, POOL, 0)
    assert nxt.seed_nodes is not None and int(nxt.seed_nodes) == int(seed.nodes)
    assert nxt.root_row == seed.root_row and bool((nxt.births[1:][nxt.valid[1:]] >= 1).all())
    rows, parents, valid = nxt.cache_rows.tolist(), nxt.parents.tolist(), nxt.valid.tolist()
    toks = nxt.tokens.tolist()
    checked = 0
    for i, row in enumerate(rows):
        if i == 0 or row < 0 or not valid[i]:
            continue
        path, j = [], i
        while j > 0:
            path.append(toks[j])
            j = parents[j]
        keys, values = _fresh_row(model, tokens + path[::-1], 0)
        assert torch.allclose(cache.layers[0]._key_buffer[..., row, :], keys, atol=1e-10)
        assert torch.allclose(cache.layers[0]._value_buffer[..., row, :], values, atol=1e-10)
        checked += 1
    assert checked >= 2


def test_keeping_reads_nothing_on_a_gpu():
    """Finding the kept nodes and keeping them are device ops of fixed size: no host sync (the emitted tokens go
    over asynchronously, and the count comes with the pass's own read)."""
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    with gpu_semantics():
        tree, cache = _grown(model, True)
    emitted = _deep_path(tree.search)
    trace = DeviceTrace()
    trace.mark_model(model)
    trace.mark_cache(cache)
    search = tree.search
    trace.mark_device(*(value for value in vars(search).values() if isinstance(value, torch.Tensor)))
    tokens = torch.tensor(emitted)  # the walk's tokens, on the device
    trace.mark_device(tokens)
    with gpu_semantics(), trace:
        kept = find_kept(search, tokens, len(emitted))
    count = int(kept.count)  # what the pass's one read brings back
    with gpu_semantics(), trace:
        keep_subtree(search, kept, count, len(emitted) - 1, cache, max_nodes=64)
    counts = trace.snapshot()
    assert dict(counts.syncs) == {} and count > 1


def _tree_paths(tree) -> dict[tuple[int, ...], float]:
    """Each real draft node's tokens below the root -> its cumulative log-prob."""
    tokens, parents, valid, cum = tree.tokens.tolist(), tree.parents.tolist(), tree.valid.tolist(), tree.cum_logp
    paths = {}
    for i in range(1, len(tokens)):
        if valid[i]:
            path, j = [], i
            while j > 0:
                path.append(tokens[j])
                j = parents[j]
            paths[tuple(path[::-1])] = float(cum[i])
    return paths


@pytest.mark.parametrize(
    ("dtype", "gpu"),
    [(torch.float64, False), (torch.float32, False), (torch.float64, True)],
    ids=["float64", "float32", "float64-gpu-path"],
)
def test_a_search_from_a_kept_subtree_builds_the_tree_a_fresh_search_builds(dtype, gpu):
    """Keeping only spares forwards: under each emitted path to an expanded node with expanded children (the
    first six), the seeded search's tree is the top-K tree a fresh search from the same root builds at the same
    budget (the same token paths, the same cumulative log-probs), though the shadow's pool trimmed children of
    the kept nodes and the seed holds some of the root's children already."""
    model = sharpen(make_tiny_llama(5, vocab=48, dtype=dtype), 20.0)
    config, pool = SearchConfig(12, 8, 3, 1.0, None), 48
    tolerance = 1e-9 if dtype == torch.float64 else 1e-4
    compared = 0
    with gpu_semantics() if gpu else torch.no_grad():
        grown = build_draft_tree(model, model.new_cache(), torch.tensor(PROMPT), config, 8, None, pool, 16).search
        grown.grow(pool, 16)
        n = int(grown.n_expanded)
        parents, tokens = grown.e_parent[:n].tolist(), grown.e_token[:n].tolist()
        for node in [j for j in range(1, n) if j in parents[1:]][:6]:
            emitted, j = [], node
            while j > 0:
                emitted.append(tokens[j])
                j = parents[j]
            emitted = emitted[::-1]
            cache = model.new_cache()
            tree = build_draft_tree(model, cache, torch.tensor(PROMPT), config, 8, None, pool, 16)
            tree.search.grow(pool, 16)
            commit_draft_path(cache, tree.root_row, torch.tensor([tree.root_row]))
            seed = _keep(tree.search, emitted, cache, max_nodes=config.budget)
            if seed is None or int(seed.nodes) == 0:
                continue  # nothing under the emitted token: the next search starts from its root alone
            ids = PROMPT + emitted
            seeded = build_draft_tree(model, cache, torch.tensor(ids[cache.length :]), config, 8, seed, pool, 0)
            fresh = build_draft_tree(model, model.new_cache(), torch.tensor(ids), config, 8, None, pool, 0)
            got, want = _tree_paths(seeded), _tree_paths(fresh)
            assert set(got) == set(want), emitted
            assert all(abs(got[path] - want[path]) < tolerance for path in want)
            compared += 1
    assert compared >= 3


def test_a_search_from_a_seed_reads_nothing_on_a_gpu():
    """The next search's catch-up forward re-scores the kept rows and merges their children with device ops of
    fixed size (the seed's slots, known on the host): no host sync from the seed to the finished tree."""
    model = sharpen(make_tiny_llama(4, vocab=48), 20.0)
    with gpu_semantics():
        tree, cache = _grown(model, True)
        emitted = _deep_path(tree.search)
        commit_draft_path(cache, tree.root_row, torch.tensor([tree.root_row]))
        seed = _keep(tree.search, emitted, cache, max_nodes=64)
    pending = torch.tensor((PROMPT + emitted)[cache.length :])
    trace = DeviceTrace()
    trace.mark_model(model)
    trace.mark_cache(cache)
    trace.mark_device(pending, *(value for value in vars(seed).values() if isinstance(value, torch.Tensor)))
    with gpu_semantics(), trace:
        nxt = build_draft_tree(model, cache, pending, CONFIG, 3, seed, POOL, 0)
    assert dict(trace.snapshot().syncs) == {}
    assert int(nxt.seed_nodes) == int(seed.nodes) > 0
