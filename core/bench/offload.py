"""`specexec bench offload`: how close a streamed target pass gets to the host-to-device copy floor.

Synthetic Llama-2-70B-shaped decoder layers (hidden 8192, intermediate 28672, 64 heads, 8 KV heads),
GPTQ 4-bit (group 128, act-order) and/or fp16, filled with random data and streamed through the same
`LayerStreamer` the engine uses. First the pinned host-to-device copy rate of one layer is measured, then
for each tree size a full pass over `--layers` layers: seconds per pass, achieved GB/s, ratio to the copy
rate, the fraction of compute hidden under copies, and what the two-stream model of the plan predicts
(`pass_timeline`) from the measured copy and compute times. Each timed pass starts from an empty ring (no
prefetch). Finally a resident-layer sweep for the full-width 80-layer model under each `--vram-budgets`
value, with its pass floor at the measured copy rate.

Without a GPU it still runs: the "copy" is a host memcpy issued in line with the compute (nothing
overlaps), compute is CPU float32 (CPU half-precision matmuls are ~70x slower), and by default the layer
widths are divided by 4 (`--width-divisor`) so two layers finish in well under a minute on two cores.
Those numbers only check the machinery; they say nothing about PCIe or GPU speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from core.cli.options import add_threads_argument
from core.modeling.kv_cache import InPlaceKVCache
from core.offload.gptq import DequantScratch, GPTQLinear, GPTQSettings, dequantize_into
from core.offload.gptq_kernel import fused_dequant_available
from core.offload.gptq_matmul import fused_matmul_available
from core.offload.layout import LayerBinding, layer_layout
from core.planning.residency import plan_residency
from core.offload.schedule import pass_timeline, plan_pass
from core.offload.streaming import LayerStreamer
from core.planning.host_memory import HOST_MARGIN_BYTES, check_host_memory
from core.offload.weight_store import HostWeightStore
from core.system.threads import apply_torch_threads

GB = 1e9
FULL_MODEL_LAYERS = 80
NO_GPU_NOTE = (
    "NOTE: no CUDA GPU present. 'copy' is a host memcpy run in line with the compute (no overlap is "
    "possible), compute is CPU float32 at reduced width; these numbers check the machinery only and say "
    "nothing about PCIe bandwidth or GPU speed."
)


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _float_list(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=["gptq", "fp16", "both"], default="both", help="weight format of the synthetic layers")
    parser.add_argument("--layers", type=int, default=None, help="layers in the host store (default: 8 on a GPU, 2 on the CPU)")
    parser.add_argument("--tree-sizes", type=_int_list, default=None,
                        help="tokens per pass, comma separated (default: 1,64,256,1024,2048 on a GPU, 1,16,64 on the CPU)")
    parser.add_argument("--vram-budgets", type=_float_list, default=[8.0, 12.0, 16.0, 20.0],
                        help="GB of VRAM for the target's weights, for the resident-layer sweep of an 80-layer model")
    parser.add_argument("--bits", type=int, choices=[2, 3, 4, 8], default=4, help="GPTQ bits of the synthetic layers")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:i]")
    parser.add_argument("--context", type=int, default=256, help="tokens already in the KV cache under each pass")
    parser.add_argument("--repeats", type=int, default=None, help="timed passes per tree size (default: 5 on a GPU, 1 on the CPU)")
    parser.add_argument("--width-divisor", type=int, default=None,
                        help="divide hidden/intermediate/heads by this (default: 1 on a GPU = real 70B shape, 4 on the CPU)")
    add_threads_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


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
        hidden_size=8192 // divisor, intermediate_size=28672 // divisor, num_attention_heads=64 // divisor,
        num_key_value_heads=max(1, 8 // divisor), head_dim=128, vocab_size=32000, num_hidden_layers=FULL_MODEL_LAYERS,
        max_position_embeddings=4096,
    )
    config._attn_implementation = "sdpa"
    return config


def _build_layers(config: LlamaConfig, count: int, fmt: str, dtype: torch.dtype, scratch: DequantScratch,
                  bits: int = 4) -> nn.ModuleList:
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
    """Bytes/s of one layer's host -> device copy (pinned DMA on a GPU, memcpy on the CPU)."""
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
                out = m.scratch.matrix(m.in_features, m.out_features, dtype, device)
                g_idx = m.g_idx if m.mode == "gather" else None
                dequantize_into(out, m.qweight, m.qzeros, m.scales, g_idx, m.bits, m.group_size, m.mode, m.zero_offset)
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
        results.append({"rows": rows, "fused": fused, "engine_s": median_seconds(engine, device, repeats),
                        "dequantise_gemm_s": median_seconds(eager, device, repeats)})
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

    def __init__(self, config: LlamaConfig, tree: int, context: int, count: int, device: torch.device, dtype: torch.dtype) -> None:
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
        out = layer(hidden, attention_mask=self.mask, position_embeddings=self.rope, position_ids=self.positions,
                    past_key_values=self.cache, use_cache=True)
        return out[0] if isinstance(out, tuple) else out

    def reset(self) -> None:
        self.cache.crop_to(self.context)


@torch.no_grad()
def measure_format(fmt: str, args, config, device, dtype, tree_sizes, copy_repeats) -> dict:
    scratch = DequantScratch()
    layers = _build_layers(config, args.layers, fmt, dtype, scratch, args.bits)
    layouts = [layer_layout(layer) for layer in layers]
    layer_bytes = layouts[0].nbytes
    check_host_memory(sum(layout.nbytes for layout in layouts) + HOST_MARGIN_BYTES, what=f"{args.layers} synthetic layers")
    store = HostWeightStore(layouts, pin=device.type == "cuda")
    _fill_random(store, fmt)
    if fmt == "gptq":
        largest = max(m.in_features * m.out_features for m in layers[0].modules() if isinstance(m, GPTQLinear))
        scratch.reserve(largest, dtype, device)
    copy_rate = _copy_rate(store, device, copy_repeats)

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
        dequant["s_per_layer"] = _time_dequant(layers[0], dtype, device, args.repeats, reference=False)
        if fused:
            dequant["reference_s_per_layer"] = _time_dequant(layers[0], dtype, device, args.repeats, reference=True)
        dequant["draft_matmuls"] = _time_draft_matmuls(layers[0], dtype, device, args.repeats)
    streamer = LayerStreamer(store, layers, resident=(), n_slots=2, device=device, stream=True, auto_prefetch=False)
    rows = []
    for tree in tree_sizes:
        inputs = PassInputs(config, tree, args.context, args.layers, device, dtype)
        LayerBinding(layers[0], layouts[0]).bind(layouts[0].views(resident))
        compute_times = []
        for repeat in range(args.repeats + 1):
            sync_device(device)
            start = time.perf_counter()
            hidden = inputs.hidden
            for _ in range(args.layers):
                hidden = inputs.run_layer(layers[0], hidden)
                inputs.reset()  # layer 0's cache again holds only the context (the mask covers context + tree)
            sync_device(device)
            if repeat:  # the first run warms up kernels and allocations
                compute_times.append(time.perf_counter() - start)
            inputs.reset()
        pass_times = []
        for repeat in range(args.repeats + 1):
            sync_device(device)
            start = time.perf_counter()
            hidden = inputs.hidden
            for layer in streamer.run(layers):
                hidden = inputs.run_layer(layer, hidden)
            sync_device(device)
            if repeat:
                pass_times.append(time.perf_counter() - start)
            inputs.reset()
        pass_s, compute_s = statistics.median(pass_times), statistics.median(compute_times)
        copy_s = streamer.bytes_streamed_per_pass / copy_rate
        hidden_fraction = min(1.0, max(0.0, (copy_s + compute_s - pass_s) / compute_s)) if compute_s > 0 else 0.0
        per_layer_copy, per_layer_compute = layer_bytes / copy_rate, compute_s / args.layers
        model_s = pass_timeline(plan_pass(args.layers, (), 2), [per_layer_copy] * args.layers, [per_layer_compute] * args.layers)
        rows.append(PassRow(
            tree_size=tree, pass_s=pass_s, achieved_gbps=streamer.bytes_streamed_per_pass / pass_s / GB,
            ratio_to_copy=(streamer.bytes_streamed_per_pass / pass_s) / copy_rate, compute_s=compute_s, copy_s=copy_s,
            hidden_fraction=hidden_fraction, model_s=model_s, projected_80_layer_s=pass_s * FULL_MODEL_LAYERS / args.layers,
            dequant_s=dequant["s_per_layer"] * args.layers,
        ))
    sweep = _residency_sweep(fmt, args.vram_budgets, copy_rate, args.bits)
    return {
        "format": _format_label(fmt, device, args.bits),
        "layer_bytes": layer_bytes, "pinned": store.pinned, "copy_rate_gbps": copy_rate / GB,
        "dequant_path": dequant["path"], "dequant_s_per_layer": dequant["s_per_layer"],
        "reference_dequant_s_per_layer": dequant["reference_s_per_layer"],
        "draft_matmuls": dequant.get("draft_matmuls", []),
        "passes": [asdict(row) for row in rows], "residency": sweep,
    }


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
        sweep.append(asdict(ResidencyRow(
            budget_gb=budget, resident_layers=len(plan.resident), streamed_gb_per_pass=plan.streamed_bytes_per_pass / GB,
            floor_s_per_pass=plan.streamed_bytes_per_pass / copy_rate,
        )))
    return sweep


def _print_tables(result: dict) -> None:
    print(f"device: {result['device']}  layers: {result['layers']}  width divisor: {result['width_divisor']}  "
          f"context: {result['context']}  compute dtype: {result['dtype']}")
    if result.get("note"):
        print(result["note"])
    for fmt in result["formats"]:
        pinned = "pinned" if fmt["pinned"] else "not pinned"
        print(f"\n[{fmt['format']}] layer {fmt['layer_bytes'] / GB:.3f} GB, host->device copy rate "
              f"{fmt['copy_rate_gbps']:.2f} GB/s ({pinned})")
        if fmt["dequant_path"]:
            reference = fmt["reference_dequant_s_per_layer"]
            against = f" (eager reference: {reference * 1000:.2f} ms)" if reference is not None else ""
            print(f"dequantisation alone ({fmt['dequant_path']}): {fmt['dequant_s_per_layer'] * 1000:.2f} ms per layer{against}")
        for row in fmt["draft_matmuls"]:
            path = "fused small-batch kernel" if row["fused"] else "dequantise + GEMM (no fused kernel here)"
            print(f"draft batch of {row['rows']:>3} rows through the layer's linears: {row['engine_s'] * 1000:.2f} ms "
                  f"({path}); dequantise + GEMM {row['dequantise_gemm_s'] * 1000:.2f} ms")
        print(f"{'tree':>6} {'s/pass':>9} {'GB/s':>7} {'/copy':>6} {'compute s':>10} {'dequant s':>10} {'copy s':>8} "
              f"{'hidden':>7} {'model s':>8} {'80-layer s':>11}")
        for row in fmt["passes"]:
            print(f"{row['tree_size']:>6} {row['pass_s']:>9.4f} {row['achieved_gbps']:>7.2f} {row['ratio_to_copy']:>6.2f} "
                  f"{row['compute_s']:>10.4f} {row['dequant_s']:>10.4f} {row['copy_s']:>8.4f} {row['hidden_fraction']:>7.2f} "
                  f"{row['model_s']:>8.4f} {row['projected_80_layer_s']:>11.3f}")
        print(f"resident layers of the full-width {FULL_MODEL_LAYERS}-layer model per VRAM budget for its weights "
              f"(floor = streamed bytes / copy rate above):")
        for row in fmt["residency"]:
            if "error" in row:
                print(f"  {row['budget_gb']:>5.1f} GB: does not fit ({row['error'].split(':')[0]})")
            else:
                print(f"  {row['budget_gb']:>5.1f} GB: {row['resident_layers']:>2} resident, "
                      f"{row['streamed_gb_per_pass']:.2f} GB streamed per pass, floor {row['floor_s_per_pass']:.3f} s/pass")


def run(args: argparse.Namespace) -> int:
    apply_torch_threads(args.threads)
    requested = args.device
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda was given but no CUDA GPU is available")
        return 2
    gpu = device.type == "cuda"
    args.layers = args.layers or (8 if gpu else 2)
    args.repeats = args.repeats or (5 if gpu else 1)
    args.width_divisor = args.width_divisor or (1 if gpu else 4)
    tree_sizes = args.tree_sizes or ([1, 64, 256, 1024, 2048] if gpu else [1, 16, 64])
    if args.layers < 1 or args.width_divisor not in (1, 2, 4, 8):
        print("error: --layers must be >= 1 and --width-divisor one of 1, 2, 4, 8")
        return 2
    dtype = torch.float16 if gpu else torch.float32
    config = layer_config(args.width_divisor)
    formats = ["gptq", "fp16"] if args.format == "both" else [args.format]
    result = {
        "device": torch.cuda.get_device_name(device) if gpu else "cpu",
        "note": None if gpu else NO_GPU_NOTE,
        "layers": args.layers, "width_divisor": args.width_divisor, "context": args.context, "dtype": str(dtype),
        "formats": [measure_format(fmt, args, config, device, dtype, tree_sizes, args.repeats) for fmt in formats],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_tables(result)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specexec bench offload", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
