"""Where the time of a plain answer and of a SpecExec pass goes on the device: torch.profiler over a few
plain tokens (after a warm-up) and a few SpecExec passes of the random pair (run as the engine runs them: the
draft's CUDA graphs on where they capture), each as the profiler's table of the operators that took the most
device time and the most host time. The first H100 run measured 26 ms for an eager plain token and 6.2 ms for
a 135M draft forward replayed from a graph; these tables say whether such time is kernels, launches,
host-device syncs or Python."""

from __future__ import annotations

import time

import torch
from torch.profiler import ProfilerActivity, profile

from core.bench.gpu_check import partial
from core.bench.gpu_check.random_pair import random_prompt, random_target, rtn_draft
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings

PLAIN_TOKENS, SMALL_PLAIN_TOKENS = 30, 4
PASSES, SMALL_PASSES = 2, 1
ROWS = 20  # operators in each table


def _tables(prof, device: torch.device) -> dict:
    averages = prof.key_averages()
    tables = {"by_host_time": averages.table(sort_by="self_cpu_time_total", row_limit=ROWS, max_name_column_width=60)}
    if device.type == "cuda":
        tables["by_device_time"] = averages.table(
            sort_by="self_device_time_total", row_limit=ROWS, max_name_column_width=60
        )
    return tables


def _activities(device: torch.device) -> list:
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def _plain(target, prompt: list[int], tokens: int, device: torch.device) -> dict:
    settings = DecodingSettings(method="sequential", max_new_tokens=tokens)
    params = SamplingParams(temperature=1.0, seed=0)
    for _ in stream_generate(target.lm, None, target.tokenizer, prompt, params, settings):
        pass  # warm-up: kernels chosen and loaded
    started = time.perf_counter()
    with profile(activities=_activities(device)) as prof:
        for _ in stream_generate(target.lm, None, target.tokenizer, prompt, params, settings):
            pass
    return {"tokens": tokens, "wall_s": time.perf_counter() - started, **_tables(prof, device)}


def _passes(target, draft, prompt: list[int], passes: int, device: torch.device) -> dict:
    settings = DecodingSettings(method="specexec", tree=TreeSettings(budget=64, adaptive_depth=False))
    stream = stream_generate(
        target.lm, draft.lm, target.tokenizer, prompt, SamplingParams(temperature=0.6, seed=0), settings
    )
    next(stream)  # the first pass: prefill and warm-up
    started = time.perf_counter()
    with profile(activities=_activities(device)) as prof:
        for _, _chunk in zip(range(passes), stream):
            pass
    stream.close()
    return {"passes": passes, "budget": 64, "wall_s": time.perf_counter() - started, **_tables(prof, device)}


def measure(device: torch.device, small: bool) -> dict:
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    target = random_target(device, dtype, small)
    prompt = random_prompt(16, target.lm.vocab_size)
    partial.say("model ready")
    plain = _plain(target, prompt, SMALL_PLAIN_TOKENS if small else PLAIN_TOKENS, device)
    partial.note(dtype=str(dtype).removeprefix("torch."), plain=plain)
    partial.say(f"plain: {plain['wall_s']:.2f} s for {plain['tokens']} tokens")
    draft = rtn_draft(target)
    passes = _passes(target, draft, prompt, SMALL_PASSES if small else PASSES, device)
    partial.say(f"passes: {passes['wall_s']:.2f} s for {passes['passes']}")
    return {"dtype": str(dtype).removeprefix("torch."), "plain": plain, "passes": passes}
