"""SpecExec: a deterministic best-first draft tree, verified by sampling from the target itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from core.causal_lm import CausalLM
from core.decode_state import DecodeState
from core.draft_search import SearchConfig, build_draft_tree
from core.errors import InvalidSettingError
from core.methods.step import Step, tree_step
from core.methods.tree_forward import target_pass
from core.sampling import SamplingParams
from core.verification import verify_tree


@dataclass(frozen=True)
class TreeSettings:
    """budget K: draft tokens per target pass; max_depth D; expand B: nodes per draft forward;
    draft_top_p: truncate the draft to the target's nucleus (measured in docs/benchmarks.md)."""

    budget: int = 128
    max_depth: int = 32
    expand: int = 32
    draft_top_p: bool = False

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise InvalidSettingError(f"budget must be at least 1 draft token, got {self.budget}")
        if self.max_depth < 1:
            raise InvalidSettingError(f"max depth must be at least 1, got {self.max_depth}")
        if self.expand < 1:
            raise InvalidSettingError(f"expand (nodes per draft forward) must be at least 1, got {self.expand}")


def draft_temperature(params: SamplingParams) -> float:
    """Draft logits use the target's temperature; greedy targets rank the tree at temperature 1."""
    return params.temperature if params.temperature > 0 else 1.0


def specexec_steps(
    state: DecodeState,
    target: CausalLM,
    draft: CausalLM,
    params: SamplingParams,
    tree: TreeSettings,
    max_new_tokens: int,
) -> Iterator[Step]:
    emitted = 0
    while emitted < max_new_tokens:
        remaining = max_new_tokens - emitted
        search = SearchConfig(
            budget=tree.budget,
            max_depth=min(tree.max_depth, remaining - 1),
            expand=tree.expand,
            temperature=draft_temperature(params),
            top_p=params.top_p if tree.draft_top_p and not params.greedy else None,
        )
        started = time.perf_counter()
        draft_tree = build_draft_tree(draft, state.draft_cache, state.prefill_pending(draft, state.draft_cache), search)
        drafted = time.perf_counter()

        verdict = target_pass(
            state, target, draft_tree.tokens, draft_tree.parents, draft_tree.depths, draft_tree.cache_rows,
            lambda logits, root_position, context: verify_tree(
                draft_tree.tokens, draft_tree.parents, logits, params, root_position, context, remaining
            ),
        )
        finished = time.perf_counter()

        emitted += len(verdict.emitted)
        yield tree_step(
            verdict.emitted, draft_tree.depths, started, drafted, finished,
            draft_tree.forward_seconds, draft_tree.draft_forwards,
        )
