"""Verification: walk the draft tree with tokens sampled from the target's own distributions, on the device.

Starting at the root, sample the next token at the current node with the draw keyed by its absolute
position; if a child of the node carries that token, descend and repeat; otherwise the sampled token is
appended and the walk stops. Every emitted token is a plain sample from the target, so the output is
exactly what sequential sampling with the same seed gives.

The walk runs on the device without reading anything back: a fixed number of steps (the tree's depth bound
plus one), each step sampling one row of the target's logits and finding the matching child with tensor
ops; once the walk has stopped, later steps change nothing. The caller reads the result once per pass
(`Walk` -> `read_verdict`). Only the rows the walk visits go through the LM head (`RowLogits`), so the cost
is (depth + 1) rows, not the whole tree. On a CPU, where reads are free, the walk stops at its last step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.modeling.causal_lm import RowLogits
from core.decoding.device_io import host_reads_are_free
from core.decoding.sampling import checked_token_ids, position_noise, sample_rows, token_logprobs
from core.decoding.settings import SamplingParams


@dataclass(frozen=True)
class Verdict:
    """path: tree node indices from the root to the last accepted node (root included);
    new_token: the token sampled after the path (not a tree node); emitted = path tokens [1:] + new_token."""

    path: list[int]
    accepted_tokens: list[int]
    new_token: int

    @property
    def emitted(self) -> list[int]:
        return self.accepted_tokens + [self.new_token]


@dataclass(frozen=True)
class Walk:
    """A walk on the device, not read yet. path: long [S], the node reached at each depth (0 = the root;
    -1 once the walk has stopped); tokens: long [S], the token sampled at each depth. With log-probabilities
    asked for: logprobs float64 [S] of those tokens, top_values float64 [S, k] and top_ids long [S, k]."""

    path: torch.Tensor
    tokens: torch.Tensor
    logprobs: torch.Tensor | None = None
    top_values: torch.Tensor | None = None
    top_ids: torch.Tensor | None = None


def walk_tree(
    tokens: torch.Tensor,
    parents: torch.Tensor,
    valid: torch.Tensor,
    target_logits: RowLogits,
    params: SamplingParams,
    root_position: int,
    penalized: torch.Tensor | None,
    steps: int,
    allowed: torch.Tensor | None = None,
    top_logprobs: int | None = None,
    counts: torch.Tensor | None = None,
) -> Walk:
    """Pure function of (tree, target logits, sampler) -> the walk, all on the device.

    tokens, parents: long [N] (root at 0); valid: bool [N] (padding nodes never match); target_logits: row i
    = the distribution after node i; root_position: absolute position of the root token; penalized: bool [V],
    the tokens up to and including the root (`context_mask`, for the repetition penalty; None when it is
    off); steps: nodes to sample at most (the depth bound + 1; at most the tokens left to emit);
    allowed: bool [N, V], row i the grammar's mask after node i (core.decoding.constraints; None: no grammar);
    top_logprobs: also compute each sampled token's log-probability and this many alternatives (None: not);
    counts: [V], how often each token occurs in the answer up to the root, for the presence and frequency
    penalties (`DecodeState.answer_counts`; None when they are off).
    """
    device = target_logits.device
    noise = None
    if not params.greedy:  # every step's draw noise in one batch: [S, draw_slots(V)]
        noise = position_noise(params.seed, root_position + 1, steps, target_logits.vocab_size, device)
    node = torch.zeros(1, dtype=torch.long, device=device)
    alive = torch.ones(1, dtype=torch.bool, device=device)
    path = torch.full((steps,), -1, dtype=torch.long, device=device)
    path[0] = 0
    sampled = torch.zeros(steps, dtype=torch.long, device=device)
    want = top_logprobs is not None
    logprobs = torch.zeros(steps, dtype=torch.float64, device=device) if want else None
    top_values = torch.zeros((steps, top_logprobs), dtype=torch.float64, device=device) if want else None
    top_ids = torch.zeros((steps, top_logprobs), dtype=torch.long, device=device) if want else None
    read_free = host_reads_are_free(device)
    for depth in range(steps):
        draw = None if noise is None else noise[depth : depth + 1]
        rows = target_logits.rows(node)
        mask = None if allowed is None else allowed[node]
        sampled[depth : depth + 1] = sample_rows(rows, params, draw, penalized, mask, counts)  # [1]
        # what indexes below: NON_FINITE_TOKEN (-1, a NaN row's mark, read_verdict raises on it) as token 0
        token = sampled[depth : depth + 1].clamp_min(0)
        if want:
            chosen, values, ids = token_logprobs(rows, token, top_logprobs, mask)
            logprobs[depth : depth + 1], top_values[depth : depth + 1], top_ids[depth : depth + 1] = chosen, values, ids
        if depth + 1 == steps:
            break
        match = (parents == node) & (tokens == token) & valid  # [N]: children differ in token, so at most one
        alive = alive & match.any()
        node = torch.where(alive, match.to(torch.uint8).argmax(), node)
        path[depth + 1 : depth + 2] = torch.where(alive, node, -1)
        if penalized is not None:  # an accepted token joins the context of the next step
            penalized = penalized.index_put((token,), penalized[token] | alive)
        if counts is not None:  # and the answer's counts
            counts = counts.index_put((token,), counts[token] + alive.to(counts.dtype))
        if read_free and not bool(alive):  # a CPU: stop at once (free there; a GPU runs every step)
            break
    return Walk(path, sampled, logprobs, top_values, top_ids)


def read_verdict(path: list[int], tokens: list[int]) -> Verdict:
    """The Verdict of a walk read back to the host (Walk.path and Walk.tokens as lists)."""
    accepted = sum(1 for node in path if node >= 0) - 1
    emitted = checked_token_ids(tokens[: accepted + 1])  # a NaN row's draw is no token: said, never used
    return Verdict(path[: accepted + 1], emitted[:accepted], emitted[accepted])
