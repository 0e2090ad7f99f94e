"""Plain autoregressive decoding with a KV cache: the baseline every other method must match."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from core.causal_lm import CausalLM
from core.decode_state import DecodeState
from core.methods.step import PassStats, Step
from core.sampling import SamplingParams, sample_token
from core.timing import synchronize
from core.tree_mask import additive_mask, causal_visibility


def sequential_steps(
    state: DecodeState, target: CausalLM, params: SamplingParams, max_new_tokens: int
) -> Iterator[Step]:
    for _ in range(max_new_tokens):
        started = time.perf_counter()
        cache = state.target_cache
        pending = state.prefill_pending(target, cache)
        positions = torch.arange(cache.length, cache.length + pending.shape[0])
        visible = causal_visibility(cache.length, pending.shape[0], target.device)
        logits = target.forward(pending, positions, additive_mask(visible, target.dtype), cache, logit_rows=slice(-1, None))
        token = sample_token(logits[0], params, len(state.tokens), torch.tensor(state.tokens, dtype=torch.long))
        synchronize(target.device)
        state.tokens.append(token)
        yield Step(
            token_ids=[token],
            stats=PassStats(
                tokens=1, tree_size=0, tree_depth=0, draft_seconds=0.0, draft_forward_seconds=0.0,
                target_seconds=time.perf_counter() - started, draft_forwards=0,
            ),
        )
