"""Plain autoregressive decoding with a KV cache: the baseline every other method must match."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from core.decoding.captured_forward import run_step_forward, windowed_step
from core.decoding.decode_state import DecodeState
from core.modeling.causal_lm import CausalLM
from core.decoding.device_io import to_device
from core.decoding.methods.step import OutputControls, PassStats, Step, TokenLogprob
from core.decoding.sampling import sample_token, token_logprobs
from core.decoding.settings import SamplingParams
from core.modeling.tree_mask import additive_mask, causal_visibility


def sequential_steps(
    state: DecodeState,
    target: CausalLM,
    params: SamplingParams,
    max_new_tokens: int,
    controls: OutputControls | None = None,
) -> Iterator[Step]:
    """One token per step; reading it is the step's one host sync (the next step needs it as input).
    `controls`: a grammar masks each step's distribution, and log-probabilities come from the same one
    (with log-probabilities, their read is a second sync). A target that streams no layer takes its one-token
    steps windowed (core.decoding.captured_forward.run_step_forward: the same logits, a shape a CUDA graph
    replays on CUDA); the prompt's forward, and every step of a streaming target, run as they are."""
    device = target.device
    step = windowed_step(target)
    controls = controls or OutputControls()
    for _ in range(max_new_tokens):
        started = time.perf_counter()
        cache = state.target_cache
        pending = state.prefill_pending(target, cache)
        if pending.shape[0] == 1 and step:  # logits: [1, V]
            logits = run_step_forward(target, cache, pending)
        else:
            positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
            visible = causal_visibility(cache.length, pending.shape[0], device)
            logits = target.forward(
                pending, positions, additive_mask(visible, target.dtype), cache, logit_rows=slice(-1, None)
            )
        allowed = None if controls.grammar is None else controls.grammar.allowed(device)
        counts = state.answer_counts(logits.shape[-1], device) if params.occurrence_penalties else None
        token = sample_token(
            logits[0], params, len(state.tokens), state.tokens, allowed, counts
        )  # the step's one host read
        logprobs = None
        if controls.top_logprobs is not None:
            logprobs = [
                _read_logprob(
                    *token_logprobs(
                        logits[:1],
                        to_device([token], device),
                        controls.top_logprobs,
                        None if allowed is None else allowed[None],
                    )
                )
            ]
        state.tokens.append(token)
        if controls.grammar is not None:
            controls.grammar.advance([token])
        yield Step(
            token_ids=[token],
            stats=PassStats(
                tokens=1,
                tree_size=0,
                tree_depth=0,
                draft_seconds=0.0,
                draft_forward_seconds=0.0,
                target_seconds=time.perf_counter() - started,
                draft_forwards=0,
            ),
            logprobs=logprobs,
        )


def _read_logprob(chosen: torch.Tensor, values: torch.Tensor, ids: torch.Tensor) -> TokenLogprob:
    """One row of token_logprobs, read to the host (a host sync, only when log-probabilities are asked for)."""
    return TokenLogprob(float(chosen[0]), tuple(zip(ids[0].tolist(), values[0].tolist())))
