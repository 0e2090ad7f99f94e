"""Sampling as pure functions over logits, with random draws keyed by (seed, position).

The order of processors follows transformers' `generate`: repetition penalty, then temperature, top-k and
top-p; OpenAI's presence and frequency penalties come right after the repetition penalty, as in vLLM. Greedy
decoding is temperature 0.

Why position-keyed draws: SpecExec samples every emitted token from the target's own distribution, so if the
randomness used for absolute position t depends only on (seed, t), SpecExec at any budget and plain
sequential sampling emit exactly the same tokens for the same seed.

Why a Gumbel-max draw, in two levels: the tree pass and the one-token pass compute the same logits in a
different order, so they differ by rounding (up to ~1e-4 in float32). A draw by inverse CDF (one uniform
against the cumulative sum in vocabulary order) turns that into a different token whenever the uniform falls
within the cumulative sum's error of any boundary, and in the long tail of a 50k-150k vocabulary the error is
larger than the tokens' own probabilities: a run at temperature 1 flipped about once in a few hundred tokens.
Gumbel-max picks argmax(score + noise) with noise keyed by (seed, position, candidate), so two nearby score
vectors give different tokens only when the two best perturbed scores lie within the scores' difference of
each other: a rate proportional to that difference (docs/benchmarks.md, issue 30, measures both).
To keep the noise small, the vocabulary is split into blocks of DRAW_BLOCK tokens: one Gumbel per block picks
a block by its total (log-sum-exp of its scores), then one Gumbel per slot picks the token inside it. That is
an exact sample (a block with probability equal to its mass, then a token in proportion to its probability
within the block), it needs V / DRAW_BLOCK + DRAW_BLOCK noise values per position instead of V, and each
level flips only at a near-tie, like a one-level Gumbel-max. A vocabulary smaller than DRAW_BLOCK (only tiny
test models have one) is a single block of its own size, so no noise is made for slots no token fills. The
noise of every position of a pass comes from one batched call of the counter-based generator
(core/decoding/keyed_random.py), on the host, and reaches the device in one asynchronous copy
(`position_noise`).
DRAW_BLOCK is part of what a seed means: changing it changes every sampled text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from core.decoding.device_io import host_reads_are_free, to_device
from core.decoding.keyed_random import STREAM_TOKEN, gumbels_at, keyed_uniforms
from core.decoding.settings import SamplingParams
from core.errors import NumericalError

# Tokens per block of the two-level Gumbel-max draw (see the module docstring).
DRAW_BLOCK = 256
# What a draw returns, on the device, for a row of scores that holds a NaN or +infinity: no token is a sample
# of such a row (argmax would pick the NaN). The host raises NumericalError where it reads it
# (`checked_token_ids`), before the id is used as an input anywhere.
NON_FINITE_TOKEN = -1


def _work_dtype(logits: torch.Tensor) -> torch.dtype:
    """Sampling math runs in at least float32; float64 models keep float64 for exact tests."""
    return torch.promote_types(logits.dtype, torch.float32)


def context_mask(context_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """bool [V]: True for every token id in `context_ids` (long [T], on the device the mask is wanted on)."""
    mask = torch.zeros(vocab_size, dtype=torch.bool, device=context_ids.device)
    return mask.index_fill_(0, context_ids.reshape(-1), True)


def apply_penalty_mask(logits: torch.Tensor, penalized: torch.Tensor, penalty: float) -> torch.Tensor:
    """transformers' repetition penalty on the tokens marked in `penalized` (bool, broadcast to `logits`):
    their logits are divided by the penalty when positive and multiplied by it when negative."""
    if penalty == 1.0:
        return logits
    return torch.where(penalized, torch.where(logits < 0, logits * penalty, logits / penalty), logits)


def apply_repetition_penalty(logits: torch.Tensor, context_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """The repetition penalty for the tokens of `context_ids` (long [T]); `logits`: [V] or [N, V]. A token
    repeated in the context is penalised once, as in transformers."""
    if penalty == 1.0 or context_ids.numel() == 0:
        return logits
    return apply_penalty_mask(logits, context_mask(context_ids.to(logits.device), logits.shape[-1]), penalty)


def occurrence_counts(
    token_ids: Sequence[int] | torch.Tensor, vocab_size: int, device: torch.device | str
) -> torch.Tensor:
    """float32 [V]: how often each token id occurs in `token_ids` (the answer so far), made on `device` without
    a host read (index_add, not bincount)."""
    ids = to_device(token_ids, device)
    return torch.zeros(vocab_size, dtype=torch.float32, device=ids.device).index_add_(
        0, ids, torch.ones(ids.shape[0], dtype=torch.float32, device=ids.device)
    )


def apply_occurrence_penalties(
    logits: torch.Tensor, counts: torch.Tensor, presence: float, frequency: float
) -> torch.Tensor:
    """OpenAI's presence and frequency penalties: logit[j] - frequency * c[j] - presence * (c[j] > 0), where
    c[j] (`counts`, [V] or [N, V]) is how often token j occurs in the answer so far (as vLLM counts: generated
    tokens only, not the prompt)."""
    counts = counts.to(logits.dtype)
    return logits - frequency * counts - presence * (counts > 0).to(logits.dtype)


def apply_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits per row (ties with the k-th are kept, as in transformers)."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -math.inf)


def apply_top_p(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most likely tokens whose probability reaches p.

    Sorted descending, a token is kept when the mass strictly before it is below p, so the token that
    crosses p is kept and the most likely token always survives.
    """
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs
    remove_sorted = mass_before >= p
    remove_sorted[..., 0] = False
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, -math.inf)


def process_logits(
    logits: torch.Tensor,
    params: SamplingParams,
    penalized: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Grammar mask, penalties, temperature, top-k, top-p: the scores whose softmax is the sampling distribution.

    penalized: bool [V] or [N, V], the tokens the repetition penalty applies to (None: none).
    allowed: bool [V] or [N, V], the tokens a grammar allows next (core.decoding.constraints; None: all).
    counts: [V] or [N, V], each token's occurrences in the answer so far, for the presence and frequency
    penalties (`occurrence_counts`; None: they are off).
    For greedy params only the mask and the penalties apply (temperature and filters cannot change the argmax).
    """
    scores = logits.to(_work_dtype(logits))
    if allowed is not None:
        scores = scores.masked_fill(~allowed, -math.inf)
    if penalized is not None:
        scores = apply_penalty_mask(scores, penalized, params.repetition_penalty)
    if counts is not None:
        scores = apply_occurrence_penalties(scores, counts, params.presence_penalty, params.frequency_penalty)
    if params.greedy:
        return scores
    scores = scores / params.temperature
    scores = apply_top_k(scores, params.top_k)
    return apply_top_p(scores, params.top_p)


def target_probs(logits: torch.Tensor, params: SamplingParams, context_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The distribution a token is drawn from (one-hot at the argmax for greedy); context_ids: long [T] on
    the logits' device, the tokens the repetition penalty applies to."""
    penalized = context_mask(context_ids, logits.shape[-1]) if context_ids is not None else None
    scores = process_logits(logits, params, penalized)
    if params.greedy:
        return torch.nn.functional.one_hot(scores.argmax(-1), scores.shape[-1]).to(scores.dtype)
    return torch.softmax(scores, dim=-1)


def draw_layout(vocab_size: int) -> tuple[int, int]:
    """How the draw splits a vocabulary of `vocab_size`: (blocks, tokens per block), blocks of DRAW_BLOCK
    tokens, or one block of the whole vocabulary when it is smaller."""
    width = min(vocab_size, DRAW_BLOCK)
    return -(-vocab_size // width), width


def draw_slots(vocab_size: int) -> int:
    """Noise values one draw needs over a vocabulary of `vocab_size`: one per block, then one per slot."""
    return sum(draw_layout(vocab_size))


def gumbel_pick(scores: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """One index per row of scores [N, V] (log-weights; -inf never picked), drawn with the matching row of
    noise [N, draw_slots(V)] (standard Gumbels from `position_noise` / `keyed_gumbels`): the block of indices
    (as draw_layout(V) splits them) with the largest log-sum-exp + block noise, then the index in it with the
    largest score + slot noise. Returns long [N] on the scores' device, without reading it.

    An exact sample from softmax(scores): the first level picks a block with probability equal to its mass,
    the second picks inside it in proportion, and the two levels' noises are independent. Computed in float64
    so that the sum over a block and the comparisons add no rounding of their own to the scores'."""
    rows, vocab = scores.shape
    blocks, width = draw_layout(vocab)
    padded = torch.nn.functional.pad(scores.double(), (0, blocks * width - vocab), value=-math.inf)
    padded = padded.view(rows, blocks, width)
    block = (torch.logsumexp(padded, dim=-1) + noise[:, :blocks]).argmax(-1)  # [N]
    inside = padded.gather(1, block.view(rows, 1, 1).expand(rows, 1, width)).squeeze(1)  # [N, width]
    slot = (inside + noise[:, blocks:]).argmax(-1)
    return block * width + slot


def sample_rows(
    logits: torch.Tensor,
    params: SamplingParams,
    noise: torch.Tensor | None,
    penalized: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample one token per row of logits [N, V] with the keyed noise [N, draw_slots(V)] of each row's
    position (`position_noise`; unused when greedy); penalized, allowed, counts: as in process_logits.
    Returns long [N] on the logits' device, without reading it."""
    scores = process_logits(logits, params, penalized, allowed, counts)
    picked = scores.argmax(-1) if params.greedy else gumbel_pick(scores, noise)
    return _unless_non_finite(picked, logits)


def _unless_non_finite(picked: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """`picked` (long [N]), with NON_FINITE_TOKEN in each row whose `scores` [N, V] hold a NaN or +infinity
    (amax keeps a NaN; a row of nothing but -infinity is as broken). On the device, no read."""
    return torch.where(scores.amax(-1).isfinite(), picked, NON_FINITE_TOKEN)


def checked_token_ids(token_ids: list[int]) -> list[int]:
    """`token_ids` read from a draw, or NumericalError where one is NON_FINITE_TOKEN (`_unless_non_finite`)."""
    if any(token < 0 for token in token_ids):
        raise NumericalError(
            "the model's next-token scores came out as NaN or infinity, so no answer can be sampled from them: its "
            "numbers overflowed (16-bit arithmetic is too narrow for some models) or its weights are damaged. If it "
            "ran in float16, load it in bfloat16 or float32; otherwise download it again"
        )
    return token_ids


def position_noise(
    seed: int, first_position: int, count: int, vocab_size: int, device: torch.device | str, stream: int = STREAM_TOKEN
) -> torch.Tensor:
    """The token draws' noise for absolute positions first_position .. first_position + count - 1:
    float64 [count, draw_slots(vocab_size)] on `device`.

    Made on the host and copied once, asynchronously (core.decoding.device_io.to_device): the noise depends only
    on integers the host knows, and computed on a GPU it cost about 240 small kernels a draw (Philox's rounds in
    int64 ops), more launches than the rest of a one-token step's sampling (issue 37). The uniforms are exact
    integer arithmetic, the same bits anywhere; the logarithms are the host's, so a CPU run draws exactly as
    before and a GPU run as a CPU run does."""
    positions = torch.arange(first_position, first_position + count).reshape(-1, 1)  # host tensors throughout
    slots = torch.arange(draw_slots(vocab_size))  # draw 0 of keyed_gumbels: slot j is index j
    return to_device(gumbels_at(seed, positions, stream, slots), device, torch.float64)


def penalty_mask(
    context_ids: Sequence[int] | torch.Tensor | None,
    params: SamplingParams,
    vocab_size: int,
    device: torch.device | str,
) -> torch.Tensor | None:
    """bool [V] of the tokens the repetition penalty applies to (None when it is off)."""
    if context_ids is None or params.repetition_penalty == 1.0:
        return None
    return context_mask(to_device(context_ids, device), vocab_size)


def sample_token(
    logits: torch.Tensor,
    params: SamplingParams,
    position: int,
    context_ids: Sequence[int] | torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
    counts: torch.Tensor | None = None,
) -> int:
    """Sample the token at absolute `position` from one row of logits [V]; context_ids: the tokens the
    repetition penalty applies to (a list or a long tensor, host or device); allowed: bool [V], a grammar's;
    counts: [V], the answer's token counts for the presence and frequency penalties."""
    device = logits.device
    penalized = penalty_mask(context_ids, params, logits.shape[-1], device)
    noise = None if params.greedy else position_noise(params.seed, position, 1, logits.shape[-1], device)
    token = int(sample_rows(logits[None], params, noise, penalized, allowed, counts)[0])  # host sync: needed
    return checked_token_ids([token])[0]


def token_logprobs(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    top: int,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Log-probabilities of the sampled `tokens` (long [N]) under the model's own distribution (logits [N, V]
    at temperature 1, after a grammar's mask `allowed`, before penalties, temperature, top-k and top-p: what
    vLLM reports by default and llama.cpp's server too), and the `top` most likely tokens of each row:
    (logprob [N], top values [N, top], top ids [N, top]), float64, on the device. The sampling settings change
    which token is drawn, not how likely the model found it."""
    scores = logits.double()
    if allowed is not None:
        scores = scores.masked_fill(~allowed, -math.inf)
    logp = torch.log_softmax(scores, dim=-1)
    chosen = logp.gather(-1, tokens[:, None])[:, 0]
    values, ids = torch.topk(logp, min(top, logp.shape[-1]), dim=-1)
    return chosen, values, ids


def uniform_draw(seed: int, position: int, stream: int, index: int = 0) -> float:
    """One keyed uniform in (0, 1), computed on the host (SpecInfer's acceptance tests)."""
    return float(keyed_uniforms(seed, torch.tensor([position]), stream, index)[0])


def sample_from_probs(probs: torch.Tensor, seed: int, position: int, stream: int) -> int:
    """A keyed sample from an explicit distribution [V] (SpecInfer's residuals), by the same draw as tokens."""
    noise = position_noise(seed, position, 1, probs.shape[-1], probs.device, stream)
    picked = _unless_non_finite(gumbel_pick(probs.double().log()[None], noise), probs[None])
    return checked_token_ids([int(picked[0])])[0]  # host sync: SpecInfer's walk runs on the host


def draft_logprobs(logits: torch.Tensor, temperature: float, top_p: float | None) -> torch.Tensor:
    """Draft log-probabilities used to rank tree nodes: softmax at `temperature`, optionally truncated to the
    top-p nucleus and renormalised (tokens outside it get -inf and never enter the tree)."""
    scores = logits.to(_work_dtype(logits)) / temperature
    if top_p is not None and top_p < 1.0:
        scores = apply_top_p(scores, top_p)
    return torch.log_softmax(scores, dim=-1)


# Width of the first look for the nucleus: wide enough that a real model's top-p nucleus almost always ends
# inside it, small enough that topk over it is far cheaper than sorting the whole vocabulary.
_NUCLEUS_PROBE = 512


def draft_top_k(
    logits: torch.Tensor, temperature: float, top_p: float | None, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best children per row: the top-k of `draft_logprobs` (values [N, k] descending, ids [N, k]),
    without sorting the whole vocabulary.

    With truncation, topk over the best `_NUCLEUS_PROBE` tokens usually contains the whole nucleus; rows
    whose nucleus runs past the probe fall back to the exact full sort. That fallback needs a host read, so
    where reads are not free (a GPU) every row takes the exact full sort instead (one batched kernel).
    """
    k = min(k, logits.shape[-1])
    if top_p is None or top_p >= 1.0 or not host_reads_are_free(logits.device):
        return torch.topk(draft_logprobs(logits, temperature, top_p), k, dim=-1)
    logp = torch.log_softmax(logits.to(_work_dtype(logits)) / temperature, dim=-1)
    probe = min(max(k, _NUCLEUS_PROBE), logp.shape[-1])
    vals, ids = torch.topk(logp, probe, dim=-1)  # sorted descending
    probs = vals.exp()
    mass_before = torch.cumsum(probs, dim=-1) - probs
    inside = mass_before < top_p
    inside[:, 0] = True
    nucleus_mass = (probs * inside).sum(-1, keepdim=True)
    vals = torch.where(inside, vals - nucleus_mass.log(), torch.full_like(vals, -math.inf))[:, :k]
    ids = ids[:, :k]
    incomplete = inside[:, -1]  # the nucleus may continue past the probe: recompute those rows exactly
    if probe < logp.shape[-1] and bool(incomplete.any()):  # host sync: rare fallback
        rows = torch.nonzero(incomplete).squeeze(-1)
        exact_vals, exact_ids = torch.topk(draft_logprobs(logits[rows], temperature, top_p), k, dim=-1)
        vals[rows], ids[rows] = exact_vals, exact_ids
    return vals, ids
