"""SpecInfer baseline: its output follows the target's exact distribution, greedy equals sequential, it never
overshoots max_new_tokens, and its KV caches stay equal to a fresh prefill.

The statistical tests compare empirical frequencies over many seeds with distributions computed directly
from the target's logits. Tolerances are derived, not tuned; see `tv_tolerance`.
"""

from __future__ import annotations

import math

import pytest
import torch

from core.decoding.decode_state import DecodeState
from core.decoding.methods import specinfer
from core.decoding.methods.sequential import sequential_steps
from core.decoding.settings import SamplingParams, TreeSettings
from core.decoding.methods.specinfer import chain_shape, choose_among_candidates, merge_chains, specinfer_steps
from core.decoding.sampling import target_probs
from core.modeling.tree_mask import additive_mask, causal_visibility
from conftest import make_tiny_llama, sharpen

VOCAB = 8  # small, so a few thousand samples pin a distribution down
PROMPT = [1, 3, 5, 2]
RUNS = 3000  # one run = one decode of the first two tokens, ~14 ms with one thread on a 2-core CI machine


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def small_target():
    """1 layer, hidden 16, vocab 8, sharpened so the top token has ~0.24 (T=1) / ~0.34 (T=0.6, top-p 0.9)."""
    return sharpen(make_tiny_llama(0, vocab=VOCAB, layers=1, hidden=16), 10.0)


@pytest.fixture(scope="module")
def close_draft(small_target):
    """The target plus 10% weight noise: first-token total variation from the target ~0.1."""
    draft = make_tiny_llama(0, vocab=VOCAB, layers=1, hidden=16)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p_d, p_t in zip(draft.model.parameters(), small_target.model.parameters()):
            noise = torch.randn(p_t.shape, generator=generator, dtype=p_t.dtype)
            p_d.copy_(p_t + 0.1 * noise * p_t.std().clamp_min(1e-3))
    return draft


@pytest.fixture(scope="module")
def far_draft():
    """An unrelated random model: first-token total variation from the target ~0.34-0.48, and at T=0.6 /
    top-p 0.9 its nucleus misses tokens the target's keeps (only the residual can emit those)."""
    return sharpen(make_tiny_llama(5, vocab=VOCAB, layers=1, hidden=16), 10.0)


# ---------------------------------------------------------------------------------------------- helpers


def next_token_probs(model, ids: list[int], params: SamplingParams) -> torch.Tensor:
    """The exact sampling distribution [V] after `ids`, from one plain causal forward on a fresh cache."""
    n = len(ids)
    mask = additive_mask(causal_visibility(0, n, "cpu"), model.dtype)
    logits = model.forward(torch.tensor(ids), torch.arange(n), mask, model.new_cache(), logit_rows=slice(-1, None))
    return target_probs(logits[0], params, torch.tensor(ids)).double()


def exact_first_two(target, params: SamplingParams) -> torch.Tensor:
    """joint[a, b] = P(first token a) * P(second token b | a), straight from the target."""
    first = next_token_probs(target, PROMPT, params)
    joint = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
    for a in torch.nonzero(first).flatten().tolist():
        joint[a] = first[a] * next_token_probs(target, PROMPT + [a], params)
    return joint


def first_two_tokens(target, draft, params: SamplingParams, tree: TreeSettings, max_new_tokens: int) -> tuple[int, int]:
    """Decode from PROMPT with SpecInfer until two tokens are out (one or two passes)."""
    state = DecodeState.fresh(PROMPT, target, draft)
    out: list[int] = []
    for step in specinfer_steps(state, target, draft, params, tree, max_new_tokens):
        out += step.token_ids
        if len(out) >= 2:
            break
    return out[0], out[1]


def total_variation(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p - q).abs().sum())


def tv_tolerance(exact: torch.Tensor, samples: int, failure: float = 1e-3) -> float:
    """A bound the empirical total variation of `samples` i.i.d. draws from `exact` exceeds with probability
    below `failure`.

    Mean: E|freq_i - p_i| <= sqrt(p_i (1 - p_i) / n) (Jensen), so E[TV] <= 1/2 sum_i sqrt(p_i (1 - p_i) / n).
    Spread: one sample moves TV by at most 1/n, so McDiarmid gives P(TV > E[TV] + t) <= exp(-2 n t^2);
    t = sqrt(ln(1 / failure) / (2 n)). With n = 3000 over 8 tokens this is ~0.05 (t alone is 0.034);
    over the 64 (first, second) pairs ~0.08. The seeds are hashed into independent generators, so the runs
    are i.i.d. draws of the method's output distribution.
    """
    p = exact.flatten()
    mean_bound = 0.5 * float(torch.sqrt(p * (1 - p) / samples).sum())
    return mean_bound + math.sqrt(math.log(1 / failure) / (2 * samples))


# ------------------------------------------------------------------------------- distribution (end to end)


CASES = {
    # name: (draft fixture, sampling params, max_new_tokens); budget 16 throughout
    # max_new_tokens=3 -> 8 chains of 2 tokens: rejection rounds at depth 0 and 1
    "T1.0-close": ("close_draft", SamplingParams(temperature=1.0), 3),
    # the draft's nucleus misses tokens the target's keeps: only the residual can emit them
    "T0.6-top_p0.9-far": ("far_draft", SamplingParams(temperature=0.6, top_p=0.9), 3),
    # max_new_tokens=2 -> 16 chains of 1 token: long runs of rejections, then the residual; repetition
    # penalty so the target's p depends on the context the walk carries
    "T1.0-far-penalty": ("far_draft", SamplingParams(temperature=1.0, repetition_penalty=1.3), 2),
}


@pytest.mark.slow  # thousands of sampled answers per case
@pytest.mark.parametrize("case", list(CASES))
def test_first_tokens_follow_target_distribution(case, request, small_target):
    """Over RUNS seeds, the first token, the second token and the (first, second) pair all follow the
    target's exact distributions, whatever the draft. The seed is the only thing that changes."""
    draft_name, base, max_new_tokens = CASES[case]
    draft = request.getfixturevalue(draft_name)
    tree = TreeSettings(budget=16, max_depth=8)
    counts = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
    for seed in range(RUNS):
        params = SamplingParams(base.temperature, base.top_p, base.top_k, base.repetition_penalty, seed=seed)
        a, b = first_two_tokens(small_target, draft, params, tree, max_new_tokens)
        counts[a, b] += 1
    observed = counts / RUNS
    exact = exact_first_two(small_target, base)

    for name, obs, ref in (
        ("first token", observed.sum(1), exact.sum(1)),
        ("second token", observed.sum(0), exact.sum(0)),
        ("first two tokens", observed, exact),
    ):
        tv, tolerance = total_variation(obs, ref), tv_tolerance(ref, RUNS)
        assert tv < tolerance, f"{case}: {name} TV {tv:.4f} >= {tolerance:.4f}"

    # Power: a method that emitted the draft's own samples would be caught by the same tolerance.
    draft_first = next_token_probs(draft, PROMPT, SamplingParams(base.temperature, base.top_p, base.top_k))
    assert total_variation(draft_first, exact.sum(1)) > tv_tolerance(exact.sum(1), RUNS)


# ------------------------------------------------------------------------------ the acceptance rule alone


P_HAND = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
Q_HAND = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)  # token 3 is drafted often, never accepted


def _rejection_sampling_frequencies(samples: int) -> torch.Tensor:
    """Output frequencies of choose_among_candidates with 3 i.i.d. candidates from Q_HAND per seed."""
    counts = torch.zeros(4, dtype=torch.float64)
    for seed in range(samples):
        generator = torch.Generator().manual_seed(10_000 + seed)
        candidates = torch.multinomial(Q_HAND, 3, replacement=True, generator=generator).tolist()
        token, _ = choose_among_candidates(P_HAND, Q_HAND, candidates, seed, position=7)
        counts[token] += 1
    return counts / samples


def test_multi_round_rejection_is_exact_on_hand_distributions():
    """The multi-round rule alone, on hand-written p and q (q puts 0.4 where p is 0, repeats allowed):
    10,000 draws, tolerance ~0.03 by `tv_tolerance`."""
    samples = 10_000
    frequencies = _rejection_sampling_frequencies(samples)
    assert total_variation(frequencies, P_HAND) < tv_tolerance(P_HAND, samples)
    assert frequencies[3] == 0  # a token the target excludes is never emitted


def test_rejection_test_detects_a_missing_residual(monkeypatch):
    """Power check: keeping p instead of the residual after a rejection (a classic bug) is caught."""
    monkeypatch.setattr(specinfer, "residual_distribution", lambda p, q: p)
    samples = 4000
    frequencies = _rejection_sampling_frequencies(samples)
    assert total_variation(frequencies, P_HAND) > tv_tolerance(P_HAND, samples)


# ---------------------------------------------------------------------------------- greedy == sequential


@pytest.mark.parametrize("budget", [1, 16, 64])
@pytest.mark.parametrize("penalty", [1.0, 1.3])
def test_greedy_matches_sequential(budget, penalty, tiny_target, tiny_draft):
    params = SamplingParams(temperature=0.0, repetition_penalty=penalty)
    prompt = [1, 17, 42, 9, 5]
    state = DecodeState.fresh(prompt, tiny_target, tiny_draft)
    steps = list(specinfer_steps(state, tiny_target, tiny_draft, params, TreeSettings(budget=budget), 24))
    reference = DecodeState.fresh(prompt, tiny_target, None)
    expected = [t for step in sequential_steps(reference, tiny_target, params, 24) for t in step.token_ids]
    assert [t for step in steps for t in step.token_ids] == expected
    # greedy drafts are deterministic: every chain is the same, so the trie is a single chain
    assert all(step.stats.tree_size == step.stats.tree_depth for step in steps)
    assert any(step.stats.tokens > 1 for step in steps)  # the noisy draft does get tokens accepted


def test_greedy_matches_sequential_with_an_unrelated_draft(small_target, far_draft):
    params = SamplingParams(temperature=0.0)
    state = DecodeState.fresh(PROMPT, small_target, far_draft)
    steps = specinfer_steps(state, small_target, far_draft, params, TreeSettings(budget=16), 20)
    got = [t for step in steps for t in step.token_ids]
    reference = DecodeState.fresh(PROMPT, small_target, None)
    assert got == [t for s in sequential_steps(reference, small_target, params, 20) for t in s.token_ids]


# -------------------------------------------------------------------------- length and cache invariants


def _fresh_keys(model, tokens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    cache = model.new_cache()
    n = len(tokens)
    mask = additive_mask(causal_visibility(0, n, "cpu"), model.dtype)
    model.forward(torch.tensor(tokens), torch.arange(n), mask, cache)
    return [(layer.keys, layer.values) for layer in cache.layers]


def _assert_cache_matches_prefill(cache, model, tokens: list[int]) -> None:
    for layer, (keys, values) in zip(cache.layers, _fresh_keys(model, tokens)):
        assert layer.keys.shape == keys.shape
        assert torch.allclose(layer.keys, keys, atol=1e-10, rtol=0)
        assert torch.allclose(layer.values, values, atol=1e-10, rtol=0)


@pytest.mark.parametrize("max_new_tokens", [1, 2, 5, 13])
@pytest.mark.parametrize("budget", [4, 64])
def test_exact_length_and_caches_equal_fresh_prefill(max_new_tokens, budget, tiny_target, tiny_draft):
    params = SamplingParams(temperature=1.0, seed=3)
    prompt = [1, 17, 42, 9]
    state = DecodeState.fresh(prompt, tiny_target, tiny_draft)
    tree = TreeSettings(budget=budget, max_depth=4)
    emitted = 0
    for step in specinfer_steps(state, tiny_target, tiny_draft, params, tree, max_new_tokens):
        assert 1 <= len(step.token_ids) <= max_new_tokens - emitted
        assert step.stats.tree_size <= budget and step.stats.tree_depth <= 4
        emitted += len(step.token_ids)
    assert emitted == max_new_tokens and len(state.tokens) == len(prompt) + max_new_tokens
    # the target holds everything but the root of the next pass; the draft a prefix of it
    assert state.target_cache.length == len(state.tokens) - 1
    _assert_cache_matches_prefill(state.target_cache, tiny_target, state.tokens[:-1])
    # a single-token request leaves no room for a draft token, so the draft never runs
    assert (state.draft_cache.length > 0) == (max_new_tokens > 1)
    assert state.draft_cache.length <= len(state.tokens) - 1
    if state.draft_cache.length:
        _assert_cache_matches_prefill(state.draft_cache, tiny_draft, state.tokens[: state.draft_cache.length])


def test_draft_equal_to_target_accepts_whole_chains(tiny_target):
    """Known acceptance pattern: with q == p every candidate is accepted (p/q = 1), so each pass emits its
    full chain plus one token, capped by what is left: 11 tokens with L = 4 -> passes of 5, 5, 1."""
    state = DecodeState.fresh([1, 2, 3], tiny_target, tiny_target)
    tree = TreeSettings(budget=16, max_depth=4)
    steps = list(specinfer_steps(state, tiny_target, tiny_target, SamplingParams(seed=11), tree, 11))
    assert [step.stats.tokens for step in steps] == [5, 5, 1]
    assert [step.stats.draft_forwards for step in steps] == [4, 4, 0]  # the last pass has no room for a draft
    _assert_cache_matches_prefill(state.target_cache, tiny_target, state.tokens[:-1])
    _assert_cache_matches_prefill(state.draft_cache, tiny_target, state.tokens[: state.draft_cache.length])


def test_same_seed_same_tokens(tiny_target, tiny_draft):
    def run(seed: int) -> list[int]:
        state = DecodeState.fresh([1, 2, 3], tiny_target, tiny_draft)
        steps = specinfer_steps(state, tiny_target, tiny_draft, SamplingParams(seed=seed), TreeSettings(budget=16), 12)
        return [t for step in steps for t in step.token_ids]

    assert run(5) == run(5)
    assert run(5) != run(6)


# ----------------------------------------------------------------------------------------- pure pieces


def test_chain_shape():
    assert [chain_shape(b, 64) for b in (16, 64, 256, 1024)] == [(4, 4), (8, 8), (32, 8), (32, 32)]
    assert chain_shape(2048, 32) == (64, 32)  # past 32 chains the length grows, up to the depth cap
    assert chain_shape(64, 3) == (21, 3)  # the depth cap shortens chains and widens the trie
    assert chain_shape(1, 8) == (1, 1)
    assert chain_shape(2, 8) == (1, 2)  # round(sqrt(2)) = 1 chain
    assert chain_shape(10, 8) == (3, 3)
    assert chain_shape(64, 0) == (0, 0)  # no room: a plain target step
    for budget in range(1, 300):
        for depth in (1, 2, 5, 32):
            width, length = chain_shape(budget, depth)
            assert 1 <= length <= depth and width >= 1 and width * length <= budget


def test_merge_chains_keeps_unique_prefixes_and_sampled_children_with_repeats():
    trie = merge_chains(root_token=9, chains=[[3, 4], [3, 5], [3, 4], [6, 4]], root_row=10)
    assert trie.tokens.tolist() == [9, 3, 6, 4, 5, 4]
    assert trie.parents.tolist() == [-1, 0, 0, 1, 1, 2]
    assert trie.depths.tolist() == [0, 1, 1, 2, 2, 2]
    # root at row 10; depth-1 tips at 11 + chain (first chain through the node); depth-2 tips never forwarded
    assert trie.cache_rows.tolist() == [10, 11, 14, -1, -1, -1]
    assert trie.children == [[3, 3, 3, 6], [4, 5, 4], [4], [], [], []]
    assert trie.child_node[1] == {4: 3, 5: 4}
    assert trie.q_source[:3] == [(0, 0), (1, 0), (1, 3)]


def test_merge_without_chains_is_the_root_alone():
    trie = merge_chains(root_token=4, chains=[], root_row=-1)
    assert trie.size == 1 and trie.cache_rows.tolist() == [-1] and trie.children == [[]]
