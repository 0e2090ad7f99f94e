"""A 4-bit draft's kernel, chosen by measurement on the card it runs on.

A draft runs dozens of small products a pass, and which kernel reads its packed weights fastest depends on
the card (an H100 read them at 9% of its bandwidth through the fused Triton kernel; torch's int4 kernel is
expected far faster from Ampere on, unmeasured here). So the first time a draft of some shape loads on a card,
the engine times each kernel this build runs there (core.offload.matmul_rate.kernels_on) on the draft's own
first layer at LOAD_ROWS (seconds, mostly the Triton kernel's compiles), keeps the rates in the cache folder
(per card, torch version and shapes), and runs the fastest; later loads read the cache.
SPECEXEC_DRAFT_KERNEL forces one.

On the CPU the draft keeps the eager path unless a kernel is forced (tests run a whole draft through torch's
CPU twin of the int4 kernel that way).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from core.errors import InvalidSettingError
from core.offload.gptq import GPTQLinear
from core.offload.matmul_rate import DRAFT_ROWS, kernel_call, kernels_on, time_calls
from core.planning.draft_kernel import ALL_KERNELS, DEQUANTISE, EAGER_DEQUANTISE, TINYGEMM, choose_kernel, weight_passes
from core.system import json_text
from core.system.env import DRAFT_KERNEL_ENV
from core.system.json_cache import read_entries, write_entries

CACHE_FILE = "draft-kernels.json"
# In every cache key: rates cached before they counted tinygemm's passes over the weights (an older unit) are
# measured again rather than compared with rates in the new one.
RATE_UNIT = "weight-passes"
TIMING_REPEATS = 10
# Rows the engine times at load: a one-token catch-up forward and the search's default width (32 rows,
# core.planning.graph_plan.DEFAULT_EXPAND). Each (shape, rows) compiles the fused kernel once, 0.3-2.5 s, so
# the load times two row counts; `hw --measure` and the doctor time all of DRAFT_ROWS.
LOAD_ROWS = (1, 32)
# A petabyte a second: beyond any card's memory, so a larger cached rate is a damaged file.
MAX_RATE = 1e15


@dataclass(frozen=True)
class DraftKernelChoice:
    """`kernel` (core.planning.draft_kernel's name), why (`source`), and the rates it was chosen by
    (bytes of packed weights read per second, by kernel; empty when nothing was timed)."""

    kernel: str
    source: str
    rates: dict[str, float] = field(default_factory=dict)


def gptq_linears(model: nn.Module) -> list[GPTQLinear]:
    return [module for module in model.modules() if isinstance(module, GPTQLinear)]


def cache_path() -> Path:
    from core.system.locations import cache_dir

    return cache_dir() / "autotune" / CACHE_FILE


def _first_layer(linears: list[GPTQLinear]) -> list[GPTQLinear]:
    """The linears of the draft's first decoder layer (the shapes every layer repeats)."""
    seen: list[GPTQLinear] = []
    shapes: set[tuple[int, int]] = set()
    for linear in linears:
        shape = (linear.in_features, linear.out_features)
        if shape in shapes and len(seen) >= 4:
            break
        shapes.add(shape)
        seen.append(linear)
    return seen


def _cache_key(device: torch.device, linears: list[GPTQLinear]) -> str:
    shapes = sorted({(linear.in_features, linear.out_features, linear.bits, linear.group_size) for linear in linears})
    return json.dumps([torch.cuda.get_device_name(device), torch.__version__, RATE_UNIT, shapes])


def time_kernels(
    linears: list[GPTQLinear],
    device: torch.device,
    kernels: tuple[str, ...],
    rows: tuple[int, ...] = DRAFT_ROWS,
    repeats: int = TIMING_REPEATS,
) -> dict[str, float]:
    """Each kernel's rate over `linears` at each of `rows`, a product at a time, in core.planning.draft_kernel's
    unit (the bytes of its passes over the weights over the total time); a kernel that cannot take one of them
    is left out."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    generator = torch.Generator().manual_seed(0)
    rates = {}
    for kernel in kernels:
        calls = [kernel_call(linear, kernel) for linear in linears]
        if any(call is None for call in calls):
            continue
        seconds, read = 0.0, 0
        for linear, call in zip(linears, calls):
            nbytes = linear.packed.nbytes
            for count in rows:
                x = torch.randn(count, linear.in_features, generator=generator).to(device=device, dtype=dtype)
                seconds += time_calls(lambda run, x=x: run(x), [call], repeats, device)
                read += nbytes * weight_passes(kernel, count)
        rates[kernel] = read / seconds
        del calls
    return rates


def cached_rates(entries: dict, key: str) -> dict[str, float] | None:
    """The rates kept under `key`, or None (measure again) unless each is a rate a card can read at: a cache
    edited by hand with text, NaN or a number beyond a float would fail the choice at every load."""
    rates = entries.get(key)
    if not isinstance(rates, dict):
        return None
    usable = all(json_text.is_number(rate) and 0 < rate <= MAX_RATE for rate in rates.values())
    return {str(name): float(rate) for name, rate in rates.items()} if usable else None


def choose_draft_kernel(model: nn.Module, device: torch.device, *, measure: bool = True) -> DraftKernelChoice:
    """The kernel a 4-bit draft on `device` runs (see the module docstring). `measure`: time the kernels
    when the cache has no rates for this card and shape (else the first available runs).

    Raises InvalidSettingError for a forced kernel this build or card cannot run."""
    linears = gptq_linears(model)
    forced = os.environ.get(DRAFT_KERNEL_ENV, "").strip()
    available = kernels_on(device)
    if forced:
        if forced not in ALL_KERNELS or forced not in available:
            raise InvalidSettingError(
                f"{DRAFT_KERNEL_ENV}={forced!r} cannot run on {device.type}: choose one of {', '.join(available)}"
            )
        return DraftKernelChoice(forced, f"forced by {DRAFT_KERNEL_ENV}")
    if not linears or device.type != "cuda":
        return DraftKernelChoice(
            EAGER_DEQUANTISE if device.type != "cuda" else available[0],
            "the processor's path" if device.type != "cuda" else "no 4-bit layers",
        )
    sample = _first_layer(linears)
    key = _cache_key(device, sample)
    entries = read_entries(cache_path())
    if (cached := cached_rates(entries, key)) is not None:
        return DraftKernelChoice(choose_kernel(available, cached), "measured earlier on this card", cached)
    if not measure:
        return DraftKernelChoice(available[0], "not measured: the kernel expected fastest")
    rates = time_kernels(sample, device, available, LOAD_ROWS)
    entries[key] = rates
    write_entries(cache_path(), entries)
    return DraftKernelChoice(choose_kernel(available, rates), "measured now on this card", rates)


def apply_draft_kernel(model: nn.Module, kernel: str) -> int:
    """Make every GPTQ linear of a draft multiply through `kernel`; returns how many linears it changed (a
    linear the int4 kernel cannot take keeps the fused kernel or its dequantisation)."""
    changed = 0
    for linear in gptq_linears(model):
        if kernel == TINYGEMM:
            changed += linear.use_int4_kernel()
        elif kernel in (DEQUANTISE, EAGER_DEQUANTISE) and linear.fused:
            linear.fused = False
            changed += 1
    return changed
