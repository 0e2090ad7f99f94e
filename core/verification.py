"""Verification: walk the draft tree with tokens sampled from the target's own distributions.

Starting at the root, sample the next token at the current node with the draw keyed by its absolute
position; if a child of the node carries that token, descend and repeat; otherwise the sampled token is
appended and the walk stops. Every emitted token is a plain sample from the target, so the output is
exactly what sequential sampling with the same seed gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.causal_lm import RowLogits
from core.sampling import SamplingParams, sample_token


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


def verify_tree(
    tokens: torch.Tensor,
    parents: torch.Tensor,
    target_logits: torch.Tensor | RowLogits,
    params: SamplingParams,
    root_position: int,
    context_ids: torch.Tensor,
    max_tokens: int,
) -> Verdict:
    """Pure function of (tree, target logits, sampler) -> accepted path.

    tokens, parents: long [N] (root at 0); target_logits: [N, V] or RowLogits (row i = distribution after
    node i; only the rows of the visited nodes are read);
    root_position: absolute position of the root token; context_ids: long [T], every token up to and
    including the root (for the repetition penalty); max_tokens: stop once this many tokens are emitted.
    """
    tokens = tokens.to(target_logits.device)
    parents = parents.to(target_logits.device)
    node, depth = 0, 0
    path, accepted = [0], []
    context = context_ids.to(target_logits.device)
    while True:
        token = sample_token(target_logits[node], params, root_position + depth + 1, context)
        if len(accepted) + 1 >= max_tokens:
            return Verdict(path, accepted, token)
        match = torch.nonzero((parents == node) & (tokens == token))
        if match.shape[0] == 0:  # host sync: one per emitted token, the walk is sequential by nature
            return Verdict(path, accepted, token)
        node = int(match[0, 0])
        depth += 1
        path.append(node)
        accepted.append(token)
        context = torch.cat([context, context.new_tensor([token])])
