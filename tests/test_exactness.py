"""SpecExec == sequential, token for token, for the same seed (float64 tiny Llama pairs)."""

import pytest
import torch

from core.decode_state import DecodeState
from core.methods.sequential import sequential_steps
from core.methods.specexec import TreeSettings, specexec_steps
from core.sampling import SamplingParams
from core.tree_mask import additive_mask, causal_visibility

PROMPT = [1, 17, 5, 33, 8, 2, 40]


def run_sequential(target, params, n, prompt=PROMPT):
    state = DecodeState.fresh(prompt, target, None)
    return [t for step in sequential_steps(state, target, params, n) for t in step.token_ids]


def run_specexec(target, draft, params, tree, n, prompt=PROMPT):
    state = DecodeState.fresh(prompt, target, draft)
    steps = list(specexec_steps(state, target, draft, params, tree, n))
    return [t for step in steps for t in step.token_ids], steps, state


@pytest.mark.parametrize("temperature", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("top_p", [1.0, 0.9])
@pytest.mark.parametrize("budget,depth,expand", [(1, 1, 1), (3, 2, 1), (16, 4, 4), (64, 8, 16), (512, 32, 64)])
def test_specexec_equals_sequential(tiny_target, tiny_draft, temperature, top_p, budget, depth, expand):
    for seed in range(2):
        params = SamplingParams(temperature=temperature, top_p=top_p, seed=seed)
        expected = run_sequential(tiny_target, params, 30)
        got, steps, _ = run_specexec(tiny_target, tiny_draft, params, TreeSettings(budget, depth, expand), 30)
        assert got == expected, f"seed {seed}"
        assert all(step.stats.tree_size <= budget and step.stats.tree_depth <= depth for step in steps)


def test_specexec_accepts_several_tokens_per_pass(tiny_target, tiny_draft):
    """A good draft makes passes count; also guards against a verifier that silently accepts nothing."""
    params = SamplingParams(temperature=0.6, seed=0)
    got, steps, _ = run_specexec(tiny_target, tiny_draft, params, TreeSettings(64, 16, 16), 60)
    assert len(got) == 60
    assert len(got) / len(steps) > 2.0


def test_draft_equal_to_target_greedy_accepts_every_draft_token(tiny_target):
    """With draft == target at temperature 0 and budget 1, the single draft token is the target's argmax:
    every pass emits it plus the target's next token, except a last pass cut by max_new_tokens."""
    params = SamplingParams(temperature=0.0)
    got, steps, _ = run_specexec(tiny_target, tiny_target, params, TreeSettings(1, 1, 1), 27)
    assert got == run_sequential(tiny_target, params, 27)
    assert [s.stats.tokens for s in steps] == [2] * 13 + [1]


def test_repetition_penalty_exact(tiny_target, tiny_draft):
    params = SamplingParams(temperature=0.8, repetition_penalty=1.3, seed=4)
    got, _, _ = run_specexec(tiny_target, tiny_draft, params, TreeSettings(32, 8, 8), 30)
    assert got == run_sequential(tiny_target, params, 30)


def test_max_new_tokens_never_exceeded(tiny_target, tiny_draft):
    for n in (1, 2, 5, 17):
        got, _, state = run_specexec(tiny_target, tiny_draft, SamplingParams(temperature=0.6), TreeSettings(64, 16, 8), n)
        assert len(got) == n and len(state.tokens) == len(PROMPT) + n


def fresh_prefill(model, ids):
    cache = model.new_cache()
    n = len(ids)
    model.forward(torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), cache)
    return cache


def test_caches_equal_fresh_prefill_after_many_passes(tiny_target, tiny_draft):
    _, steps, state = run_specexec(tiny_target, tiny_draft, SamplingParams(temperature=1.0, seed=2), TreeSettings(48, 8, 8), 80)
    assert len(steps) > 5
    for model, cache in ((tiny_target, state.target_cache), (tiny_draft, state.draft_cache)):
        cached = state.tokens[: cache.length]
        assert cache.length >= len(state.tokens) - 3  # at most the unexpanded leaf and the new token pending
        fresh = fresh_prefill(model, cached)
        for layer, ref in zip(cache.layers, fresh.layers):
            assert torch.allclose(layer.keys, ref.keys, atol=1e-10)
            assert torch.allclose(layer.values, ref.values, atol=1e-10)
    assert state.target_cache.length == len(state.tokens) - 1
