"""The agreement rate on the device: same seed, same tokens, SpecExec against plain decoding, per dtype
(core.decoding.agreement.compare_runs on the random pair of the built-in shape), and how often plain decoding
in 16 bits parts from plain decoding in float32. On a GPU a tree pass and a one-row pass add in different
orders, so a few flips per 10k tokens are expected in 16 bits (docs/benchmarks.md, issue 30); float32 should
show none or nearly none."""

from __future__ import annotations

import torch

from core.bench.gpu_check import partial
from core.bench.gpu_check.random_pair import random_prompt, random_target, rtn_draft
from core.decoding.agreement import compare_runs, flip_summary
from core.decoding.settings import SamplingParams, TreeSettings

DTYPES = ("float32", "float16", "bfloat16")


def measure(device: torch.device, small: bool) -> dict:
    prompts_n, seeds, tokens, budget = (1, 2, 12, 8) if small else (2, 2, 64, 64)
    reference = random_target(device, torch.float32, small)
    prompts = [random_prompt(24, reference.lm.vocab_size, seed=i) for i in range(prompts_n)]
    tree = TreeSettings(budget=budget)
    rows = []
    partial.note(budget=budget, max_new_tokens=tokens, rows=rows)
    for name in DTYPES:
        target = reference if name == "float32" else random_target(device, getattr(torch, name), small)
        draft = rtn_draft(target)
        runs = compare_runs(
            target,
            draft,
            prompts,
            seeds,
            lambda seed: SamplingParams(temperature=0.6, top_p=0.9, seed=seed),
            tree,
            tokens,
            None if name == "float32" else reference,
        )
        summary = flip_summary(runs)
        summary["plain_differs_from_float32"] = sum(r.reference_first_difference is not None for r in runs)
        rows.append({"dtype": name, **summary})
        partial.say(f"{name}: {summary}")
    return {"budget": budget, "max_new_tokens": tokens, "rows": rows}
