"""Plain decoding of a resident target with its one-token step replayed from CUDA graphs, against the same step
run eagerly (issue 37: ~14 ms of launches per token for a resident 32B before any math). In one process, graphs
off then on (SPECEXEC_CUDA_GRAPHS, read at every step): milliseconds per token past the first few (which hold the
captures), whether both answers have the same greedy tokens, and the captured step against the eager one over
several column buckets (core.decoding.captured_forward.compare_step_captured_with_eager: 0.0 or a few units in the
last place means capture is safe on this card). Off CUDA nothing is captured: both runs are eager."""

from __future__ import annotations

import os
import statistics
import time

import torch

from core.bench.gpu_check import partial
from core.bench.gpu_check.random_pair import random_prompt, random_target
from core.decoding.captured_forward import compare_step_captured_with_eager, step_capture_enabled
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams
from core.system.env import CUDA_GRAPHS_ENV, variables_set

TOKENS, SMALL_TOKENS = 300, 40
PROMPT_TOKENS = 16
SKIPPED = 10  # leading tokens left out of the figures: the first column bucket's capture happens there


def _answer(target, prompt: list[int], tokens: int) -> tuple[list[int], list[float]]:
    """A greedy plain answer: its tokens and the seconds each took (every step reads its token: no overlap)."""
    settings = DecodingSettings(method="sequential", max_new_tokens=tokens)
    ids, seconds = [], []
    last = time.perf_counter()
    for chunk in stream_generate(target.lm, None, target.tokenizer, prompt, SamplingParams(temperature=0.0), settings):
        now = time.perf_counter()
        ids.extend(chunk.token_ids)
        seconds.extend([(now - last) / len(chunk.token_ids)] * len(chunk.token_ids))
        last = now
    return ids, seconds


def measure(device: torch.device, small: bool) -> dict:
    tokens = SMALL_TOKENS if small else TOKENS
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    target = random_target(device, dtype, small)
    prompt = random_prompt(PROMPT_TOKENS, target.lm.vocab_size)
    rows, answers = [], []
    partial.note(dtype=str(dtype).removeprefix("torch."), tokens=tokens, rows=rows)
    partial.say("model ready")
    with variables_set({CUDA_GRAPHS_ENV: "0"}):
        _answer(target, prompt, SKIPPED)  # warm-up: cuBLAS, the allocator, the first kernels
        for graphs in ("0", "1"):
            os.environ[CUDA_GRAPHS_ENV] = graphs
            ids, seconds = _answer(target, prompt, tokens)
            partial.say(f"graphs {graphs}: {tokens} tokens")
            answers.append(ids)
            steady = seconds[SKIPPED:]
            rows.append(
                {
                    "graphs": graphs == "1",
                    "captured": step_capture_enabled(target.lm),
                    "median_ms": 1e3 * statistics.median(steady),
                    "mean_ms": 1e3 * statistics.fmean(steady),
                    "max_ms": 1e3 * max(steady),
                }
            )
        difference = compare_step_captured_with_eager(target.lm) if step_capture_enabled(target.lm) else None
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "tokens": tokens,
        "same_tokens": answers[0] == answers[1],
        "captured_vs_eager_max_abs": difference,
        "rows": rows,
    }
