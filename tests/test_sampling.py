"""Sampling processors against hand-computed four-element cases, and the position-keyed draw."""

import math

import pytest
import torch

from core.errors import InvalidSettingError
from core.sampling import (
    SamplingParams, apply_repetition_penalty, apply_top_k, apply_top_p, draft_logprobs, draft_top_k, gumbel_noise,
    process_logits, sample_token,
)

INF = -math.inf


def logits_of(probs):
    return torch.log(torch.tensor(probs, dtype=torch.float64))


def test_top_p_keeps_smallest_nucleus_reaching_p():
    # probs 0.5, 0.3, 0.15, 0.05: mass before each = 0, 0.5, 0.8, 0.95
    logits = logits_of([0.3, 0.5, 0.05, 0.15])
    kept = torch.isfinite(apply_top_p(logits, 0.79))
    assert kept.tolist() == [True, True, False, False]  # 0.5 + 0.3 reaches 0.79: the 0.3 token crosses p
    kept = torch.isfinite(apply_top_p(logits, 0.81))
    assert kept.tolist() == [True, True, False, True]
    kept = torch.isfinite(apply_top_p(logits, 0.4))
    assert kept.tolist() == [False, True, False, False]  # the top token always survives


def test_top_p_renormalised_distribution():
    logits = logits_of([0.3, 0.5, 0.05, 0.15])
    probs = torch.softmax(apply_top_p(logits, 0.9), -1)
    expected = torch.tensor([0.3, 0.5, 0.0, 0.15], dtype=torch.float64) / 0.95
    assert torch.allclose(probs, expected)


def test_top_p_batched_rows_independent():
    logits = torch.stack([logits_of([0.7, 0.2, 0.05, 0.05]), logits_of([0.25, 0.25, 0.25, 0.25])])
    kept = torch.isfinite(apply_top_p(logits, 0.85))
    assert kept.tolist() == [[True, True, False, False], [True, True, True, True]]


def test_top_k_keeps_ties():
    logits = torch.tensor([1.0, 3.0, 2.0, 2.0])
    assert torch.isfinite(apply_top_k(logits, 2)).tolist() == [False, True, True, True]
    assert torch.isfinite(apply_top_k(logits, 1)).tolist() == [False, True, False, False]
    assert torch.equal(apply_top_k(logits, 0), logits)


def test_repetition_penalty_transformers_semantics():
    logits = torch.tensor([2.0, -1.0, 0.5, 4.0])
    out = apply_repetition_penalty(logits, torch.tensor([0, 1, 1]), 2.0)
    assert out.tolist() == [1.0, -2.0, 0.5, 4.0]


def test_temperature_scales_log_probs():
    logits = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    scores = process_logits(logits, SamplingParams(temperature=0.5))
    assert torch.allclose(torch.softmax(scores, -1), torch.softmax(logits * 2, -1))


def test_greedy_is_argmax_after_penalty():
    logits = torch.tensor([1.0, 5.0, 4.0, 0.0])
    params = SamplingParams(temperature=0.0)
    assert sample_token(logits, params, position=3) == 1
    # token 1 penalised: 5 / 2 = 2.5 < 4
    assert sample_token(logits, SamplingParams(temperature=0.0, repetition_penalty=2.0), 3, torch.tensor([1])) == 2


def test_draw_depends_only_on_seed_and_position():
    a = gumbel_noise(7, 11, 32, "cpu", torch.float64)
    assert torch.equal(a, gumbel_noise(7, 11, 32, "cpu", torch.float64))
    assert not torch.equal(a, gumbel_noise(7, 12, 32, "cpu", torch.float64))
    assert not torch.equal(a, gumbel_noise(8, 11, 32, "cpu", torch.float64))


def test_gumbel_sampling_matches_distribution():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    params = SamplingParams(temperature=1.0, seed=3)
    counts = torch.zeros(4)
    n = 4000
    for position in range(n):
        counts[sample_token(torch.log(probs), params, position)] += 1
    # standard error of each frequency <= sqrt(0.25 / 4000) = 0.008; allow 4 sigma
    assert torch.allclose(counts / n, probs.float(), atol=0.032)


def test_top_p_sampling_never_leaves_nucleus():
    logits = logits_of([0.6, 0.3, 0.06, 0.04])
    params = SamplingParams(temperature=1.0, top_p=0.85, seed=1)
    assert {sample_token(logits, params, t) for t in range(300)} == {0, 1}


def test_draft_logprobs_truncation_renormalises():
    logits = logits_of([0.6, 0.3, 0.06, 0.04])
    lp = draft_logprobs(logits, 1.0, 0.85)
    assert torch.allclose(lp.exp(), torch.tensor([2 / 3, 1 / 3, 0, 0], dtype=torch.float64))


@pytest.mark.parametrize("kwargs", [dict(temperature=-1), dict(top_p=0), dict(top_p=1.5), dict(top_k=-1), dict(repetition_penalty=0)])
def test_bad_settings_raise(kwargs):
    with pytest.raises(InvalidSettingError):
        SamplingParams(**kwargs)


@pytest.mark.parametrize("top_p", [None, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("k", [1, 7, 600])
def test_draft_top_k_equals_top_k_of_full_draft_logprobs(top_p, k):
    """The fast path (nucleus found inside a top-512 probe) and its exact fallback (flat rows whose nucleus
    is wider than the probe) both equal topk over the fully sorted, truncated distribution."""
    generator = torch.Generator().manual_seed(0)
    peaked = torch.randn(3, 2000, generator=generator, dtype=torch.float64) * 6
    flat = torch.randn(2, 2000, generator=generator, dtype=torch.float64) * 0.1
    logits = torch.cat([peaked, flat])
    vals, ids = draft_top_k(logits, 0.7, top_p, k)
    ref_vals, ref_ids = torch.topk(draft_logprobs(logits, 0.7, top_p), k, dim=-1)
    finite = torch.isfinite(ref_vals)
    assert torch.equal(torch.isfinite(vals), finite)
    assert torch.allclose(vals[finite], ref_vals[finite], atol=1e-12)
    assert torch.equal(ids[finite], ref_ids[finite])
