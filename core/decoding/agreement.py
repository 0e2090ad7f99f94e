"""Same seed, same tokens: SpecExec against plain sequential decoding of the same request, and where two token
sequences part (the agreement benchmark, the doctor's agreement check, the GPU check's streamed run)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from core.decoding.generation import generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where the two sequences differ (a length mismatch counts), or None."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class Agreement:
    prompt: int
    seed: int
    tokens: int
    specexec_first_difference: int | None  # index of the first differing token, None when identical
    reference_first_difference: int | None  # sequential in --dtype vs sequential in --reference-dtype

    @property
    def tokens_compared(self) -> int:
        """Tokens sampled by both runs from the same context: all of them, or up to and including the first
        that differs (after it the two texts go their own ways, so later tokens say nothing about flips)."""
        if self.specexec_first_difference is None:
            return self.tokens
        return self.specexec_first_difference + 1


def compare_runs(
    target,
    draft,
    prompts: list[list[int]],
    seeds: int,
    params: Callable[[int], SamplingParams],
    tree: TreeSettings,
    max_new_tokens: int,
    reference=None,
) -> list[Agreement]:
    """For every prompt (token ids) and seed 0..seeds-1: plain sequential decoding and SpecExec with the
    same seed (`params(seed)`), and sequential decoding of `reference` (the same model in another dtype; a
    LoadedModel or None); target, draft: LoadedModel."""
    spec = DecodingSettings(method="specexec", tree=tree, max_new_tokens=max_new_tokens)
    seq = dataclasses.replace(spec, method="sequential")
    rows = []
    for index, prompt in enumerate(prompts):
        for seed in range(seeds):
            plain = generate(target.lm, None, target.tokenizer, prompt, params(seed), seq).token_ids
            tree_run = generate(target.lm, draft.lm, target.tokenizer, prompt, params(seed), spec).token_ids
            ref = None
            if reference is not None:
                ref = generate(reference.lm, None, reference.tokenizer, prompt, params(seed), seq).token_ids
            rows.append(
                Agreement(
                    index,
                    seed,
                    len(plain),
                    first_difference(tree_run, plain),
                    first_difference(plain, ref) if ref is not None else None,
                )
            )
    return rows


def flip_summary(rows: list[Agreement]) -> dict[str, float | int]:
    """runs, specexec_differs, tokens, tokens_compared and flips_per_10k_tokens of a comparison."""
    flips = sum(r.specexec_first_difference is not None for r in rows)
    compared = sum(r.tokens_compared for r in rows)
    return {
        "runs": len(rows),
        "specexec_differs": flips,
        "tokens": sum(r.tokens for r in rows),
        "tokens_compared": compared,
        "flips_per_10k_tokens": 10_000 * flips / max(compared, 1),
    }
