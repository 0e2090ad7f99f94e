"""Timing a streamed target pass: synthetic 70B-shaped decoder layers (random GPTQ or 16-bit weights in the host
store) streamed through the engine's own `LayerStreamer`, with the copy rate, dequantisation and draft-matmul
times beside it. What `specexec bench offload` prints and what the doctor's streaming check measures.

On a CPU the "copy" is a host memcpy in line with the compute: the numbers check the machinery only.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaDecoderLayer,
    LlamaRotaryEmbedding,
)

from core.modeling.kv_cache import InPlaceKVCache
from core.offload.gptq import DequantScratch, GPTQLinear, GPTQSettings, dequantize_into
from core.offload.gptq_kernel import fused_dequant_available
from core.offload.gptq_matmul import fused_matmul_available
from core.offload.layout import LayerBinding, LayerLayout, layer_layout
from core.offload.pin_budget import PinBudget, lock_on_cpu, pin_in_place
from core.offload.schedule import pass_timeline, plan_pass
from core.offload.staging import RingRates, StagingRing, open_ring
from core.offload.streaming import LayerStreamer
from core.offload.weight_store import HostWeightStore
from core.planning.host_memory import HOST_MARGIN_BYTES, check_host_memory
from core.planning.residency import plan_residency

GB = 1e9
FULL_MODEL_LAYERS = 80


@dataclass
class PassRow:
    tree_size: int
    pass_s: float
    achieved_gbps: float
    ratio_to_copy: float
    compute_s: float
    copy_s: float
    hidden_fraction: float  # share of compute that ran under copies
    model_s: float  # two-stream prediction from the plan (core.offload.schedule.pass_timeline)
    projected_80_layer_s: float
    dequant_s: float  # GPTQ dequantisation alone for the pass's layers, no matmul (0 for fp16)


@dataclass
class ResidencyRow:
    budget_gb: float
    resident_layers: int
    streamed_gb_per_pass: float
    floor_s_per_pass: float  # streamed bytes / measured copy rate


def layer_config(divisor: int) -> LlamaConfig:
    config = LlamaConfig(
        hidden_size=8192 // divisor,
        intermediate_size=28672 // divisor,
        num_attention_heads=64 // divisor,
        num_key_value_heads=max(1, 8 // divisor),
        head_dim=128,
        vocab_size=32000,
        num_hidden_layers=FULL_MODEL_LAYERS,
        max_position_embeddings=4096,
    )
    config._attn_implementation = "sdpa"
    return config


def _build_layers(
    config: LlamaConfig, count: int, fmt: str, dtype: torch.dtype, scratch: DequantScratch, bits: int = 4
) -> nn.ModuleList:
    settings = GPTQSettings(bits=bits, group_size=128, desc_act=True)
    with torch.device("meta"):
        layers = nn.ModuleList([LlamaDecoderLayer(config, i).to(dtype) for i in range(count)])
    if fmt == "gptq":
        for layer in layers:
            for name, module in list(layer.named_modules()):
                if isinstance(module, nn.Linear):
                    parent, _, attr = name.rpartition(".")
                    gptq = GPTQLinear(module.in_features, module.out_features, settings, False, scratch)
                    gptq.mode = "perm"
                    setattr(layer.get_submodule(parent), attr, gptq)
    return layers.eval()


def _fill_random(store: HostWeightStore, fmt: str) -> None:
    """Random contents, fast: one random block per dtype tiled over every tensor."""
    generator = torch.Generator().manual_seed(0)
    block = 1 << 22
    floats = torch.randn(block, generator=generator) * 0.02
    words = torch.randint(-(2**31), 2**31 - 1, (block,), dtype=torch.int32, generator=generator)
    scales = torch.rand(block, generator=generator) * 0.01 + 0.001
    for index, layout in enumerate(store.layouts):
        for entry in layout.entries:
            flat = store.tensor(index, entry.name).view(-1)
            if entry.name.endswith("norm.weight"):
                flat.fill_(1.0)
            elif entry.name.endswith(".perm"):
                flat.copy_(torch.randperm(flat.numel(), generator=generator).to(torch.int32))
            elif entry.name.endswith(".g_idx"):
                flat.copy_(torch.arange(flat.numel(), dtype=torch.int32) // 128)
            else:
                source = words if entry.dtype == torch.int32 else (scales if entry.name.endswith(".scales") else floats)
                for start in range(0, flat.numel(), block):
                    piece = flat[start : start + block]
                    piece.copy_(source[: piece.numel()])


def sync_device(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _copy_rate(store: HostWeightStore, device: torch.device, repeats: int) -> float:
    """Bytes/s of one layer's host -> device copy (pinned DMA on a GPU, or pageable where the store could not
    lock layer 0; memcpy on the CPU)."""
    source = store.layer_bytes(0)
    target = torch.empty_like(source, device=device)
    target.copy_(source, non_blocking=True)
    sync_device(device)
    times = []
    for _ in range(max(repeats, 3)):
        start = time.perf_counter()
        target.copy_(source, non_blocking=True)
        sync_device(device)
        times.append(time.perf_counter() - start)
    return source.numel() / statistics.median(times)


def _time_dequant(layer: nn.Module, dtype: torch.dtype, device: torch.device, repeats: int, reference: bool) -> float:
    """Median seconds to dequantise every GPTQ linear of `layer` (bound to device memory) into the scratch:
    the engine's path (`GPTQLinear.dequantize`), or the eager reference with `reference`."""
    linears = [m for m in layer.modules() if isinstance(m, GPTQLinear)]

    def run() -> None:
        for m in linears:
            if reference:
                dequantize_into(m.scratch.matrix(m.in_features, m.out_features, dtype, device), m.packed)
            else:
                m.dequantize(dtype)

    return median_seconds(run, device, repeats)


DRAFT_ROWS = (1, 16, 64, 256)  # rows of a draft forward (the tree nodes it expands)


def _time_draft_matmuls(layer: nn.Module, dtype: torch.dtype, device: torch.device, repeats: int) -> list[dict]:
    """Median seconds to multiply `rows` rows by every GPTQ linear of `layer`, for each of DRAFT_ROWS: through
    `GPTQLinear.forward` (the fused small-batch kernel where it runs) and through dequantise-then-GEMM."""
    linears = [m for m in layer.modules() if isinstance(m, GPTQLinear)]
    results = []
    for rows in DRAFT_ROWS:
        inputs = {m.in_features: torch.randn(1, rows, m.in_features, device=device, dtype=dtype) for m in linears}

        def engine(inputs: dict[int, torch.Tensor] = inputs) -> None:
            for m in linears:
                m(inputs[m.in_features])

        def eager(inputs: dict[int, torch.Tensor] = inputs) -> None:
            for m in linears:
                torch.matmul(inputs[m.in_features], m.dequantize(dtype))

        fused = fused_matmul_available(inputs[linears[0].in_features])
        results.append(
            {
                "rows": rows,
                "fused": fused,
                "engine_s": median_seconds(engine, device, repeats),
                "dequantise_gemm_s": median_seconds(eager, device, repeats),
            }
        )
    return results


def median_seconds(run, device: torch.device, repeats: int) -> float:
    run()  # warm-up: kernel compilation, allocations
    times = []
    for _ in range(max(repeats, 3)):
        sync_device(device)
        start = time.perf_counter()
        run()
        sync_device(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class PassInputs:
    """Inputs of one decoder pass over `tree` new tokens on top of `context` cached ones."""

    def __init__(
        self, config: LlamaConfig, tree: int, context: int, count: int, device: torch.device, dtype: torch.dtype
    ) -> None:
        self.context = context
        self.hidden = torch.randn(1, tree, config.hidden_size, device=device, dtype=dtype) * 0.1
        self.positions = torch.arange(context, context + tree, device=device)[None]
        self.rope = LlamaRotaryEmbedding(config).to(device)(self.hidden, position_ids=self.positions)
        self.mask = torch.zeros(1, 1, tree, context + tree, device=device, dtype=dtype)
        self.cache = InPlaceKVCache(count, context + tree)
        head_dim = config.head_dim
        for layer in self.cache.layers:
            keys = torch.randn(1, config.num_key_value_heads, context, head_dim, device=device, dtype=dtype)
            layer.update(keys, keys.clone())

    def run_layer(self, layer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        out = layer(
            hidden,
            attention_mask=self.mask,
            position_embeddings=self.rope,
            position_ids=self.positions,
            past_key_values=self.cache,
            use_cache=True,
        )
        return out[0] if isinstance(out, tuple) else out

    def stream(self, streamer: LayerStreamer, layers: nn.ModuleList) -> torch.Tensor:
        """One pass over every layer as `streamer` binds them (issued without host waits on a GPU)."""
        hidden = self.hidden
        for layer in streamer.run(layers):
            hidden = self.run_layer(layer, hidden)
        return hidden

    def reset(self) -> None:
        self.cache.crop_to(self.context)


@dataclass
class SyntheticLayers:
    """Synthetic decoder layers whose random weights sit in the host store, locked as the loader locks them
    (the staging ring first, then the layers up to a limit), ready to stream."""

    layers: nn.ModuleList
    layouts: list[LayerLayout]
    store: HostWeightStore
    ring: StagingRing | None
    ring_rates: RingRates | None
    budget: PinBudget
    device: torch.device

    def streamer(self) -> LayerStreamer:
        """The engine's streamer over every layer through a ring of two device slots, no automatic prefetch
        (each timed pass copies all its layers)."""
        return LayerStreamer(
            self.store, self.layers, resident=(), n_slots=2, device=self.device, auto_prefetch=False, ring=self.ring
        )


def synthetic_layers(
    fmt: str,
    config: LlamaConfig,
    count: int,
    device: torch.device,
    dtype: torch.dtype,
    bits: int = 4,
    pin_limit_bytes: int | None = None,
) -> SyntheticLayers:
    """`count` `config`-shaped layers, `bits`-bit GPTQ or 16-bit (`fmt`), their random weights in the host store
    (see measure_format for pin_limit_bytes), and the GPTQ dequantisation scratch reserved on `device`."""
    scratch = DequantScratch()
    layers = _build_layers(config, count, fmt, dtype, scratch, bits)
    layouts = [layer_layout(layer) for layer in layers]
    check_host_memory(sum(layout.nbytes for layout in layouts) + HOST_MARGIN_BYTES, what=f"{count} synthetic layers")
    store, ring, ring_rates, budget = _pinned_store(layouts, device, pin_limit_bytes)
    _fill_random(store, fmt)
    if fmt == "gptq":
        largest = max(m.in_features * m.out_features for m in layers[0].modules() if isinstance(m, GPTQLinear))
        scratch.reserve(largest, dtype, device)
    return SyntheticLayers(layers, layouts, store, ring, ring_rates, budget, device)


@torch.no_grad()
def measure_format(
    fmt: str,
    config: LlamaConfig,
    device: torch.device,
    dtype: torch.dtype,
    tree_sizes: list[int],
    *,
    layers: int,
    bits: int = 4,
    repeats: int,
    context: int,
    vram_budgets: list[float] = (),
    pin_limit_bytes: int | None = None,
) -> dict:
    """One format's synthetic layers (`layers` of them, `config`-shaped, `bits`-bit GPTQ or 16-bit) streamed
    per tree size on top of `context` cached tokens, `repeats` timed passes each; with the copy rate, the
    dequantisation and draft-matmul timings and the resident-layer sweep for `vram_budgets` (GB).
    pin_limit_bytes: page-lock at most this many bytes of the layers (the rest stage through the pinned ring,
    core.offload.staging, as in the engine); None: every layer pinned on a GPU, nothing staged on the CPU."""
    count = layers  # the number; `stack.layers` are the modules
    stack = synthetic_layers(fmt, config, count, device, dtype, bits, pin_limit_bytes)
    layers, layouts, store = stack.layers, stack.layouts, stack.store
    layer_bytes = layouts[0].nbytes
    copy_rate = _copy_rate(store, device, repeats)

    # compute alone: layer 0's weights resident on the device, run `layers` times
    resident = torch.empty(layer_bytes, dtype=torch.uint8, device=device)
    resident.copy_(store.layer_bytes(0))
    # No prefetch: each timed pass starts from an empty ring and copies all its layers (in the engine the
    # first two copies also hide under the draft search, so real passes are a little faster).
    LayerBinding(layers[0], layouts[0]).bind(layouts[0].views(resident))
    dequant = {"path": None, "s_per_layer": 0.0, "reference_s_per_layer": None}
    if fmt == "gptq":
        fused = fused_dequant_available(device)
        dequant["path"] = "fused triton kernel" if fused else "eager reference"
        dequant["s_per_layer"] = _time_dequant(layers[0], dtype, device, repeats, reference=False)
        if fused:
            dequant["reference_s_per_layer"] = _time_dequant(layers[0], dtype, device, repeats, reference=True)
        dequant["draft_matmuls"] = _time_draft_matmuls(layers[0], dtype, device, repeats)
    streamer = stack.streamer()
    rows = []
    for tree in tree_sizes:
        inputs = PassInputs(config, tree, context, count, device, dtype)
        LayerBinding(layers[0], layouts[0]).bind(layouts[0].views(resident))
        compute_times = []
        for repeat in range(repeats + 1):
            sync_device(device)
            start = time.perf_counter()
            hidden = inputs.hidden
            for _ in range(count):
                hidden = inputs.run_layer(layers[0], hidden)
                inputs.reset()  # layer 0's cache again holds only the context (the mask covers context + tree)
            sync_device(device)
            if repeat:  # the first run warms up kernels and allocations
                compute_times.append(time.perf_counter() - start)
            inputs.reset()
        pass_times = []
        for repeat in range(repeats + 1):
            sync_device(device)
            start = time.perf_counter()
            inputs.stream(streamer, layers)
            sync_device(device)
            if repeat:
                pass_times.append(time.perf_counter() - start)
            inputs.reset()
        pass_s, compute_s = statistics.median(pass_times), statistics.median(compute_times)
        copy_s = streamer.bytes_streamed_per_pass / copy_rate
        hidden_fraction = min(1.0, max(0.0, (copy_s + compute_s - pass_s) / compute_s)) if compute_s > 0 else 0.0
        per_layer_copy, per_layer_compute = layer_bytes / copy_rate, compute_s / count
        model_s = pass_timeline(plan_pass(count, (), 2), [per_layer_copy] * count, [per_layer_compute] * count)
        rows.append(
            PassRow(
                tree_size=tree,
                pass_s=pass_s,
                achieved_gbps=streamer.bytes_streamed_per_pass / pass_s / GB,
                ratio_to_copy=(streamer.bytes_streamed_per_pass / pass_s) / copy_rate,
                compute_s=compute_s,
                copy_s=copy_s,
                hidden_fraction=hidden_fraction,
                model_s=model_s,
                projected_80_layer_s=pass_s * FULL_MODEL_LAYERS / count,
                dequant_s=dequant["s_per_layer"] * count,
            )
        )
    sweep = _residency_sweep(fmt, vram_budgets, copy_rate, bits)
    return {
        "format": _format_label(fmt, device, bits),
        "layer_bytes": layer_bytes,
        "pinned": store.pinned,
        "copy_rate_gbps": copy_rate / GB,
        "copy_from": "pinned" if 0 in store.pinned_layers else "pageable",
        "pinned_gb": store.pinned_bytes / GB,
        "staged_gb_per_pass": streamer.staged_bytes_per_pass / GB,
        "ring_slots": streamer.ring.depth if streamer.ring is not None else 0,
        "ring_fill_gbps": stack.ring_rates.fill / GB if stack.ring_rates else None,
        "pin_refused": stack.budget.refused,
        "dequant_path": dequant["path"],
        "dequant_s_per_layer": dequant["s_per_layer"],
        "reference_dequant_s_per_layer": dequant["reference_s_per_layer"],
        "draft_matmuls": dequant.get("draft_matmuls", []),
        "passes": [asdict(row) for row in rows],
        "residency": sweep,
    }


def _pinned_store(layouts, device: torch.device, limit: int | None):
    """The host store locked as the loader locks it (the ring first, then the layers up to `limit`), and the
    ring when some layers stage: (store, ring or None, the ring's measured rates, the budget)."""
    cuda = device.type == "cuda"
    budget = PinBudget(limit, pin_in_place if cuda else lock_on_cpu)
    store = HostWeightStore(layouts, pin=False)
    if not cuda and limit is None:  # the CPU without a limit: plain memory, nothing stages (as before)
        return store, None, None, budget
    ring, rates = open_ring(store, device, budget)
    store.pin_layers(budget)
    if ring is not None and store.pinned:
        ring.close()
        ring, rates = None, None
    return store, ring, rates, budget


def _format_label(fmt: str, device: torch.device, bits: int) -> str:
    if fmt == "gptq":
        return f"gptq {bits}-bit g128 act-order"
    return "fp16" if device.type == "cuda" else "fp16 (held as float32 on the CPU)"


def _residency_sweep(fmt: str, budgets: list[float], copy_rate: float, bits: int) -> list[dict]:
    """Resident layers of the real 80-layer Llama-2-70B (full width, fp16 compute) per VRAM budget, with the
    pass floor at the measured copy rate. Layouts come from meta-device layers: no memory is used."""
    full = layer_config(1)
    layers = _build_layers(full, 1, fmt, torch.float16, DequantScratch(), bits)
    layer_bytes = layer_layout(layers[0]).nbytes
    fixed = 2 * full.vocab_size * full.hidden_size * 2  # fp16 embeddings + lm_head
    if fmt == "gptq":
        fixed += full.hidden_size * full.intermediate_size * 2  # fp16 dequantisation scratch
    sweep = []
    for budget in budgets:
        try:
            plan = plan_residency([layer_bytes] * FULL_MODEL_LAYERS, int(budget * GB), fixed, 2)
        except Exception as error:  # noqa: BLE001 - a budget below the minimum: report it in the row
            sweep.append({"budget_gb": budget, "error": str(error)})
            continue
        sweep.append(
            asdict(
                ResidencyRow(
                    budget_gb=budget,
                    resident_layers=len(plan.resident),
                    streamed_gb_per_pass=plan.streamed_bytes_per_pass / GB,
                    floor_s_per_pass=plan.streamed_bytes_per_pass / copy_rate,
                )
            )
        )
    return sweep
