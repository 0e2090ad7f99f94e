"""`specexec bench formats`: what converting AWQ and compressed-tensors checkpoints into the GPTQ layout costs,
per decoder layer of a 70B model, on this machine's processor.

The engine converts each quantised tensor as it is read (core.offload.quant_formats), so the host store holds
the GPTQ layout and every streamed pass moves the same bytes whatever the checkpoint's format. The other place
it could convert is per streamed layer, on every pass. This benchmark gives the numbers that decide it: the
seconds one Llama-3.3-70B layer (q/k/v/o, gate/up/down; 4-bit, group 128) takes to convert on the processor,
against the seconds the loader spends on that layer anyway (copying its packed bytes into the store) and the
host-to-device copy of the layer every pass would make at PCIe 4.0 x16 (engineering-facts.md: ~25 GB/s).
The packed tensors are random: conversion moves bits, so its speed does not depend on their values.
`--device cuda` converts on the GPU, as the loader does when it loads onto one.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from core.modeling.model_format import QuantScheme

if TYPE_CHECKING:  # torch is imported where it is used: `--help` answers without it
    import torch

    from core.offload.quant_formats import CheckpointFormat

HIDDEN, INTERMEDIATE, KV = 8192, 28672, 1024  # Llama 3.3 70B
LINEARS = {
    "q_proj": (HIDDEN, HIDDEN),
    "k_proj": (HIDDEN, KV),
    "v_proj": (HIDDEN, KV),
    "o_proj": (HIDDEN, HIDDEN),
    "gate_proj": (HIDDEN, INTERMEDIATE),
    "up_proj": (HIDDEN, INTERMEDIATE),
    "down_proj": (INTERMEDIATE, HIDDEN),
}
GROUP = 128
LAYERS_70B = 80
PCIE4_BYTES_PER_S = 25e9
FORMATS = {
    "gptq": QuantScheme("gptq", 4, GROUP, label="GPTQ 4-bit (the layout itself: a copy)"),
    "awq": QuantScheme("awq", 4, GROUP, sym=False, zero_offset=0, label="AWQ GEMM 4-bit"),
    "ct-sym": QuantScheme("compressed-tensors", 4, GROUP, zero_offset=0, label="compressed-tensors W4A16 symmetric"),
    "ct-asym": QuantScheme(
        "compressed-tensors", 4, GROUP, sym=False, zero_offset=0, label="compressed-tensors W4A16 asymmetric"
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--formats",
        nargs="+",
        choices=list(FORMATS),
        default=list(FORMATS),
        help="checkpoint formats to convert (default: all)",
    )
    parser.add_argument("--repeat", type=int, default=2, help="timed conversions of the layer per format (best kept)")
    parser.add_argument(
        "--device",
        default="cpu",
        help="where to convert: cpu (default) or cuda, as the loader does when it loads onto a GPU",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def _checkpoint_tensors(
    method: str, sym: bool, generator: torch.Generator, device: torch.device
) -> dict[str, tuple[torch.Tensor, tuple]]:
    """name -> (the checkpoint tensor on `device`, the GPTQLinear buffer shape it converts into) for one layer."""

    def words(*shape: int) -> torch.Tensor:
        return torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32, generator=generator).to(device)

    tensors = {}
    for name, (k, n) in LINEARS.items():
        groups = k // GROUP
        buffers = {"qweight": (k // 8, n), "qzeros": (groups, n // 8), "scales": (groups, n)}
        scales = torch.rand(groups, n, generator=generator).half().to(device)
        if method in ("gptq", "awq"):
            stored = {
                "qweight": words(k // 8, n) if method == "gptq" else words(k, n // 8),
                "qzeros": words(groups, n // 8),
                "scales": scales,
            }
        else:
            stored = {"weight_packed": words(n, k // 8), "weight_scale": scales.t().contiguous()}
            if not sym:
                stored["weight_zero_point"] = words(n // 8, groups)
        entry_of = {"weight_packed": "qweight", "weight_scale": "scales", "weight_zero_point": "qzeros"}
        for part, tensor in stored.items():
            tensors[f"model.layers.0.mlp.{name}.{part}"] = (tensor, buffers[entry_of.get(part, part)])
    return tensors


def convert_layer(fmt: CheckpointFormat, tensors: dict, device: torch.device) -> float:
    """Seconds to route and convert every tensor of the layer into buffers on `device`, as the loader's fill
    does (on a GPU: waited for, so the figure is the work's, not the launches')."""
    import torch

    buffers = {
        key: torch.empty(shape, dtype=tensor.dtype if tensor.is_floating_point() else torch.int32, device=device)
        for key, (tensor, shape) in tensors.items()
    }
    _synchronize(device)
    start = time.perf_counter()
    for key, (tensor, shape) in tensors.items():
        _, convert = fmt.translate(key)
        buffers[key].copy_(convert(tensor, shape) if convert is not None else tensor)
    _synchronize(device)
    return time.perf_counter() - start


def _synchronize(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)  # a benchmark's own wait: nothing else runs


def run(args: argparse.Namespace) -> int:
    import torch

    from core.offload.quant_formats import CheckpointFormat

    generator = torch.Generator().manual_seed(0)
    device = torch.device(args.device)
    rows = []
    for name in args.formats:
        scheme = FORMATS[name]
        tensors = _checkpoint_tensors(scheme.method, scheme.sym, generator, device)
        layer_bytes = sum(tensor.numel() * tensor.element_size() for tensor, _ in tensors.values())
        convert_layer(CheckpointFormat(scheme), tensors, device)  # warm-up: allocator, kernels, page faults
        seconds = min(convert_layer(CheckpointFormat(scheme), tensors, device) for _ in range(args.repeat))
        rows.append(
            {
                "format": name,
                "label": scheme.label,
                "layer_bytes": layer_bytes,
                "seconds_per_layer": seconds,
                "gb_per_s": layer_bytes / seconds / 1e9,
                "seconds_70b_load": seconds * LAYERS_70B,
                "pcie4_copy_seconds_per_layer": layer_bytes / PCIE4_BYTES_PER_S,
            }
        )
        del tensors
    if args.json:
        print(json.dumps({"device": str(device), "torch_threads": torch.get_num_threads(), "rows": rows}, indent=2))
        return 0
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"the processor ({torch.get_num_threads()} threads)"
    )
    print(
        f"one Llama-3.3-70B decoder layer, 4-bit group {GROUP}, converted on {where}; best of {args.repeat} "
        "after a warm-up"
    )
    print(f"{'format':<44}{'MB':>8}{'s/layer':>10}{'GB/s':>8}{'80 layers':>11}{'PCIe4 copy':>12}")
    for row in rows:
        copy_ms = row["pcie4_copy_seconds_per_layer"] * 1e3
        print(
            f"{row['label']:<44}{row['layer_bytes'] / 1e6:>8.0f}{row['seconds_per_layer']:>10.3f}"
            f"{row['gb_per_s']:>8.2f}{row['seconds_70b_load']:>10.1f}s{copy_ms:>10.1f}ms"
        )
    return 0
