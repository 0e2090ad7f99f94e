"""`specexec bench draws`: how often a token draw flips between a many-row pass's logits and a one-row pass's.

SpecExec scores a whole tree in one target pass; sequential decoding scores one token at a time. The two
compute the same logits in a different order, so they differ by rounding, and a draw keyed by (seed,
position) turns into a different token wherever that difference crosses the draw's decision. This measures
the rate for each candidate draw (issue 30), on real logits: for each prompt, plain sampling gives a
sequence; the target then scores that sequence one token at a time (as sequential decoding does) and in one
many-row pass (as a tree pass does), and every position is drawn with KEYS seeds by each candidate from
both sets of logits, counting draws that differ. Candidates:
- inverse-cdf-f32: one keyed uniform against the float32 cumulative sum in vocabulary order (the draw before
  issue 30);
- inverse-cdf-f64: the same, the softmax and sum in float64;
- gumbel-two-level: core.decoding.sampling's draw (a Gumbel per block of DRAW_BLOCK tokens, then per slot);
- gumbel-full: one Gumbel per vocabulary entry (the textbook Gumbel-max; V noise values a position).
Each row also says how many keyed noise values one draw needs, the host-side cost that chose among them.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used: `--help` answers without it
    import torch

    from core.decoding.settings import SamplingParams

CANDIDATES = ("inverse-cdf-f32", "inverse-cdf-f64", "gumbel-two-level", "gumbel-full")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from core.cli.options import add_model_arguments

    add_model_arguments(parser)
    parser.add_argument("--prompts", required=True, help="JSON Lines prompt file (messages or text)")
    parser.add_argument("--limit", type=int, default=4, help="use the first N prompts")
    parser.add_argument("--tokens", type=int, default=48, help="positions per prompt")
    parser.add_argument("--keys", type=int, default=32, help="seeds drawn at every position")
    parser.add_argument("--full-keys", type=int, default=2, help="seeds for gumbel-full (V noise values a draw)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default %(default)s)")
    parser.add_argument(
        "--top-p", type=float, default=1.0, help="nucleus sampling share, 1 = off (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """The draw before issue 30: the first index whose cumulative weight exceeds u times the total."""
    import torch

    cdf = probs.cumsum(-1)
    total = cdf[..., -1:]
    below = (cdf <= uniforms.to(cdf.dtype).unsqueeze(-1) * total).sum(-1)
    last_positive = (cdf >= total).to(torch.uint8).argmax(-1)
    return torch.minimum(below, last_positive)


def _draw(candidate: str, scores: torch.Tensor, seed: int, positions: torch.Tensor) -> torch.Tensor:
    """One token per row of scores [N, V] (log-weights, float32) at these absolute positions."""
    import torch

    from core.decoding.keyed_random import STREAM_TOKEN, keyed_gumbels, keyed_uniforms
    from core.decoding.sampling import draw_slots, gumbel_pick

    if candidate == "gumbel-two-level":  # the noise position_noise makes, at any positions
        return gumbel_pick(scores, keyed_gumbels(seed, positions, STREAM_TOKEN, draw_slots(scores.shape[-1])))
    if candidate == "gumbel-full":
        noise = keyed_gumbels(seed, positions, STREAM_TOKEN, scores.shape[-1])
        return (scores.double() + noise).argmax(-1)
    uniforms = keyed_uniforms(seed, positions, STREAM_TOKEN)
    dtype = torch.float32 if candidate == "inverse-cdf-f32" else torch.float64
    return inverse_cdf(torch.softmax(scores.to(dtype), dim=-1), uniforms)


def noise_values(candidate: str, vocab: int) -> int:
    """Keyed random values one draw needs."""
    from core.decoding.sampling import draw_slots

    return {"gumbel-two-level": draw_slots(vocab), "gumbel-full": vocab}.get(candidate, 1)


def logit_pairs(
    target, prompt: list[int], tokens: int, params: SamplingParams
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(one-row logits [T, V], many-row logits [T, V], first position) over `tokens` positions after the
    prompt: the sequence is sampled once, then scored one token at a time and in one pass."""
    import torch

    from core.decoding.generation import generate
    from core.decoding.settings import DecodingSettings
    from core.modeling.tree_mask import additive_mask, causal_visibility

    with torch.no_grad():  # scoring only: no autograd graph
        lm = target.lm
        sequence = generate(
            lm, None, target.tokenizer, prompt, params, DecodingSettings(method="sequential", max_new_tokens=tokens)
        ).token_ids
        ids = torch.tensor(prompt + sequence, device=lm.device)
        start = len(prompt) - 1  # logits after the prompt's last token predict the first new one
        count = len(sequence)
        cache = lm.new_cache()
        lm.extend(ids[:start], cache)
        one_row = []
        for i in range(start, start + count):
            mask = additive_mask(causal_visibility(i, 1, lm.device), lm.dtype)
            one_row.append(lm.forward(ids[i : i + 1], torch.tensor([i], device=lm.device), mask, cache)[0])
        cache = lm.new_cache()
        lm.extend(ids[:start], cache)
        mask = additive_mask(causal_visibility(start, count, lm.device), lm.dtype)
        many = lm.forward(ids[start : start + count], torch.arange(start, start + count, device=lm.device), mask, cache)
        return torch.stack(one_row), many, start + 1


def run(args: argparse.Namespace) -> int:
    import torch

    from core.cli.pair import load_pair
    from core.decoding.sampling import process_logits
    from core.decoding.settings import SamplingParams
    from core.text.prompts import encode_prompt, read_prompt_file

    target, _ = load_pair(args, need_draft=False)
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p)
    counts = {name: [0, 0] for name in CANDIDATES}  # draws, flips
    largest = 0.0
    for prompt in [encode_prompt(target.tokenizer, p) for p in read_prompt_file(args.prompts)[: args.limit]]:
        one_row, many, first = logit_pairs(target, prompt, args.tokens, params)
        largest = max(largest, float((one_row.double() - many.double()).abs().max()))
        positions = torch.arange(first, first + one_row.shape[0])
        a, b = process_logits(one_row, params), process_logits(many, params)
        for name in CANDIDATES:
            for seed in range(args.full_keys if name == "gumbel-full" else args.keys):
                flips = (_draw(name, a, seed, positions) != _draw(name, b, seed, positions)).sum()
                counts[name][0] += positions.shape[0]
                counts[name][1] += int(flips)
    vocab = target.lm.vocab_size
    rows = [
        {
            "draw": name,
            "draws": draws,
            "flips": flips,
            "flips_per_10k": 10_000 * flips / max(draws, 1),
            "noise_values_per_draw": noise_values(name, vocab),
        }
        for name, (draws, flips) in counts.items()
    ]
    result = {
        "dtype": str(target.lm.dtype).replace("torch.", ""),
        "vocab": vocab,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "largest_logit_difference": largest,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['dtype']}, vocabulary {vocab}, t={args.temperature} top-p={args.top_p}; one-row vs many-row "
        f"logits differ by up to {largest:.2e}"
    )
    for r in rows:
        print(
            f"{r['draw']:>17}: {r['flips']:>5} of {r['draws']:>6} draws flip ({r['flips_per_10k']:.1f} per 10,000); "
            f"{r['noise_values_per_draw']} noise values a draw"
        )
    return 0
