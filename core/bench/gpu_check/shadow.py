"""Issue 39's overlap on a GPU: how much of a shadow search's draft work hides under the target's streamed pass,
and whether it slows the target's layers (the speed model assumes it does not: core.models.speed, `OverlapPrice`).

The target: random 4-bit 70B-shaped layers streamed through the engine's LayerStreamer at a tree of budget
256 (core.offload.pass_timing, as the offload part streams them). The draft: the weight reads of an 8B Llama
draft's forward, its decoder layers' linears (core.offload.matmul_rate.DRAFT_SHAPES, random 4-bit weights,
rotated past the L2 cache as a real draft's distinct layers are) multiplied with the search's width of rows
(core.planning.graph_plan.search_width) through the 4-bit kernel the engine would run (`DraftReads`).
Attention, norms and the LM head are left out: the weight reads are most of a draft forward's GPU time and
all of what it takes from the memory the copies write into.

Timed: the target's pass alone, one draft forward alone, and the two as the engine issues them (the shadow's
forwards on the draft's own stream, core.decoding.draft_lane, after a mark made before the target's pass, so
they start together): the shadow makes as many forwards as the pass alone lasts (at most the search's cap),
as core.decoding.methods.specexec sizes it. On a CPU there is one stream and the two run in sequence: the
figures check the machinery only, and no hidden share is reported.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from core.bench.gpu_check import partial
from core.decoding.draft_lane import DraftLane
from core.decoding.draft_search import DEFAULT_MAX_FORWARDS
from core.decoding.timing import ForwardTimer, PassClock
from core.offload.draft_kernels import choose_draft_kernel
from core.offload.matmul_rate import DRAFT_SHAPES, SMOKE_SHAPES, kernel_call, random_linear_copies
from core.offload.pass_timing import PassInputs, layer_config, median_seconds, sync_device, synthetic_layers
from core.planning.graph_plan import search_width

# The workload on a GPU: a tree of budget 256 over 8 streamed 70B layers on 512 cached tokens, and an 8B Llama
# draft's 32 decoder layers, each using DRAFT_SHAPES this often (q and o, k and v, gate and up, down); SMALL: the
# CPU's smoke run.
FULL = dict(
    budget=256,
    target_layers=8,
    context=512,
    repeats=3,
    draft_layers=32,
    shapes=DRAFT_SHAPES,
    uses={"q/o": 2, "k/v": 2, "gate/up": 2, "down": 1},
)
SMALL = dict(budget=16, target_layers=2, context=32, repeats=1, draft_layers=2, shapes=SMOKE_SHAPES, uses={"smoke": 7})


class DraftReads:
    """One draft forward's weight reads: each of `layers` decoder layers multiplies `rows` rows by its linears
    (`shapes`, each used `uses[name]` times a layer) through one 4-bit kernel, every layer on the next copy of
    the weights. The kernel is the one the engine would run for a draft of these shapes without timing them
    first (core.offload.draft_kernels: what an earlier load measured on this card, else the one expected
    fastest; a processor's eager path on a CPU): timing every kernel would compile the fused one for each shape,
    seconds the check's few minutes cannot spare."""

    def __init__(self, device: torch.device, shapes, uses: dict[str, int], layers: int, rows: int) -> None:
        generator = torch.Generator().manual_seed(0)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        self.device, self.layers = device, layers
        weights = [random_linear_copies(k, n, device, generator).copies for _, k, n in shapes]
        self.uses = [uses[name] for name, _, _ in shapes]
        self.inputs = [torch.randn(rows, k, generator=generator).to(device=device, dtype=dtype) for _, k, _ in shapes]
        self.kernel = choose_draft_kernel(nn.ModuleList(copies[0] for copies in weights), device, measure=False).kernel
        self.calls = [[kernel_call(linear, self.kernel) for linear in copies] for copies in weights]

    def forward(self) -> None:
        for layer in range(self.layers):
            for calls, uses, x in zip(self.calls, self.uses, self.inputs):
                for use in range(uses):
                    calls[(layer * uses + use) % len(calls)](x)


def _together(target_pass, draft: DraftReads, forwards: int, lane: DraftLane) -> tuple[float, float, float]:
    """Seconds of (the target's pass, the shadow's forwards, both to the end), issued as the engine issues a
    pass with the overlap on: the lane's mark, the target's pass, then the shadow on the draft's stream."""
    device = draft.device
    sync_device(device)
    start = time.perf_counter()
    clock = PassClock(device)
    lane.mark()
    target_pass()
    clock.mark()
    shadow = ForwardTimer(device)
    with lane.run(), shadow:
        for _ in range(forwards):
            draft.forward()
    sync_device(device)
    wall = time.perf_counter() - start
    return clock.intervals()[0], shadow.seconds(), wall


def measure(device: torch.device, small: bool) -> dict:
    shape = SMALL if small else FULL
    budget, count, repeats = shape["budget"], shape["target_layers"], shape["repeats"]
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    config = layer_config(16 if small else 1)
    stack = synthetic_layers("gptq", config, count, device, dtype)
    streamer = stack.streamer()
    inputs = PassInputs(config, budget + 1, shape["context"], count, device, dtype)
    width = search_width(budget)
    draft = DraftReads(device, shape["shapes"], shape["uses"], shape["draft_layers"], width)
    partial.say(f"{count} target layers in the store, draft kernel {draft.kernel} at {width} rows")

    def target_pass() -> None:
        inputs.stream(streamer, stack.layers)
        inputs.reset()

    target_s = median_seconds(target_pass, device, repeats)
    forward_s = median_seconds(draft.forward, device, repeats)
    forwards = max(1, min(DEFAULT_MAX_FORWARDS, round(target_s / forward_s)))
    partial.note(target_layers=count, target_alone_s=target_s, draft_forward_s=forward_s, shadow_forwards=forwards)
    partial.say(f"target pass {target_s * 1e3:.1f} ms, draft forward {forward_s * 1e3:.1f} ms alone")
    lane = DraftLane(device)
    runs = [_together(target_pass, draft, forwards, lane) for _ in range(repeats + 1)][1:]  # the first warms up
    target_with, shadow_with, wall = (statistics.median(values) for values in zip(*runs))
    shadow_alone = forwards * forward_s
    return {
        "budget": budget,
        "tree_tokens": budget + 1,
        "target_layers": count,
        "draft_kernel": draft.kernel,
        "draft_rows": width,
        "draft_layers": shape["draft_layers"],
        "target_alone_s": target_s,
        "draft_forward_s": forward_s,
        "shadow_forwards": forwards,
        "target_with_shadow_s": target_with,
        "shadow_with_target_s": shadow_with,
        "both_s": wall,
        # > 1: the shadow's forwards slowed the target's layers (the speed model assumes 1)
        "target_slowdown": target_with / target_s,
        # the share of the shadow's draft time that ran under the target's pass; None on a CPU, where one stream
        # runs them in turn and the difference would be timing noise
        "hidden_share": min(1.0, max(0.0, (target_s + shadow_alone - wall) / shadow_alone))
        if device.type == "cuda"
        else None,
    }
