"""SpecExec == sequential, token for token, for the same seed (float64 and float32 tiny Llama pairs), on the
CPU's read-driven path and on the GPU's fixed-shape one, with adaptive depth on or off."""

import pytest
import torch

from core.decoding.autotune.cost_model import CostModel, Curve
from core.decoding.autotune.depth import DepthPolicy
from core.decoding.decode_state import DecodeState
from core.decoding.device_io import gpu_semantics
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.specexec import specexec_steps
from core.decoding.settings import SamplingParams, TreeSettings
from core.modeling.tree_mask import additive_mask, causal_visibility
from conftest import make_tiny_llama, noisy_copy, sharpen

PROMPT = [1, 17, 5, 33, 8, 2, 40]


def run_sequential(target, params, n, prompt=PROMPT):
    state = DecodeState.fresh(prompt, target, None)
    return [t for step in sequential_steps(state, target, params, n) for t in step.token_ids]


def run_specexec(target, draft, params, tree, n, prompt=PROMPT, depth=None):
    state = DecodeState.fresh(prompt, target, draft)
    steps = list(specexec_steps(state, target, draft, params, tree, n, depth))
    return [t for step in steps for t in step.token_ids], steps, state


def cost_model(draft_seconds: float) -> CostModel:
    """A machine where a target pass costs 1 s and a draft forward `draft_seconds`, whatever its size."""
    flat = Curve(((1, 1.0), (2048, 1.0)))
    return CostModel(flat, Curve(((1, draft_seconds), (2048, draft_seconds))), 0.5)


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
    tokens = passes = 0
    for seed in range(4):
        got, steps, _ = run_specexec(
            tiny_target, tiny_draft, SamplingParams(temperature=0.6, seed=seed), TreeSettings(64, 16, 16), 60
        )
        assert len(got) == 60
        tokens, passes = tokens + len(got), passes + len(steps)
    assert tokens / passes > 2.0


@pytest.mark.parametrize("temperature,top_p,penalty", [(0.0, 1.0, 1.0), (0.8, 0.9, 1.0), (1.0, 1.0, 1.3)])
def test_gpu_path_equals_sequential(tiny_target, tiny_draft, temperature, top_p, penalty):
    """The path a GPU runs (fixed-shape search, a walk of fixed length, one read per pass) emits the
    sequential tokens and the same passes as the CPU path."""
    params = SamplingParams(temperature=temperature, top_p=top_p, repetition_penalty=penalty, seed=3)
    expected = run_sequential(tiny_target, params, 24)
    cpu, cpu_steps, _ = run_specexec(tiny_target, tiny_draft, params, TreeSettings(48, 8, 8), 24)
    with gpu_semantics():
        gpu, gpu_steps, state = run_specexec(tiny_target, tiny_draft, params, TreeSettings(48, 8, 8), 24)
    assert gpu == cpu == expected
    assert [s.token_ids for s in gpu_steps] == [s.token_ids for s in cpu_steps]
    assert all(
        s.stats.tree_size == c.stats.tree_size and s.stats.tree_depth == c.stats.tree_depth
        for s, c in zip(gpu_steps, cpu_steps)
    )
    assert state.target_cache.length == len(state.tokens) - 1


@pytest.mark.parametrize("draft_seconds", [0.001, 0.2])
def test_adaptive_depth_keeps_the_tokens_and_drafts_less_when_drafting_is_dear(tiny_target, tiny_draft, draft_seconds):
    params = SamplingParams(temperature=0.7, seed=1)
    tree = TreeSettings(64, 16, 16)
    expected = run_sequential(tiny_target, params, 40)
    policy = DepthPolicy(cost_model(draft_seconds))
    fixed, fixed_steps, _ = run_specexec(tiny_target, tiny_draft, params, tree, 40)
    for _ in range(3):  # it learns from every pass, across answers
        adaptive, steps, _ = run_specexec(tiny_target, tiny_draft, params, tree, 40, depth=policy)
        assert adaptive == fixed == expected
    forwards = sum(s.stats.draft_forwards for s in steps) / len(steps)
    fixed_forwards = sum(s.stats.draft_forwards for s in fixed_steps) / len(fixed_steps)
    if draft_seconds > 0.1:  # a draft forward costs a fifth of a pass: few forwards pay
        assert forwards < 0.6 * fixed_forwards
    off, off_steps, _ = run_specexec(
        tiny_target, tiny_draft, params, TreeSettings(64, 16, 16, adaptive_depth=False), 40, depth=policy
    )
    assert off == expected and [s.stats.draft_forwards for s in off_steps] == [
        s.stats.draft_forwards for s in fixed_steps
    ]


def test_float32_specexec_equals_sequential():
    target = sharpen(make_tiny_llama(20, dtype=torch.float32), 8.0)
    draft = noisy_copy(target, seed=2)
    for params in (SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, top_p=0.9, seed=9)):
        expected = run_sequential(target, params, 30)
        for budget in (8, 64):
            got, _, _ = run_specexec(target, draft, params, TreeSettings(budget, 12, 8), 30)
            assert got == expected


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
        got, _, state = run_specexec(
            tiny_target, tiny_draft, SamplingParams(temperature=0.6), TreeSettings(64, 16, 8), n
        )
        assert len(got) == n and len(state.tokens) == len(PROMPT) + n


def fresh_prefill(model, ids):
    cache = model.new_cache()
    n = len(ids)
    model.forward(torch.tensor(ids), torch.arange(n), additive_mask(causal_visibility(0, n, "cpu"), model.dtype), cache)
    return cache


def test_caches_equal_fresh_prefill_after_many_passes(tiny_target, tiny_draft):
    _, steps, state = run_specexec(
        tiny_target, tiny_draft, SamplingParams(temperature=1.0, seed=2), TreeSettings(48, 8, 8), 80
    )
    assert len(steps) > 5
    for model, cache in ((tiny_target, state.target_cache), (tiny_draft, state.draft_cache)):
        cached = state.tokens[: cache.length]
        assert cache.length >= len(state.tokens) - 3  # at most the unexpanded leaf and the new token pending
        fresh = fresh_prefill(model, cached)
        for layer, ref in zip(cache.layers, fresh.layers):
            assert torch.allclose(layer.keys, ref.keys, atol=1e-10)
            assert torch.allclose(layer.values, ref.values, atol=1e-10)
    assert state.target_cache.length == len(state.tokens) - 1


@pytest.mark.slow  # the GPU's path makes 32 draft forwards a pass
@pytest.mark.parametrize(
    "budget,depth,expand,shadow,temperature,top_p",
    [(1, 1, 1, 2, 0.8, 0.9), (3, 2, 1, 0, 0.0, 1.0), (16, 4, 4, 3, 0.8, 0.9), (64, 8, 16, 4, 1.0, 1.0)],
)
def test_overlap_equals_sequential(tiny_target, tiny_draft, temperature, top_p, budget, depth, expand, shadow):
    """With the shadow search and the kept subtrees (issue 39) the tokens are the target's samples: the same
    as sequential decoding for the same seed, at every budget, on the CPU's path and on the GPU's, which also
    make the same passes."""
    params = SamplingParams(temperature=temperature, top_p=top_p, seed=5)
    expected = run_sequential(tiny_target, params, 20)
    tree = TreeSettings(budget, depth, expand, overlap=True, shadow_forwards=shadow)
    cpu, cpu_steps, state = run_specexec(tiny_target, tiny_draft, params, tree, 20)
    assert cpu == expected
    assert all(s.stats.tree_size <= budget and s.stats.tree_depth <= depth for s in cpu_steps)
    assert state.target_cache.length == len(state.tokens) - 1 and state.draft_cache.length <= len(state.tokens) - 1
    with gpu_semantics():
        gpu, gpu_steps, _ = run_specexec(tiny_target, tiny_draft, params, tree, 20)
    assert gpu == expected
    assert [(s.token_ids, s.stats.tree_size, s.stats.kept_nodes) for s in gpu_steps] == [
        (s.token_ids, s.stats.tree_size, s.stats.kept_nodes) for s in cpu_steps
    ]


@pytest.mark.slow
def test_float32_overlap_equals_sequential_and_keeps_subtrees():
    """float32, a sharp pair (each node's best child near-certain, so the shadow reaches under the emitted
    token): every budget gives the sequential tokens; passes start from kept expanded nodes."""
    target = sharpen(make_tiny_llama(20, dtype=torch.float32), 40.0)
    draft = noisy_copy(target, seed=2, scale=0.2)
    kept = passes = 0
    for params, budget in (
        (SamplingParams(temperature=0.0), 8),
        (SamplingParams(temperature=0.8, top_p=0.9, seed=9), 64),
    ):
        expected = run_sequential(target, params, 30)
        got, steps, state = run_specexec(
            target, draft, params, TreeSettings(budget, 12, 8, overlap=True, shadow_forwards=6), 30
        )
        assert got == expected
        kept, passes = kept + sum(s.stats.kept_nodes > 0 for s in steps), passes + len(steps)
        assert all(s.stats.shadow_forwards <= 6 for s in steps)
    assert kept > 0


def test_a_pass_s_first_draft_forward_re_scores_the_kept_nodes_and_no_more_on_the_gpu_path(monkeypatch):
    """On the GPU's path (nothing read but the pass's one read), a pass's first draft forward holds the tokens
    the draft cache lacks and the nodes kept for it, no padding: before, a GPU's seed took the budget's rows
    whatever was kept, and through a 4-bit kernel that forward cost several search forwards every pass."""
    target = sharpen(make_tiny_llama(20), 40.0)
    draft = noisy_copy(target, seed=2, scale=0.2)
    rows: list[int] = []
    forward = draft.forward

    def counted(tokens, *args, **kwargs):
        rows.append(int(tokens.shape[0]))
        return forward(tokens, *args, **kwargs)

    monkeypatch.setattr(draft, "forward", counted)
    tree = TreeSettings(32, 8, 8, overlap=True, shadow_forwards=8)
    with gpu_semantics():
        _, steps, _ = run_specexec(target, draft, SamplingParams(temperature=0.0), tree, 30)
    firsts, at = [], 0
    for step in steps:
        firsts.append(rows[at])
        at += step.stats.draft_forwards + step.stats.shadow_forwards
    assert at == len(rows)
    for before, step, first in zip(steps, steps[1:], firsts[1:]):
        assert first <= len(before.token_ids) + step.stats.kept_nodes
    assert any(s.stats.kept_nodes for s in steps) and any(not s.stats.kept_nodes for s in steps[1:])


def test_overlap_keeps_the_draft_cache_exact():
    """After passes that started from kept expanded nodes (their rows moved, then re-scored by the catch-up
    forward), the draft cache's committed rows are what a fresh prefill computes."""
    target = sharpen(make_tiny_llama(20), 40.0)
    draft = noisy_copy(target, seed=2, scale=0.2)
    _, steps, state = run_specexec(
        target, draft, SamplingParams(temperature=0.0), TreeSettings(8, 8, 8, overlap=True, shadow_forwards=32), 30
    )
    assert any(s.stats.kept_nodes for s in steps)
    cache = state.draft_cache
    fresh = fresh_prefill(draft, state.tokens[: cache.length])
    for layer, ref in zip(cache.layers, fresh.layers):
        assert torch.allclose(layer.keys, ref.keys, atol=1e-10) and torch.allclose(layer.values, ref.values, atol=1e-10)
