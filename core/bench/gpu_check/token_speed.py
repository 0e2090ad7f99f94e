"""Milliseconds per token of a plain answer of the built-in target's shape, at positions 1-50, 450-500 and
950-1000 of the answer: flat when attention keeps its plans, rising (100 ms a token on an H100, issue 37)
when cuDNN plans anew for every new key length. scripts/gpu-check.sh runs it with the fix on and off
(SPECEXEC_ATTENTION_FIX) in two processes."""

from __future__ import annotations

import statistics
import time

import torch

from core.bench.gpu_check import partial
from core.bench.gpu_check.random_pair import random_prompt, random_target
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams
from core.modeling.attention import attention_fix_enabled

WINDOWS = ((1, 50), (450, 500), (950, 1000))
SMALL_WINDOWS = ((1, 10), (40, 50), (90, 100))
PROMPT_TOKENS = 16


def _windows(seconds: list[float], windows: tuple[tuple[int, int], ...]) -> list[dict]:
    """Median, mean and max milliseconds per token in each window the answer reached (a killed run's last
    window may hold fewer tokens)."""
    rows = []
    for first, last_position in windows:
        times = seconds[first - 1 : last_position]
        if times:
            rows.append(
                {
                    "positions": f"{first}-{min(last_position, len(seconds))}",
                    "median_ms": 1e3 * statistics.median(times),
                    "mean_ms": 1e3 * statistics.fmean(times),
                    "max_ms": 1e3 * max(times),
                }
            )
    return rows


def measure(device: torch.device, small: bool) -> dict:
    windows = SMALL_WINDOWS if small else WINDOWS
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    target = random_target(device, dtype, small)
    prompt = random_prompt(PROMPT_TOKENS, target.lm.vocab_size)
    settings = DecodingSettings(method="sequential", max_new_tokens=windows[-1][1])
    seconds: list[float] = []
    found = {
        "attention_fix": attention_fix_enabled(),
        "dtype": str(dtype).removeprefix("torch."),
        "cudnn_sdp_enabled": torch.backends.cuda.cudnn_sdp_enabled(),
    }
    partial.note(**found, tokens=lambda: len(seconds), windows=lambda: _windows(seconds, windows))
    partial.say("model ready")
    last = time.perf_counter()
    for chunk in stream_generate(
        target.lm, None, target.tokenizer, prompt, SamplingParams(temperature=1.0, seed=0), settings
    ):
        now = time.perf_counter()
        seconds.extend([(now - last) / len(chunk.token_ids)] * len(chunk.token_ids))
        last = now
        if len(seconds) % 100 < len(chunk.token_ids):
            partial.say(f"{len(seconds)} tokens, the last {1e3 * seconds[-1]:.1f} ms")
    return {**found, "tokens": len(seconds), "windows": _windows(seconds, windows)}
