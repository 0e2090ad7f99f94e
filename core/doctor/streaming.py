"""Check: the ratio the product lives on. A 70B-shaped GPTQ layer streamed and computed, against its copy
floor; and a draft forward, against its memory floor.

- Target: Llama-2-70B-shaped decoder layers (GPTQ 4-bit, group 128, act-order) in pinned host RAM, streamed
  through the engine's own `LayerStreamer` while each one computes a tree of TREE_TOKENS tokens (the machinery
  of `specexec bench offload`). Ratio = seconds per streamed layer / seconds to copy it. Near 1 means compute
  hides under the copies, as designed; well above 1 means it does not (a slow GPU, copies and compute not
  overlapping, or host stalls).
- Draft: DRAFT_LAYERS Llama-2-7B-shaped float16 layers resident on the GPU, one forward of DRAFT_TOKENS tokens.
  Ratio = its seconds / (its weight bytes / the device's own copy rate): how far launch and host time keep
  it from the memory floor (the share CUDA graphs win back).

Both ratios only ever make a check DEGRADED: a slow GPU is still faster than the processor. The limits are
first guesses from the paper's figures and engineering facts, not measured on any GPU yet; the first users'
reports are how they get set.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status

NAME = "streaming"
TREE_TOKENS = 256
TARGET_LAYERS = 4
DRAFT_LAYERS = 4
DRAFT_TOKENS = 16
REPEATS = 3
CONTEXT = 256
# Provisional limits (see the module docstring).
TARGET_RATIO_LIMIT = 1.3
DRAFT_RATIO_LIMIT = 4.0


@dataclass(frozen=True)
class StreamingMeasurement:
    """Target: layer_bytes, copy_bytes_per_second (one layer, pinned), pass_seconds for TARGET_LAYERS streamed
    layers, copy_seconds for their bytes. Draft: draft_bytes (weights of its layers), device_bytes_per_second
    (device-to-device copy, read + write), draft_seconds per forward. width_divisor > 1: shrunk layers (CPU)."""

    device: str
    width_divisor: int
    tree_tokens: int
    layer_bytes: int
    copy_bytes_per_second: float
    pass_seconds: float
    copy_seconds: float
    draft_tokens: int
    draft_bytes: int
    device_bytes_per_second: float
    draft_seconds: float

    @property
    def target_ratio(self) -> float:
        return self.pass_seconds / self.copy_seconds

    @property
    def draft_ratio(self) -> float:
        return self.draft_seconds / (self.draft_bytes / self.device_bytes_per_second)


def _draft(device, dtype, divisor: int, repeats: int) -> tuple[int, float, float]:
    """(weight bytes, device copy rate, seconds per forward) of DRAFT_LAYERS 7B-shaped resident layers."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    from core.bench.offload import PassInputs, median_seconds

    config = LlamaConfig(hidden_size=4096 // divisor, intermediate_size=11008 // divisor,
                         num_attention_heads=32 // divisor, num_key_value_heads=32 // divisor, head_dim=128,
                         num_hidden_layers=DRAFT_LAYERS, max_position_embeddings=4096)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        layers = [LlamaDecoderLayer(config, i).to(dtype).eval() for i in range(DRAFT_LAYERS)]
    weight_bytes = sum(p.numel() * p.element_size() for layer in layers for p in layer.parameters())
    inputs = PassInputs(config, DRAFT_TOKENS, CONTEXT, DRAFT_LAYERS, device, dtype)

    def forward() -> None:
        hidden = inputs.hidden
        for layer in layers:
            hidden = inputs.run_layer(layer, hidden)
        inputs.reset()

    block = torch.empty(weight_bytes // len(layers), dtype=torch.uint8, device=device)
    copy = torch.empty_like(block)
    copy_seconds = median_seconds(lambda: copy.copy_(block), device, repeats)
    with torch.no_grad():
        seconds = median_seconds(forward, device, repeats)
    return weight_bytes, 2 * block.numel() / copy_seconds, seconds


def measure(device, width_divisor: int = 1, repeats: int = REPEATS, target_layers: int = TARGET_LAYERS) -> StreamingMeasurement:
    """On a GPU at full width in float16; the CPU (tests) runs shrunk layers in float32."""
    import torch

    from core.bench.offload import layer_config, measure_format

    dtype = torch.float16 if device.type == "cuda" else torch.float32
    args = argparse.Namespace(layers=target_layers, bits=4, repeats=repeats, context=CONTEXT, vram_budgets=[])
    with torch.no_grad():
        result = measure_format("gptq", args, layer_config(width_divisor), device, dtype, [TREE_TOKENS], repeats)
    row = result["passes"][0]
    draft_bytes, device_rate, draft_seconds = _draft(device, dtype, width_divisor, repeats)
    return StreamingMeasurement(
        device=str(device), width_divisor=width_divisor, tree_tokens=TREE_TOKENS, layer_bytes=result["layer_bytes"],
        copy_bytes_per_second=result["copy_rate_gbps"] * 1e9, pass_seconds=row["pass_s"], copy_seconds=row["copy_s"],
        draft_tokens=DRAFT_TOKENS, draft_bytes=draft_bytes, device_bytes_per_second=device_rate,
        draft_seconds=draft_seconds,
    )


def decide(m: StreamingMeasurement) -> CheckResult:
    measured = {**asdict(m), "target_ratio": m.target_ratio, "draft_ratio": m.draft_ratio}
    slow = []
    if m.target_ratio > TARGET_RATIO_LIMIT:
        slow.append(f"a streamed 70B layer takes {m.target_ratio:.1f} times its copy time (computing does not hide "
                    "under the copies as it should)")
    if m.draft_ratio > DRAFT_RATIO_LIMIT:
        slow.append(f"a draft forward takes {m.draft_ratio:.1f} times its memory time (the processor cannot hand "
                    "the GPU work fast enough)")
    figures = f"streamed layer {m.target_ratio:.2f}x its copy time, draft forward {m.draft_ratio:.1f}x its memory time"
    if slow:
        return CheckResult(NAME, Status.DEGRADED, "It runs slower than it should: " + "; ".join(slow) + ".",
                           measured)
    return CheckResult(NAME, Status.PASS, f"Streaming keeps up with the copies ({figures}).", measured)
