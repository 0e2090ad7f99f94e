"""SpecExec seconds per pass of the built-in pair's shape, split into drafting and the target's pass: with the
draft's search forwards replayed from CUDA graphs, or eager (scripts/gpu-check.sh runs it with
SPECEXEC_CUDA_GRAPHS=1 and 0 in two processes). Every pass runs the search's full forwards (no adaptive
depth), so the two runs do the same work; the random pair's acceptance is not the real pair's."""

from __future__ import annotations

import statistics
import time

import torch

from core.bench.gpu_check import partial
from core.bench.gpu_check.random_pair import random_prompt, random_target, rtn_draft
from core.decoding.captured_forward import capture_enabled
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings

BUDGETS = (64, 256)
PASSES = 8  # an eager pass took ~1 s on the first H100 run: 2 budgets x 9 passes fit the part's limit
SMALL_BUDGETS = (8,)
SMALL_PASSES = 3


def _row(budget: int, walls: list[float], stats: list) -> dict:
    return {
        "budget": budget,
        "passes": len(walls),
        "pass_s": statistics.median(walls),
        "draft_s": statistics.median(s.draft_seconds for s in stats),
        "draft_forward_s": statistics.median(s.draft_forward_seconds for s in stats),
        "target_s": statistics.median(s.target_seconds for s in stats),
        "draft_forwards_per_pass": statistics.fmean(s.draft_forwards for s in stats),
        "tokens_per_pass": statistics.fmean(s.tokens for s in stats),
    }


def _run(target, draft, budget: int, passes: int, rows: list[dict]) -> dict:
    """Median figures of `passes` passes past the first at this budget; `rows`: the budgets done before
    (what a killed run reports, with this budget's passes so far)."""
    tree = TreeSettings(budget=budget, adaptive_depth=False)
    settings = DecodingSettings(method="specexec", tree=tree, max_new_tokens=4096)
    prompt = random_prompt(32, target.lm.vocab_size)
    walls, stats = [], []
    partial.note(rows=lambda: rows + ([_row(budget, walls, stats)] if walls else []))
    last = time.perf_counter()
    stream = stream_generate(
        target.lm, draft.lm, target.tokenizer, prompt, SamplingParams(temperature=0.6, seed=0), settings
    )
    for index, chunk in enumerate(stream):
        now = time.perf_counter()
        partial.say(f"budget {budget}: pass {index} took {1e3 * (now - last):.1f} ms")
        if index > 0:  # the first pass also prefills the prompt and captures the graphs
            walls.append(now - last)
            stats.append(chunk.stats)
        last = now
        if len(walls) >= passes:
            break
    stream.close()
    return _row(budget, walls, stats)


def measure(device: torch.device, small: bool) -> dict:
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    target = random_target(device, dtype, small)
    draft = rtn_draft(target)
    found = {"graphs": capture_enabled(device), "dtype": str(dtype).removeprefix("torch.")}
    partial.note(**found)
    partial.say("models ready")
    rows: list[dict] = []
    for budget in SMALL_BUDGETS if small else BUDGETS:
        rows.append(_run(target, draft, budget, SMALL_PASSES if small else PASSES, rows))
    return {**found, "rows": rows}
