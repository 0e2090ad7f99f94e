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
import json
from dataclasses import asdict

from core.cli.options import add_model_arguments, add_overlap_arguments, sampling_params
from core.cli.pair import load_pair


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompts", required=True, help="JSON Lines prompt file (messages or text)")
    parser.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per prompt")
    parser.add_argument("--budget", type=int, default=16, help="draft tokens per target pass (default %(default)s)")
    parser.add_argument("--max-depth", type=int, default=8, help="deepest draft node (default %(default)s)")
    parser.add_argument("--expand", type=int, default=8, help="nodes expanded per draft forward (default %(default)s)")
    add_overlap_arguments(parser)
    parser.add_argument("--temperature", type=float, default=0.6, help="sampling temperature (default %(default)s)")
    parser.add_argument(
        "--top-p", type=float, default=0.9, help="nucleus sampling share, 1 = off (default %(default)s)"
    )
    parser.add_argument("--top-k", type=int, default=0, help="sample from this many likeliest tokens (0 = off)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per answer (default %(default)s)")
    parser.add_argument("--reference-dtype", default=None, help="also run sequential decoding in this dtype")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    # torch and transformers: here, so that `--help` answers at once
    from core.decoding.agreement import compare_runs, flip_summary
    from core.decoding.settings import TreeSettings, overlap_wanted
    from core.text.prompts import encode_prompt, read_prompt_file

    target, draft = load_pair(args)
    reference = None
    if args.reference_dtype:
        reference, _ = load_pair(argparse.Namespace(**{**vars(args), "dtype": args.reference_dtype}), need_draft=False)
    prompts = [encode_prompt(target.tokenizer, p) for p in read_prompt_file(args.prompts)[: args.limit]]
    tree = TreeSettings(
        budget=args.budget,
        max_depth=args.max_depth,
        expand=args.expand,
        overlap=overlap_wanted(target.lm.device, args.no_overlap, measuring=True),
        shadow_forwards=args.shadow_forwards,
    )
    rows = compare_runs(
        target,
        draft,
        prompts,
        args.seeds,
        lambda seed: sampling_params(args, seed=seed),
        tree,
        args.max_new_tokens,
        reference,
    )
    summary = {"dtype": args.dtype, **flip_summary(rows), "rows": [asdict(r) for r in rows]}
    flips, compared = summary["specexec_differs"], summary["tokens_compared"]
    if reference is not None:
        summary["reference_dtype"] = args.reference_dtype
        summary["reference_differs"] = sum(r.reference_first_difference is not None for r in rows)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for r in rows:
        print(
            f"prompt {r.prompt} seed {r.seed}: {r.tokens} tokens; SpecExec vs sequential "
            f"{'identical' if r.specexec_first_difference is None else f'first differs at token {r.specexec_first_difference}'}"
            + (
                ""
                if reference is None
                else f"; vs {args.reference_dtype} "
                f"{'identical' if r.reference_first_difference is None else f'first differs at token {r.reference_first_difference}'}"
            )
        )
    print(
        f"{args.dtype}: SpecExec differed from sequential in {flips} of {len(rows)} runs "
        f"({summary['flips_per_10k_tokens']:.2f} flips per 10,000 tokens compared, {compared} tokens)"
    )
    if reference is not None:
        print(
            f"{args.dtype} sequential differed from {args.reference_dtype} in {summary['reference_differs']} of {len(rows)} runs"
        )
    return 0
