"""What a decoding method yields per target pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PassStats:
    """tokens: emitted this pass; tree_size: draft tokens scored by the target (root excluded);
    tree_depth: deepest draft node; draft_seconds: whole draft search; draft_forward_seconds: its forwards
    alone (the rest is search overhead); target_seconds: the target forward and verification."""

    tokens: int
    tree_size: int
    tree_depth: int
    draft_seconds: float
    draft_forward_seconds: float
    target_seconds: float
    draft_forwards: int


@dataclass(frozen=True)
class Step:
    token_ids: list[int]
    stats: PassStats


def tree_step(
    emitted: list[int], tree_depths: torch.Tensor, started: float, drafted: float, finished: float,
    draft_forward_seconds: float, draft_forwards: int,
) -> Step:
    """The Step of a draft-tree pass: timestamps from perf_counter at the start, after drafting and at
    the end; tree_depths: long [N] with the root at 0 (not a draft token)."""
    return Step(
        token_ids=emitted,
        stats=PassStats(
            tokens=len(emitted),
            tree_size=tree_depths.shape[0] - 1,
            tree_depth=int(tree_depths.max()),
            draft_seconds=drafted - started,
            draft_forward_seconds=draft_forward_seconds,
            target_seconds=finished - drafted,
            draft_forwards=draft_forwards,
        ),
    )
