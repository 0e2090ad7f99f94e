"""Sampling processors against hand-computed four-element cases, and the position-keyed draw: the counter-based
generator pinned to published Philox test vectors and to values computed by a plain-Python reference."""

import math

import numpy as np
import pytest
import torch

from core.errors import InvalidSettingError
from core.decoding.device_io import gpu_semantics
from core.decoding.keyed_random import STREAM_TOKEN, keyed_gumbels, keyed_uniforms, philox4x32
from core.decoding.sampling import (
    DRAW_BLOCK,
    apply_repetition_penalty,
    apply_top_k,
    apply_top_p,
    draft_logprobs,
    draft_top_k,
    draw_slots,
    gumbel_pick,
    position_noise,
    process_logits,
    sample_token,
)
from core.decoding.settings import SamplingParams

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


MASK32 = 0xFFFFFFFF


def philox_reference(counter, key, rounds=10):
    """Philox4x32-R in plain Python integers, written from the paper (Salmon et al., SC 2011), independently
    of core/decoding/keyed_random.py (which avoids 64-bit products so that int64 tensors never overflow)."""
    x, (k0, k1) = list(counter), key
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
        p0, p1 = 0xD2511F53 * x[0], 0xCD9E8D57 * x[2]
        x = [((p1 >> 32) ^ x[1] ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ x[3] ^ k1) & MASK32, p0 & MASK32]
    return x


def uniform_reference(seed, position, stream, index):
    """The documented mapping: counter (index, position lo, position hi, stream), key (seed lo, seed hi), 52 bits
    of the first two output words, u = (2m + 1) / 2^53."""
    seed %= 1 << 64
    w = philox_reference((index, position & MASK32, position >> 32, stream), (seed & MASK32, seed >> 32))
    return (2 * ((w[0] << 20) | (w[1] >> 12)) + 1) / 2**53


# Random123's known-answer vectors (kat_vectors): counter, key -> output, Philox4x32-10.
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32, MASK32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]

# The generator's first values, pinned: (seed, position, stream, index) -> u. Every device's implementation
# must give these exact float64 bit patterns (seeds past 2^63 and negative seeds are taken mod 2^64).
PINNED_UNIFORMS = [
    ((0, 0, 0, 0), float.fromhex("0x1.989fa35785a72p-2")),
    ((0, 1, 0, 0), float.fromhex("0x1.ab4317b3a88dap-2")),
    ((0, 2, 0, 0), float.fromhex("0x1.63f9b34c19ffap-2")),
    ((1234, 57, 0, 0), float.fromhex("0x1.69ffd28d70512p-2")),
    ((1234, 57, 1, 3), float.fromhex("0x1.48323da1f6d5bp-1")),
    ((2**63 + 5, 2**40 + 7, 2, 9), float.fromhex("0x1.3ab611392ac14p-3")),
    ((-1, 12, 3, 0), float.fromhex("0x1.5f9a8742b153bp-1")),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KAT)
def test_philox_matches_the_published_test_vectors(counter, key, expected):
    assert tuple(philox_reference(counter, key)) == expected
    words = philox4x32(tuple(torch.tensor([c]) for c in counter), key)  # torch's int64 words (large batches)
    assert tuple(int(w) for w in words) == expected
    words = philox4x32(tuple(np.array([c], dtype=np.uint64) for c in counter), key)  # numpy's (small ones)
    assert tuple(int(w[0]) for w in words) == expected
    assert philox4x32(counter, key) == expected  # Python's ints (the smallest)


@pytest.mark.parametrize("inputs,expected", PINNED_UNIFORMS)
def test_generator_first_values_are_pinned(inputs, expected):
    seed, position, stream, index = inputs
    assert uniform_reference(seed, position, stream, index) == expected
    got = keyed_uniforms(seed, torch.tensor([position]), stream, index)
    assert got.dtype == torch.float64 and got[0].item() == expected  # bit for bit


def test_generator_batches_equal_single_draws_and_stay_inside_the_open_interval():
    positions = torch.arange(1000, 1300)
    batch = keyed_uniforms(77, positions, STREAM_TOKEN)
    assert batch.tolist() == [uniform_reference(77, p, STREAM_TOKEN, 0) for p in range(1000, 1300)]
    assert bool(((batch > 0) & (batch < 1)).all())
    assert len(set(batch.tolist())) == 300
    assert 0.4 < float(batch.mean()) < 0.6  # 300 uniforms: standard error 0.017


def test_small_host_batches_and_large_batches_give_the_same_bits():
    """Batches up to PYTHON_BATCH counters run Philox on Python's integers, up to NUMPY_BATCH on numpy arrays,
    larger ones in torch: one function of the integers every way, so a value does not depend on the size of
    the batch it was drawn in."""
    from core.decoding.keyed_random import NUMPY_BATCH, PYTHON_BATCH

    positions = torch.arange(2**33 - 100, 2**33 - 100 + NUMPY_BATCH + 1)  # past 2^32: the counter's high word
    large = keyed_uniforms(2**63 + 5, positions, STREAM_TOKEN, 7)
    small = torch.cat([keyed_uniforms(2**63 + 5, part, STREAM_TOKEN, 7) for part in positions.split(NUMPY_BATCH)])
    assert large.dtype == small.dtype == torch.float64 and torch.equal(large, small)
    head = positions[: 8 * PYTHON_BATCH]
    tiny = torch.cat([keyed_uniforms(2**63 + 5, part, STREAM_TOKEN, 7) for part in head.split(PYTHON_BATCH)])
    assert tiny.dtype == torch.float64 and torch.equal(tiny, large[: len(head)])
    indices = torch.tensor([[0, 2**32 - 1]])  # the counter's first word at both ends, broadcast against rows
    rows = torch.tensor([[3], [2**40]])
    assert keyed_uniforms(9, rows, 2, indices).tolist() == [
        [uniform_reference(9, r, 2, i) for i in (0, 2**32 - 1)] for r in (3, 2**40)
    ]
    assert large[-1].item() == uniform_reference(2**63 + 5, int(positions[-1]), STREAM_TOKEN, 7)
    grid = keyed_uniforms(3, torch.arange(4).reshape(-1, 1), STREAM_TOKEN, torch.arange(5))  # broadcast, numpy
    assert grid.shape == (4, 5) and grid[2, 3].item() == uniform_reference(3, 2, STREAM_TOKEN, 3)


def test_gumbel_noise_is_the_keyed_uniforms_of_each_slot():
    noise = keyed_gumbels(77, torch.tensor([5, 9]), STREAM_TOKEN, 3, torch.tensor([0, 2]))
    for row, (position, draw) in enumerate([(5, 0), (9, 2)]):
        for slot in range(3):
            u = uniform_reference(77, position, STREAM_TOKEN, draw * 3 + slot)
            assert noise[row, slot].item() == -math.log(-math.log(u))


def test_draw_depends_only_on_seed_and_position():
    vocab = 3 * DRAW_BLOCK + 5
    a = position_noise(7, 11, 4, vocab, "cpu")
    assert a.shape == (4, draw_slots(vocab)) == (4, 4 + DRAW_BLOCK)
    assert torch.equal(a, position_noise(7, 11, 4, vocab, "cpu"))
    assert torch.equal(a[1:], position_noise(7, 12, 3, vocab, "cpu"))  # position 12 is the same draw in any batch
    assert not torch.equal(a, position_noise(8, 11, 4, vocab, "cpu"))


def test_gumbel_pick_never_picks_an_impossible_token_or_the_padding():
    vocab = 2 * DRAW_BLOCK + 3  # the last block is mostly padding
    scores = torch.full((1, vocab), -math.inf, dtype=torch.float64)
    scores[0, [4, DRAW_BLOCK + 7, vocab - 1]] = torch.tensor([0.0, -1.0, 0.5], dtype=torch.float64)
    noise = position_noise(3, 0, 600, vocab, "cpu")
    picks = gumbel_pick(scores.expand(600, -1), noise)
    assert set(picks.tolist()) == {4, DRAW_BLOCK + 7, vocab - 1}


def test_gumbel_pick_is_an_exact_sample_across_blocks():
    # mass in several blocks and inside one block, and a long tail: the frequencies of 40,000 keyed draws
    vocab = 3 * DRAW_BLOCK + 100
    logits = torch.full((vocab,), -6.0, dtype=torch.float64)
    heads = [3, 9, DRAW_BLOCK + 1, 2 * DRAW_BLOCK + 50, vocab - 1]
    logits[heads] = torch.tensor([1.0, 0.5, 1.5, 0.0, -1.0], dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    counts = torch.zeros(vocab, dtype=torch.float64)
    n = 40_000
    for start in range(0, n, 5_000):
        noise = position_noise(11, start, 5_000, vocab, "cpu")
        counts += torch.bincount(gumbel_pick(logits.expand(5_000, -1), noise), minlength=vocab).double()
    freq = counts / n
    for token in heads:  # standard error <= sqrt(0.25 / 40000) = 0.0025: allow 4 sigma
        assert abs(freq[token] - probs[token]) < 0.01, token
    tail = torch.ones(vocab, dtype=torch.bool)
    tail[heads] = False
    assert abs(freq[tail].sum() - probs[tail].sum()) < 0.01


def test_a_vocabulary_smaller_than_a_block_is_one_block_of_its_own_size():
    """No noise for slots no token fills (a block plus one value per token), and still an exact sample:
    20,000 keyed draws over 5 tokens, one of them impossible."""
    vocab = 5
    assert draw_slots(vocab) == 1 + vocab and draw_slots(DRAW_BLOCK) == 1 + DRAW_BLOCK
    logits = torch.tensor([0.5, -math.inf, 1.0, -0.5, 0.0], dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    n = 20_000
    noise = position_noise(5, 0, n, vocab, "cpu")
    assert noise.shape == (n, 1 + vocab)
    freq = torch.bincount(gumbel_pick(logits.expand(n, -1), noise), minlength=vocab).double() / n
    assert freq[1] == 0
    assert (freq - probs).abs().max() < 0.015  # standard error <= sqrt(0.25 / 20000) = 0.0035: about 4 sigma


@pytest.mark.slow  # 4,000 draws over 49k tokens twice: ~10 s
def test_draw_ignores_logit_differences_of_a_few_ulps():
    """Issue 30: the tree pass and the one-token pass give float32 logits a few units in the last place apart.
    On a long-tailed 49k-token distribution (logits ~20 +- 3, as a real model's are) nudged by up to 3 ulps per
    token, the inverse-CDF draw this replaced gave a different token in 13 of these 4,000 positions; a Gumbel-max
    draw flips only where its two best perturbed scores tie to within ~6e-6, about 0.02 expected here."""
    vocab = 49_152
    generator = torch.Generator().manual_seed(1)
    base = (20 + 3 * torch.randn(vocab, generator=generator)).float()
    nudged = base
    steps = torch.randint(-3, 4, (vocab,), generator=generator)
    for ulp in range(3):
        nudged = torch.where(steps > ulp, torch.nextafter(nudged, torch.tensor(math.inf)), nudged)
        nudged = torch.where(steps < -ulp, torch.nextafter(nudged, torch.tensor(-math.inf)), nudged)
    assert 0 < float((nudged - base).abs().max()) < 6e-6
    params = SamplingParams(temperature=1.0, seed=5)
    for start in range(0, 4_000, 500):
        noise = position_noise(params.seed, start, 500, vocab, "cpu")
        picks = gumbel_pick(process_logits(base.expand(500, -1), params), noise)
        assert torch.equal(picks, gumbel_pick(process_logits(nudged.expand(500, -1), params), noise))


def test_keyed_sampling_matches_distribution():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    params = SamplingParams(temperature=1.0, seed=3)
    counts = torch.zeros(4)
    n = 4000
    for position in range(n):
        counts[sample_token(torch.log(probs), params, position)] += 1
    # standard error of each frequency <= sqrt(0.25 / 4000) = 0.008; allow 4 sigma
    assert torch.allclose(counts / n, probs.float(), atol=0.032)


def test_repetition_penalty_in_sampling_uses_context_tokens_once():
    logits = torch.log(torch.tensor([0.25, 0.25, 0.25, 0.25], dtype=torch.float64))
    params = SamplingParams(temperature=1.0, repetition_penalty=4.0, seed=2)
    # token 0 and 1 penalised (log 0.25 < 0: multiplied by 4); repeats in the context change nothing
    picks = [sample_token(logits, params, t, [0, 1, 1, 0]) for t in range(400)]
    assert picks == [sample_token(logits, params, t, torch.tensor([1, 0])) for t in range(400)]
    assert sum(p in (0, 1) for p in picks) < 40  # each penalised token keeps 0.25^4 / (2 * 0.25 + 2 * 0.25^4)


def test_top_p_sampling_never_leaves_nucleus():
    logits = logits_of([0.6, 0.3, 0.06, 0.04])
    params = SamplingParams(temperature=1.0, top_p=0.85, seed=1)
    assert {sample_token(logits, params, t) for t in range(300)} == {0, 1}


def test_draft_logprobs_truncation_renormalises():
    logits = logits_of([0.6, 0.3, 0.06, 0.04])
    lp = draft_logprobs(logits, 1.0, 0.85)
    assert torch.allclose(lp.exp(), torch.tensor([2 / 3, 1 / 3, 0, 0], dtype=torch.float64))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=-1),
        dict(temperature=float("inf")),
        dict(top_p=0),
        dict(top_p=1.5),
        dict(top_p=float("nan")),
        dict(top_k=-1),
        dict(repetition_penalty=0),
        dict(repetition_penalty=float("inf")),
        dict(repetition_penalty=float("nan")),
    ],
)
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
    ref_vals, ref_ids = torch.topk(draft_logprobs(logits, 0.7, top_p), k, dim=-1)
    finite = torch.isfinite(ref_vals)
    with gpu_semantics():  # the path without host reads: the exact sort for every row
        gpu_vals, gpu_ids = draft_top_k(logits, 0.7, top_p, k)
    for vals, ids in (draft_top_k(logits, 0.7, top_p, k), (gpu_vals, gpu_ids)):
        assert torch.equal(torch.isfinite(vals), finite)
        assert torch.allclose(vals[finite], ref_vals[finite], atol=1e-12)
        assert torch.equal(ids[finite], ref_ids[finite])


def test_bench_draws_candidates_are_draws_of_the_same_distribution():
    """The candidates `specexec bench draws` compares (issue 30): each picks only possible tokens, the old
    inverse CDF survives rounding at the top of the sum, and on identical logits none can flip."""
    from core.bench.draws import CANDIDATES, _draw, inverse_cdf

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]] * 4, dtype=torch.float32)
    u = torch.tensor([1e-12, 0.49, 0.51, 1 - 2**-53], dtype=torch.float64)  # the last rounds to 1.0 in float32
    assert inverse_cdf(probs, u).tolist() == [1, 1, 3, 3]
    scores = torch.full((6, 300), -math.inf)
    scores[:, [7, 150, 299]] = torch.tensor([0.0, 0.5, -0.5])
    positions = torch.arange(10, 16)
    for name in CANDIDATES:
        picks = _draw(name, scores, 3, positions)
        assert set(picks.tolist()) <= {7, 150, 299}, name
        assert torch.equal(picks, _draw(name, scores.clone(), 3, positions))
