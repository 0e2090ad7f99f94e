"""What a decoding method yields per target pass, and what a request asks of it beyond sampling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.decoding.constraints import GrammarConstraint


@dataclass(frozen=True)
class PassStats:
    """tokens: emitted this pass; tree_size: draft tokens scored by the target (root excluded);
    tree_depth: deepest draft node; draft_seconds: whole draft search; draft_forward_seconds: its forwards
    alone (the rest is search overhead); target_seconds: the target forward and verification;
    draft_forwards: the search's forwards, on the critical path; shadow_forwards: the shadow search's, made
    while the target's pass ran (core.decoding.methods.specexec, overlap on); kept_nodes: expanded nodes
    kept from the last pass under the emitted token that this pass's search started from (0: from its root
    alone)."""

    tokens: int
    tree_size: int
    tree_depth: int
    draft_seconds: float
    draft_forward_seconds: float
    target_seconds: float
    draft_forwards: int
    shadow_forwards: int = 0
    kept_nodes: int = 0


# What an impossible token's log-probability (-inf: masked by the grammar or cut by top-k/top-p) is reported
# as outside the engine: JSON has no infinity, and OpenAI's API uses this value.
REPORTED_MIN_LOGPROB = -9999.0


def reported_logprob(value: float) -> float:
    """A log-probability as JSON can carry it (see REPORTED_MIN_LOGPROB)."""
    return max(value, REPORTED_MIN_LOGPROB)


@dataclass(frozen=True)
class TokenLogprob:
    """An emitted token's log-probability under the distribution it was sampled from, and the `top` most
    likely tokens of that distribution as (token id, log-probability), best first."""

    logprob: float
    top: tuple[tuple[int, float], ...]


@dataclass
class OutputControls:
    """What a request asks of the decoding loop besides sampling: a grammar the answer must match
    (core.decoding.constraints; its state advances as tokens are emitted), and log-probabilities with `top_logprobs`
    alternatives per emitted token (None: none). mask_draft False leaves the draft's proposals unmasked (the
    target is masked all the same; `bench acceptance --grammar-target-only` measures what the draft's mask
    is worth)."""

    grammar: GrammarConstraint | None = None
    top_logprobs: int | None = None
    mask_draft: bool = True

    @property
    def active(self) -> bool:
        return self.grammar is not None or self.top_logprobs is not None


@dataclass(frozen=True)
class Step:
    """token_ids: emitted this pass; logprobs: one per emitted token when asked for (OutputControls)."""

    token_ids: list[int]
    stats: PassStats
    logprobs: list[TokenLogprob] | None = None
