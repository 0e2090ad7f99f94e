"""`specexec bench agreement`: how often "same seed, same tokens" holds in a given dtype.

For every prompt and seed, SpecExec and plain sequential decoding run with the same seed; the row says
whether their tokens are identical and, if not, where they first differ. In float32/float64 they are
identical (the tests check it on float64 models); in 16 bits the tree pass and the one-token pass round
differently, so a near-tie between two tokens can flip. Each emitted token is still an exact sample of the
target's 16-bit distribution; only the identity with the sequential run is lost after the flip. With
`--reference-dtype` the sequential run is also repeated in that dtype (e.g. float32) to show how often
16-bit and 32-bit decoding differ at all.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

from core.cli.options import add_model_arguments, add_overlap_arguments, sampling_params
from core.cli.pair import load_pair
from core.decoding.draft_lane import overlap_wanted
from core.decoding.generation import DecodingSettings, generate
from core.decoding.methods.specexec import TreeSettings
from core.text.prompts import encode_prompt, read_prompt_file
from core.decoding.sampling import SamplingParams
from core.decoding.agreement import first_difference


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompts", required=True, help="JSON Lines prompt file (messages or text)")
    parser.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per prompt")
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--expand", type=int, default=8)
    add_overlap_arguments(parser)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--reference-dtype", default=None, help="also run sequential decoding in this dtype")
    parser.add_argument("--json", action="store_true")


def compare_runs(target, draft, prompts: list[list[int]], seeds: int, params: Callable[[int], SamplingParams],
                 tree: TreeSettings, max_new_tokens: int, reference=None) -> list[Agreement]:
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
            rows.append(Agreement(index, seed, len(plain), first_difference(tree_run, plain),
                                  first_difference(plain, ref) if ref is not None else None))
    return rows


def flip_summary(rows: list[Agreement]) -> dict[str, float | int]:
    """runs, specexec_differs, tokens, tokens_compared and flips_per_10k_tokens of a comparison."""
    flips = sum(r.specexec_first_difference is not None for r in rows)
    compared = sum(r.tokens_compared for r in rows)
    return {"runs": len(rows), "specexec_differs": flips, "tokens": sum(r.tokens for r in rows),
            "tokens_compared": compared, "flips_per_10k_tokens": 10_000 * flips / max(compared, 1)}


def run(args: argparse.Namespace) -> int:
    target, draft = load_pair(args)
    reference = None
    if args.reference_dtype:
        reference, _ = load_pair(argparse.Namespace(**{**vars(args), "dtype": args.reference_dtype}), need_draft=False)
    prompts = [encode_prompt(target.tokenizer, p) for p in read_prompt_file(args.prompts)[: args.limit]]
    tree = TreeSettings(budget=args.budget, max_depth=args.max_depth, expand=args.expand,
                        overlap=overlap_wanted(target.lm.device, args.no_overlap, measuring=True),
                        shadow_forwards=args.shadow_forwards)
    rows = compare_runs(target, draft, prompts, args.seeds, lambda seed: sampling_params(args, seed=seed), tree,
                        args.max_new_tokens, reference)
    summary = {"dtype": args.dtype, **flip_summary(rows), "rows": [asdict(r) for r in rows]}
    flips, compared = summary["specexec_differs"], summary["tokens_compared"]
    if reference is not None:
        summary["reference_dtype"] = args.reference_dtype
        summary["reference_differs"] = sum(r.reference_first_difference is not None for r in rows)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for r in rows:
        print(f"prompt {r.prompt} seed {r.seed}: {r.tokens} tokens; SpecExec vs sequential "
              f"{'identical' if r.specexec_first_difference is None else f'first differs at token {r.specexec_first_difference}'}"
              + ("" if reference is None else f"; vs {args.reference_dtype} "
                 f"{'identical' if r.reference_first_difference is None else f'first differs at token {r.reference_first_difference}'}"))
    print(f"{args.dtype}: SpecExec differed from sequential in {flips} of {len(rows)} runs "
          f"({summary['flips_per_10k_tokens']:.2f} flips per 10,000 tokens compared, {compared} tokens)")
    if reference is not None:
        print(f"{args.dtype} sequential differed from {args.reference_dtype} in {summary['reference_differs']} of {len(rows)} runs")
    return 0
