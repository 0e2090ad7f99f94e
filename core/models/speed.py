"""Seconds per SpecExec pass on a GPU with an offloaded target: pure arithmetic, no torch (the app imports it).

A pass is the draft growing a tree (`draft_seconds`), then the target scoring it (`target_pass_seconds`).

Target: the copy engine moves the streamed layers one after another into a ring of `slots` device buffers;
the GPU computes a layer as soon as its bytes have arrived and the previous layer is done, and a slot is
refilled only after the layer that used it has run. So a layer costs the larger of its copy and its compute
wherever the ring keeps up, and resident layers (spread over the stack, as the planner spreads them) cost
their compute only while the copy engine works ahead. The first `slots` streamed layers of a pass are copied
while the draft searches (the engine prefetches them as soon as the previous pass ends), which hides up to
the draft's time of their copies. `target_pass_seconds` simulates exactly this schedule.

A streamed layer's copy runs at the pinned rate when its bytes are page-locked; where the system caps locking
(Windows, WSL2, SPECEXEC_PIN_LIMIT_GB) the rest go through the pinned staging ring at the slower of the copy
engine and the ring's fillers (`CopyPaths`, core.planning.pinning), or, where not even the ring could be
locked, at a pageable copy's rate. `CopyPaths.layer_seconds` averages them over the streamed bytes.

A layer's compute is the largest of: its matmul FLOPs at the GPU's sustained rate, the weight bytes its
kernels read (a GPTQ layer above FUSED_MATMUL_MAX_ROWS rows is dequantised into 16 bits and read back: the
packed bytes plus twice the 16-bit bytes), and its kernel launches.

Draft: as many forwards per pass as the engine runs for trees that deep (DRAFT_FORWARDS_PER_TOKEN), each
reading every draft weight once (`DraftKernel`, the kernel the engine runs on the card by
core.planning.draft_kernel's rule): 16-bit bytes at the sustained memory rate, or the packed 4-bit bytes
through torch's int4 kernel (tinygemm, whose time grows with the search's fixed width,
core.planning.graph_plan.search_width: draft_kernel.weight_passes) or the fused Triton
kernel, each at the rate it reaches on the card (`GpuRates.kernel_rate`: measured by `specexec hw --measure`
/ the doctor, else a stated default share of the sustained rate), or through a dequantisation, which writes
the weights out in 16 bits and reads them back (with Triton's kernel), or moves EAGER_DEQUANT_BYTES_PER_WEIGHT
bytes per weight (PyTorch operations, where no Triton imports).
A forward is KERNELS_PER_LAYER kernels per layer plus KERNELS_PER_FORWARD, and the search
step around it SEARCH_STEP_KERNELS more. How they reach the GPU (`DraftLaunch`):
- GRAPH (this engine on CUDA, issue 20): the forward is replayed from a CUDA graph and the search reads
  nothing back per forward, so the host runs ahead: it launches only the search step's kernels and the
  replay, while the GPU pays a small gap per kernel of the graph. A forward costs the larger of its GPU time
  (bytes or FLOPs, plus those gaps) and the host's launches.
- EAGER (the paper's code, and ours with SPECEXEC_CUDA_GRAPHS=0 before issue 20): every kernel is launched
  from Python (LAUNCH_SECONDS each) and one value is read back per forward, so the host cannot queue the
  next forward while the GPU works: a forward costs the larger of its GPU time and all its launches.

Overlap (issue 39): while the target streams, a shadow search grows the tree on the draft's own stream and
the next search starts from the subtree kept under the emitted token, so part of the drafting may leave the
critical path. `OverlapPrice` prices what the engine runs: the shadow wants as many forwards as expand its
pool once (core.planning.graph_plan.pool_forwards, at most MAX_DRAFT_FORWARDS) and gets as many as the
target's pass holds; a share of passes (the keep rate, scaled by the share of the shadow that fits) start
from a kept subtree, and such a pass makes a share fewer critical-path forwards than a pass from its root
alone. Both measured by `specexec bench acceptance` with the overlap on and off on complete trees (adaptive
depth off, the regime DRAFT_FORWARDS_PER_TOKEN counts), at budgets 32, 64 and 256, on the CPU only
(OVERLAP_MEASURED's comment).
Assumed: the shadow's forwards do not slow the target's layers (their compute hides under the copies); the
GPU check's `shadow` part (core/bench/gpu_check/shadow.py) measures that, and the share of the shadow's time that hides.

Not modelled: reading the KV caches (small at the planned context), the LM head over visited rows, sampling
and verification on the host (milliseconds), the dequantisation arithmetic inside the fused kernel, and the
kept nodes' rows that a catch-up forward re-scores with the overlap on (a few, in about a quarter of passes).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from enum import Enum

from core.models.gpu_specs import GpuSpecs
from core.planning import draft_kernel
from core.planning.graph_plan import pool_forwards, search_width
from core.planning.sizes import ModelShape, WeightFormat, decoder_layer_bytes

# Host time to launch one eager PyTorch kernel from Python (dispatch + cudaLaunchKernel). Engineering facts:
# ~10 us. Dispatch alone measured 28 us per op on the 2-core development CPU at load average 8.6 (a quarter of
# a core; docs/benchmarks.md, issue 21, "The speed model").
LAUNCH_SECONDS = 10e-6
# Kernels of one decoder layer's eager forward, and of the rest of a forward (embedding, rotary tables, norm,
# LM head), counted with a dispatch counter (non-view aten ops) on a 32-layer Llama-2-7B-shaped model with 8
# and 32 KV heads, 32 tree rows on a 256-token cache: 1,168 = 36 x 32 + 16 (28-layer Qwen2-shaped: 38 a layer).
# Script: docs/benchmarks.md, issue 21, "The speed model". `specexec bench trace` (issue 20) counts 1,153 per
# forward of the 30-layer built-in draft with the fixed-shape search's windowed KV writes: 38 a layer.
KERNELS_PER_LAYER = 36
KERNELS_PER_FORWARD = 16
# ... and of one search step around it (top-k over the flattened rows, the candidate pool, scores, the tree
# mask): `specexec bench trace` on the built-in pair counts 85 kernels per forward outside the draft's
# forwards in the fixed-shape search (1,660 per pass at 19.6 forwards, budget 256; 1,795 at 21.2, 1024).
SEARCH_STEP_KERNELS = 85
# A replayed CUDA graph: the host's cost of one replay (copying the step's inputs into the graph's buffers
# and cudaGraphLaunch), and the GPU's gap between two kernels of the graph. Assumed: a few microseconds a
# kernel is what graph replays are reported to cost. Bounded on an H100 (docs/benchmarks.md, issue 37, "First
# run"): the built-in target's captured step, 1,093 graph kernels and 33 eager launches (~20 us each on that
# host), took 3.73 ms a token: at most 2.8 us a kernel, each kernel's own run included.
GRAPH_REPLAY_SECONDS = 50e-6
GRAPH_KERNEL_GAP_SECONDS = 2e-6
# Draft forwards per pass for each token a pass accepts, by tree budget. The search runs one forward per level
# of the tree (plus catch-up), and a tree is as deep as the draft is sure of the continuation, which the
# tokens accepted per pass measure: a pair that accepts 13 tokens a pass grows deeper trees, so runs more
# forwards, than one that accepts 5 (the paper's A100 GPTQ rows bear this out: their time beyond the copies
# grows with their tokens per pass). Measured on the built-in pair, draft forwards per pass / tokens per pass,
# MT-Bench first turns, t=0.6, top-p 0.9:
#   16-256:    specexec bench acceptance --target builtin --draft builtin-draft --prompts
#              ../shared/datasets/mtbench-first-turns.jsonl --limit 8 --budgets 16,64,256 --methods specexec
#              --max-new-tokens 48 --seeds 1 --threads 1 --json      (docs/benchmarks.md, issue 21)
#   1024-2048: docs/benchmarks.md, issue 10 (same prompts, 4 of them, 32 tokens)
# Interpolated in log2(budget), held flat outside. These are counts of the search run until its tree is
# complete; adaptive depth (issue 20, core/decoding/autotune/depth.py) stops a pass earlier when one more forward is
# worth less than its cost, so they are the upper end of what the engine runs.
DRAFT_FORWARDS_PER_TOKEN: tuple[tuple[int, float], ...] = (
    (16, 7.87 / 3.80),
    (64, 11.72 / 4.86),
    (256, 14.57 / 5.73),
    (1024, 18.8 / 7.11),
    (2048, 20.0 / 8.00),
)
MAX_DRAFT_FORWARDS = 32
# Shares of the datasheet peaks (core.models.gpu_specs) that long reads and large GEMMs sustain.
MEMORY_EFFICIENCY = 0.8
MATMUL_EFFICIENCY = 0.6
# Each 4-bit draft kernel's read rate as a share of the sustained memory rate, for a card where it was not
# measured (`specexec hw --measure` and the doctor measure every kernel):
# - fused: an H100 80GB HBM3 read a 70B layer's packed weights at 316 GB/s at 1-16 rows with the kernel before
#   its split K (`specexec bench offload --device cuda`, docs/benchmarks.md, issue 31), 0.118 of its 3,350
#   GB/s x MEMORY_EFFICIENCY. Conservative on purpose: the split K was written to raise it and has not run on
#   a GPU yet.
# - tinygemm: gpt-fast's published figure for Llama-2-7B in int4 (group 32) on an A100 80GB, 862.69 GB/s of
#   its 2,039 GB/s datasheet rate at one token per step (its README; not measured here): 0.53 of the
#   sustained rate, for a whole forward, attention included: one pass over the weights (one row), so in
#   core.planning.draft_kernel's unit. The first H100 run measured 508 GB/s in that unit, 0.19 of its
#   sustained rate (docs/benchmarks.md, issue 37, "First run"); one card with HBM3, kept apart from the
#   default until a consumer card is measured.
FUSED_MATMUL_SHARE = 0.12
TINYGEMM_SHARE = 0.5
# Bytes moved per weight by the eager dequantisation a GPU runs without Triton (core.offload.gptq
# dequantize_into, per linear, then one GEMM), for 4-bit weights: the packed read (0.5), the shifted int32
# values written and masked (4 + 4 + 4), the zero subtracted in place (4 + 4), the scaled 16-bit weight
# (4 + 2), read again by the GEMM (2).
EAGER_DEQUANT_BYTES_PER_WEIGHT = 28.5
# Rows up to which a GPTQ linear multiplies with the fused kernel (core.offload.gptq_matmul; repeated here
# because that module imports torch, which the app's process never does). tests/test_speed.py checks they agree.
FUSED_MATMUL_MAX_ROWS = 64
# The overlap (module docstring, `OverlapPrice`), measured on the built-in pair on the CPU only (no GPU in
# the sessions that measured it): complete trees (adaptive depth off), the shadow given all the forwards its pool
# wants (as the 70B pairs' 0.9 s passes give it on a GPU), MT-Bench first turns, 16 tokens each, t=0.6, top-p
# 0.9, `specexec bench acceptance ... --no-adaptive-depth --shadow-forwards 32` against `--no-overlap`
# (docs/benchmarks.md, issue 39, "A seeded search builds the fresh tree" and "The price at budget 256"). On and
# off accepted the same tokens per pass at every budget. Per budget: (budget, the share of passes that started
# from kept expanded nodes, the share of such a pass's critical-path forwards spared):
# - 32: 25 passes a side, 24% kept, 7.16 forwards a pass against 7.48 (4.3% fewer);
# - 64: 23 passes a side, 30% kept, 7.87 against 8.35 (5.7% fewer);
# - 256: 64 passes a side (20 prompts), 30% kept (19 passes), 10.28 against 10.53 (2.4% fewer).
# Why so little: the emitted token is never in the scored tree, so a kept subtree lies under a token the draft
# ranked below the budget and is small (2-4 expanded nodes, whatever the budget: a smaller share of a larger
# tree); the next search still makes its catch-up forward and every level below it. Small samples, and the
# CPU's, until a GPU measures the keep at 20-32 shadow forwards.
OVERLAP_MEASURED = ((32, 0.24, 0.18), (64, 0.30, 0.19), (256, 0.30, 0.08))
DTYPE_BYTES = 2  # a GPU computes in float16 or bfloat16


class DraftLaunch(Enum):
    """How a draft forward's kernels are launched (see the module docstring)."""

    GRAPH = "graph"
    EAGER = "eager"


class DraftKernel(Enum):
    """How a GPTQ draft multiplies (core.planning.draft_kernel's names): TINYGEMM, torch's int4 kernel, and
    FUSED, this engine's Triton kernel, read the packed weights (tinygemm as often as draft_kernel.weight_passes
    says); DEQUANTISE writes them out in 16 bits and reads them back (a dequantisation kernel, then a GEMM);
    EAGER_DEQUANTISE unpacks them with PyTorch operations first (no Triton: torch's Windows builds before
    triton-windows)."""

    TINYGEMM = draft_kernel.TINYGEMM
    FUSED = draft_kernel.FUSED
    DEQUANTISE = draft_kernel.DEQUANTISE
    EAGER_DEQUANTISE = draft_kernel.EAGER_DEQUANTISE


DEFAULT_KERNEL_SHARE = {DraftKernel.TINYGEMM: TINYGEMM_SHARE, DraftKernel.FUSED: FUSED_MATMUL_SHARE}


@dataclass(frozen=True)
class GpuRates:
    """What the speed model needs of a GPU: host-to-device, memory and matmul rates (bytes/s, FLOP/s), and
    the 4-bit draft kernels' read rates measured on it (by kernel name; a kernel not measured reads at its
    DEFAULT_KERNEL_SHARE of `memory`)."""

    h2d: float
    memory: float
    flops: float
    measured_kernels: dict[str, float] = field(default_factory=dict)

    def kernel_rate(self, kernel: DraftKernel) -> float:
        """Bytes per second `kernel` reads a draft's packed weights at (TINYGEMM and FUSED)."""
        return self.measured_kernels.get(kernel.value) or self.memory * DEFAULT_KERNEL_SHARE[kernel]

    @classmethod
    def from_specs(cls, h2d: float, specs: GpuSpecs, measured_kernels: dict[str, float] | None = None) -> "GpuRates":
        return cls(
            h2d,
            specs.memory_bytes_per_second * MEMORY_EFFICIENCY,
            specs.flops * MATMUL_EFFICIENCY,
            dict(measured_kernels or {}),
        )


@dataclass(frozen=True)
class CopyPaths:
    """How a pass's streamed bytes reach the GPU: `pinned_share` of them from pinned memory at `pinned` bytes/s,
    the rest at `staged` bytes/s (through the staging ring, or pageable copies where there is none)."""

    pinned: float
    staged: float
    pinned_share: float = 1.0

    def layer_seconds(self, layer_bytes: int) -> float:
        """Average copy seconds of one streamed layer."""
        share = min(1.0, max(0.0, self.pinned_share))
        return layer_bytes * (share / self.pinned + (1 - share) / self.staged)


def draft_forwards(budget: int, tokens_per_pass: float) -> float:
    """Draft forwards per pass for a tree of `budget` tokens of which `tokens_per_pass` are accepted: the
    measured forwards per accepted token times the tokens, between 1 and the search's cap."""
    if budget <= 1:
        return 1.0
    return max(1.0, min(MAX_DRAFT_FORWARDS, _per_token(budget) * tokens_per_pass))


def _per_token(budget: int) -> float:
    budgets = [b for b, _ in DRAFT_FORWARDS_PER_TOKEN]
    if budget <= budgets[0]:
        return DRAFT_FORWARDS_PER_TOKEN[0][1]
    if budget >= budgets[-1]:
        return DRAFT_FORWARDS_PER_TOKEN[-1][1]
    i = bisect.bisect_right(budgets, budget)
    (low, low_n), (high, high_n) = DRAFT_FORWARDS_PER_TOKEN[i - 1], DRAFT_FORWARDS_PER_TOKEN[i]
    t = (math.log2(budget) - math.log2(low)) / (math.log2(high) - math.log2(low))
    return low_n + t * (high_n - low_n)


def layer_parameters(shape: ModelShape) -> int:
    """Weights of one decoder layer a token is multiplied by (its routed experts only, for MoE)."""
    return (shape.active_parameters - _embedding_parameters(shape)) // shape.num_hidden_layers


def _embedding_parameters(shape: ModelShape) -> int:
    return shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)


def _forward_kernels(layers: int) -> int:
    return KERNELS_PER_LAYER * layers + KERNELS_PER_FORWARD


def _draft_forward_seconds(layers: int, gpu_seconds: float, launch: DraftLaunch) -> float:
    """One search forward: the larger of the GPU's time and the host's launches (module docstring)."""
    if launch is DraftLaunch.EAGER:
        return max(gpu_seconds, (_forward_kernels(layers) + SEARCH_STEP_KERNELS) * LAUNCH_SECONDS)
    gpu = gpu_seconds + (_forward_kernels(layers) + SEARCH_STEP_KERNELS) * GRAPH_KERNEL_GAP_SECONDS
    return max(gpu, SEARCH_STEP_KERNELS * LAUNCH_SECONDS + GRAPH_REPLAY_SECONDS)


def layer_compute_seconds(shape: ModelShape, weights: WeightFormat, tokens: int, gpu: GpuRates) -> float:
    """One decoder layer over `tokens` rows: the largest of FLOPs, weight bytes read, and launches."""
    flops = 2 * layer_parameters(shape) * tokens / gpu.flops
    read = decoder_layer_bytes(shape, weights)
    if weights.bits is not None and tokens > FUSED_MATMUL_MAX_ROWS:
        read += 2 * DTYPE_BYTES * _linear_parameters(shape)  # dequantised into 16 bits, then read by the GEMM
    return max(flops, read / gpu.memory, KERNELS_PER_LAYER * LAUNCH_SECONDS)


def _linear_parameters(shape: ModelShape) -> int:
    """Weights of one decoder layer's linears, all experts included (what dequantisation writes)."""
    return (shape.parameters - _embedding_parameters(shape)) // shape.num_hidden_layers


def draft_seconds(
    shape: ModelShape,
    weights: WeightFormat,
    budget: int,
    tokens_per_pass: float,
    gpu: GpuRates,
    kernel: DraftKernel = DraftKernel.TINYGEMM,
    forwards: float | None = None,
    launch: DraftLaunch = DraftLaunch.GRAPH,
) -> float:
    """Growing one tree of `budget` tokens with a draft kept on the GPU: `forwards` forwards (None:
    draft_forwards(budget, tokens_per_pass)), each the larger of its GPU time and its launches (see the
    module's docstring)."""
    forwards = forwards or draft_forwards(budget, tokens_per_pass)
    layers = shape.num_hidden_layers * decoder_layer_bytes(shape, weights)
    head = shape.vocab_size * shape.hidden_size * DTYPE_BYTES  # the LM head, 16 bits
    rows = (budget + 1) / forwards  # every tree token goes through the draft once
    if weights.bits is None:
        read_seconds = (layers + head) / gpu.memory
    elif kernel is DraftKernel.TINYGEMM:  # the search multiplies search_width rows per forward, padded or not
        passes = draft_kernel.weight_passes(draft_kernel.TINYGEMM, search_width(budget))
        read_seconds = passes * layers / gpu.kernel_rate(kernel) + head / gpu.memory
    elif kernel is DraftKernel.FUSED:
        read_seconds = layers / gpu.kernel_rate(kernel) + head / gpu.memory
    else:
        per_weight = 2 * DTYPE_BYTES if kernel is DraftKernel.DEQUANTISE else EAGER_DEQUANT_BYTES_PER_WEIGHT
        read_seconds = (layers + head + per_weight * shape.num_hidden_layers * _linear_parameters(shape)) / gpu.memory
    gpu_seconds = max(read_seconds, 2 * shape.active_parameters * rows / gpu.flops)
    return forwards * _draft_forward_seconds(shape.num_hidden_layers, gpu_seconds, launch)


@dataclass(frozen=True)
class OverlapPrice:
    """What the overlap spares a pass (module docstring), from measurements at a few budgets: `points` holds
    (budget, keep rate, kept-pass saving), the keep rate the share of passes that start from a kept subtree when
    the shadow gets all the forwards it wants, the saving the share of critical-path draft forwards such a pass
    no longer makes. Between two measured budgets both follow log2(budget) in a straight line; below the
    smallest and above the largest, that measurement's."""

    points: tuple[tuple[int, float, float], ...] = OVERLAP_MEASURED

    @classmethod
    def flat(cls, keep_rate: float, kept_pass_saving: float) -> "OverlapPrice":
        """The same price at every budget."""
        return cls(((1, keep_rate, kept_pass_saving),))

    def at(self, budget: int) -> tuple[float, float]:
        """(keep rate, kept-pass saving) at `budget`."""
        points = sorted(self.points)
        if budget <= points[0][0]:
            return points[0][1], points[0][2]
        for (low, keep_low, saving_low), (high, keep_high, saving_high) in zip(points, points[1:]):
            if budget <= high:
                share = math.log2(budget / low) / math.log2(high / low)
                return keep_low + share * (keep_high - keep_low), saving_low + share * (saving_high - saving_low)
        return points[-1][1], points[-1][2]

    def critical_forwards(
        self, forwards: float, stream_seconds: float, forward_seconds: float, budget: int, width: int
    ) -> float:
        """Draft forwards left on a pass's critical path: `forwards` without the overlap, less what a kept
        subtree spares, in the share of passes that start from one. The shadow of a `budget` tree expanded
        `width` rows at a time wants pool_forwards(budget, width) forwards (at most MAX_DRAFT_FORWARDS) and gets
        as many of `forward_seconds` as the target's `stream_seconds` hold; a shadow cut short keeps
        proportionally less often. Never below the one catch-up forward."""
        if forward_seconds <= 0 or forwards <= 1:
            return forwards
        wanted = min(MAX_DRAFT_FORWARDS, pool_forwards(budget, width))
        fits = min(1.0, stream_seconds / forward_seconds / wanted)
        keep_rate, kept_pass_saving = self.at(budget)
        saving = min(1.0, max(0.0, kept_pass_saving))
        return max(1.0, forwards * (1.0 - min(1.0, keep_rate * fits) * saving))


MEASURED_OVERLAP = OverlapPrice()  # the price from OVERLAP_MEASURED


def target_pass_seconds(
    n_layers: int,
    resident: tuple[int, ...],
    copy_seconds: float,
    compute_seconds: float,
    slots: int,
    prefetch_seconds: float = 0.0,
) -> float:
    """One target pass: layers in order, resident ones computed in place, the others copied through a ring of
    `slots` buffers (the copies of the first `slots` started `prefetch_seconds` before the pass). Returns the
    time from the end of drafting to the end of the last layer."""
    kept = set(resident)
    copy_free = -prefetch_seconds
    slot_free = [-prefetch_seconds] * max(slots, 1)
    done = 0.0
    streamed = 0
    for layer in range(n_layers):
        if layer in kept:
            done += compute_seconds
            continue
        slot = streamed % len(slot_free)
        copied = max(copy_free, slot_free[slot]) + copy_seconds
        copy_free = copied
        done = max(done, copied) + compute_seconds
        slot_free[slot] = done
        streamed += 1
    return done
