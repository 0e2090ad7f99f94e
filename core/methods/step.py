"""What a decoding method yields per target pass."""

from __future__ import annotations

from dataclasses import dataclass


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

