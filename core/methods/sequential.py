"""Plain autoregressive decoding with a KV cache: the baseline every other method must match."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from core.causal_lm import CausalLM
from core.decode_state import DecodeState
from core.methods.step import PassStats, Step
from core.sampling import SamplingParams, sample_token
from core.tree_mask import additive_mask, causal_visibility


def sequential_steps(
    state: DecodeState, target: CausalLM, params: SamplingParams, max_new_tokens: int
) -> Iterator[Step]:
    """One token per step; reading it is the step's one host sync (the next step needs it as input)."""
    device = target.device
    for _ in range(max_new_tokens):
        started = time.perf_counter()
        cache = state.target_cache
        pending = state.prefill_pending(target, cache)
        positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
        visible = causal_visibility(cache.length, pending.shape[0], device)
        logits = target.forward(pending, positions, additive_mask(visible, target.dtype), cache, logit_rows=slice(-1, None))
        token = sample_token(logits[0], params, len(state.tokens), state.tokens)  # the step's one host read
        state.tokens.append(token)
        yield Step(
            token_ids=[token],
            stats=PassStats(
                tokens=1, tree_size=0, tree_depth=0, draft_seconds=0.0, draft_forward_seconds=0.0,
                target_seconds=time.perf_counter() - started, draft_forwards=0,
            ),
        )
