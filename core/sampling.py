"""Sampling as pure functions over logits, with a random draw keyed by (seed, position).

The order of processors follows transformers' `generate`: repetition penalty, then temperature, top-k and
top-p. Greedy decoding is temperature 0.

Why position-keyed draws: SpecExec samples every emitted token from the target's own distribution, so if the
randomness used for absolute position t depends only on (seed, t), SpecExec at any budget and plain
sequential sampling emit exactly the same tokens for the same seed. We use Gumbel-max: the token at
position t is argmax(log p + g_t), with g_t Gumbel noise from a generator seeded by hash(seed, t).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch

from core.errors import InvalidSettingError


@dataclass(frozen=True)
class SamplingParams:
    """How to turn target logits into tokens. temperature 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InvalidSettingError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InvalidSettingError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise InvalidSettingError(f"top-k must be >= 0 (0 = off), got {self.top_k}")
        if not self.repetition_penalty > 0:
            raise InvalidSettingError(f"repetition penalty must be > 0 (1 = off), got {self.repetition_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _work_dtype(logits: torch.Tensor) -> torch.dtype:
    """Sampling math runs in at least float32; float64 models keep float64 for exact tests."""
    return torch.promote_types(logits.dtype, torch.float32)


def apply_repetition_penalty(logits: torch.Tensor, context_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """transformers semantics: logits of tokens already in the context are divided by the penalty when
    positive and multiplied by it when negative. `logits`: [V] or [N, V]; `context_ids`: [T] or [N, T]."""
    if penalty == 1.0 or context_ids.numel() == 0:
        return logits
    squeeze = logits.dim() == 1
    scores = logits.unsqueeze(0) if squeeze else logits
    ids = context_ids.to(scores.device).reshape(scores.shape[0], -1)
    picked = torch.gather(scores, 1, ids)
    picked = torch.where(picked < 0, picked * penalty, picked / penalty)
    scores = scores.scatter(1, ids, picked)
    return scores.squeeze(0) if squeeze else scores


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


def process_logits(logits: torch.Tensor, params: SamplingParams, context_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Penalty, temperature, top-k, top-p: the scores whose softmax is the sampling distribution.

    For greedy params only the penalty applies (temperature and filters cannot change the argmax).
    """
    scores = logits.to(_work_dtype(logits))
    if context_ids is not None:
        scores = apply_repetition_penalty(scores, context_ids, params.repetition_penalty)
    if params.greedy:
        return scores
    scores = scores / params.temperature
    scores = apply_top_k(scores, params.top_k)
    return apply_top_p(scores, params.top_p)


def target_probs(logits: torch.Tensor, params: SamplingParams, context_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The distribution a token is drawn from (one-hot at the argmax for greedy)."""
    scores = process_logits(logits, params, context_ids)
    if params.greedy:
        return torch.nn.functional.one_hot(scores.argmax(-1), scores.shape[-1]).to(scores.dtype)
    return torch.softmax(scores, dim=-1)


def draw_key(seed: int, position: int, stream: str = "") -> int:
    """A 63-bit generator seed that depends only on (seed, position, stream)."""
    digest = hashlib.blake2b(f"{seed}:{position}:{stream}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def gumbel_noise(seed: int, position: int, vocab_size: int, device: torch.device | str, dtype: torch.dtype) -> torch.Tensor:
    """Gumbel(0, 1) noise for one absolute position. Drawn on the CPU in float64 so the same seed gives the
    same tokens on every device."""
    generator = torch.Generator().manual_seed(draw_key(seed, position))
    uniform = torch.rand(vocab_size, generator=generator, dtype=torch.float64)
    noise = -torch.log(-torch.log(uniform.clamp_min(1e-300)))
    return noise.to(device=device, dtype=dtype)


def uniform_draw(seed: int, position: int, stream: str) -> float:
    """One uniform number in [0, 1) keyed by (seed, position, stream); used by SpecInfer's acceptance tests."""
    generator = torch.Generator().manual_seed(draw_key(seed, position, stream))
    return float(torch.rand((), generator=generator, dtype=torch.float64))


def sample_token(logits: torch.Tensor, params: SamplingParams, position: int, context_ids: torch.Tensor | None = None) -> int:
    """Sample the token at absolute `position` from one row of logits [V]."""
    scores = process_logits(logits, params, context_ids)
    if not params.greedy:
        scores = scores + gumbel_noise(params.seed, position, scores.shape[-1], scores.device, scores.dtype)
    return int(scores.argmax())  # host sync: the caller needs the token id


def sample_from_probs(probs: torch.Tensor, seed: int, position: int, stream: str) -> int:
    """Inverse-CDF sample from an explicit distribution [V] with a keyed uniform (SpecInfer residuals)."""
    u = uniform_draw(seed, position, stream)
    cdf = torch.cumsum(probs.double(), dim=-1)
    index = int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])], dtype=cdf.dtype, device=cdf.device), right=True))
    return min(index, probs.shape[-1] - 1)


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


def draft_top_k(logits: torch.Tensor, temperature: float, top_p: float | None, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best children per row: the top-k of `draft_logprobs` (values [N, k] descending, ids [N, k]),
    without sorting the whole vocabulary.

    With truncation, topk over the best `_NUCLEUS_PROBE` tokens usually contains the whole nucleus; rows
    whose nucleus runs past the probe fall back to the exact full sort.
    """
    k = min(k, logits.shape[-1])
    if top_p is None or top_p >= 1.0:
        return torch.topk(draft_logprobs(logits, temperature, None), k, dim=-1)
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
