"""How fast a pair runs once its memory is planned: the target's pass and the draft's tree in seconds at each
tree budget, and the fastest budget (`core.models.fit` asks; `core.models.speed` prices the parts). Pure
arithmetic, no torch (the app imports it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.hardware.description import GpuInfo, HardwareDescription
from core.models.catalog import ModelRef, Pair
from core.models.gpu_specs import gpu_specs
from core.models.speed import (
    DraftKernel,
    GpuRates,
    draft_forwards,
    draft_seconds,
    layer_compute_seconds,
    MEASURED_OVERLAP,
    OverlapPrice,
    target_pass_seconds,
)
from core.planning import draft_kernel
from core.planning.budgets import AUTO_BUDGETS
from core.planning.graph_plan import search_width
from core.planning.sizes import ModelShape, WeightFormat

GPU_DTYPE, GPU_DTYPE_BYTES = "float16", 2  # what a GPU computes in (bf16 or fp16: both 2 bytes)
GPU_FORMAT = WeightFormat(dtype=GPU_DTYPE)
# Assumed sustained matmul rate of one CPU core in fp32 (an estimate, named as such in the output).
CPU_CORE_FLOPS = 25e9


def gpu_format(model: ModelRef) -> WeightFormat:
    """How the model's layers sit on a GPU: packed GPTQ, or 16 bits."""
    return model.weights if model.weights.bits is not None else GPU_FORMAT


def budgets_weighed(tree_budget: int | None, cap: int) -> tuple[int, ...]:
    """The budgets a prediction weighs: the fixed one (`cap`: lowered where VRAM is short), or those the
    automatic choice picks from, up to `cap`."""
    if tree_budget is not None:
        return (cap,)
    return tuple(b for b in AUTO_BUDGETS if b <= cap) or (cap,)


@dataclass(frozen=True)
class Speed:
    budget: int
    pass_seconds: float
    draft_seconds: float
    tokens_per_pass: float
    source: str

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_pass / (self.pass_seconds + self.draft_seconds)


def fastest(pair: Pair, budgets: tuple[int, ...], timing: Callable[[int, float], tuple[float, float]]) -> Speed:
    """The predicted speed at each budget, and the fastest of them (the smallest on a tie). timing(budget,
    tokens per pass) -> (target pass seconds, draft seconds)."""
    speeds = []
    for budget in budgets:
        tokens, source = tokens_per_pass(pair, budget)
        speeds.append(Speed(budget, *timing(budget, tokens), tokens, source))
    return max(speeds, key=lambda speed: speed.tokens_per_second)


def tokens_per_pass(pair: Pair, budget: int) -> tuple[float, str]:
    if pair.acceptance is None:
        return 1.0, "no acceptance table for this pair: one token per pass assumed"
    return pair.acceptance.at(budget)


def gpu_rates(gpu: GpuInfo, h2d: float) -> GpuRates:
    return GpuRates.from_specs(h2d, gpu_specs(gpu.name), gpu.draft_kernel_bytes_per_second)


def engine_draft_kernel(gpu: GpuInfo, hw: HardwareDescription) -> DraftKernel:
    """The kernel the engine will run a GPTQ draft with on this card (core.planning.draft_kernel's rule, the
    engine's own): the fastest measured, else torch's int4 kernel from Ampere on (in every CUDA wheel of torch,
    Windows included), else a dequantisation (Triton's, or PyTorch operations' where Triton does not import:
    torch's Windows builds without triton-windows; the probe's platform["triton"] is the installed version,
    empty when Python cannot find it)."""
    triton = hw.platform.get("system") != "Windows" or bool(hw.platform.get("triton"))
    available = draft_kernel.available_kernels(draft_kernel.parse_capability(gpu.compute_capability), triton)
    return DraftKernel(draft_kernel.choose_kernel(available, gpu.draft_kernel_bytes_per_second))


def gpu_pass(
    pair: Pair,
    resident: tuple[int, ...],
    slots: int,
    copy_seconds: float,
    budget: int,
    tokens: float,
    rates: GpuRates,
    kernel: DraftKernel,
    overlap: OverlapPrice | None = MEASURED_OVERLAP,
) -> tuple[float, float]:
    """(target pass, draft) seconds on a GPU: the draft first, the target's first streamed layers copied
    meanwhile, then every layer at the larger of its copy and its compute (core.models.speed). With the
    overlap (its price; None: off) the draft seconds are those left on the critical path (the shadow fills the
    target's pass), and the prefetch hides under that shorter drafting only."""
    target, draft = pair.target.shape, pair.draft.shape
    draft_format = gpu_format(pair.draft)
    drafting = draft_seconds(draft, draft_format, budget, tokens, rates, kernel)
    compute = layer_compute_seconds(target, gpu_format(pair.target), budget + 1, rates)
    scoring = target_pass_seconds(target.num_hidden_layers, resident, copy_seconds, compute, slots, drafting)
    if overlap is not None and budget > 1:
        forwards = draft_forwards(budget, tokens)
        critical = overlap.critical_forwards(forwards, scoring, drafting / forwards, budget, search_width(budget))
        drafting = draft_seconds(draft, draft_format, budget, tokens, rates, kernel, forwards=critical)
        scoring = target_pass_seconds(target.num_hidden_layers, resident, copy_seconds, compute, slots, drafting)
    return scoring, drafting


def flop_seconds(shape: ModelShape, tokens: int, flops: float) -> float:
    """2 x active parameters x tokens at `flops`: the arithmetic of a forward over `tokens` tokens."""
    return 2 * shape.active_parameters * tokens / flops


def cpu_timing(pair: Pair, flops: float) -> Callable[[int, float], tuple[float, float]]:
    """On the processor every token of the tree goes through the draft once and the target once."""
    target, draft = pair.target.shape, pair.draft.shape
    return lambda budget, _tokens: (flop_seconds(target, budget + 1, flops), flop_seconds(draft, budget + 1, flops))


def cpu_flops(hw: HardwareDescription) -> float:
    return (hw.cpu.physical_cores or hw.cpu.logical_cores or 1) * CPU_CORE_FLOPS
