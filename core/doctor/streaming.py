"""Check: the ratio the product lives on. A 70B-shaped GPTQ layer streamed and computed, against its copy floor.

Llama-2-70B-shaped decoder layers (GPTQ 4-bit, group 128, act-order) in pinned host RAM, streamed through the
engine's own `LayerStreamer` while each one computes a tree of TREE_TOKENS tokens (the machinery of
`specexec bench offload`). Ratio = seconds per streamed layer / seconds to copy it. Near 1 means compute hides
under the copies, as designed; well above 1 means it does not (a slow GPU, copies and compute not overlapping,
or host stalls). (The draft is checked by core/doctor/draft.py and core/doctor/graphs.py, through the path
the engine runs: its fused 4-bit product and its captured forwards. An eager 16-bit forward, timed here
before, measured a path the engine does not take on a GPU.)

The ratio only ever makes a check DEGRADED: a slow GPU is still faster than the processor. The limit is a
first guess from the paper's figures and engineering facts; an H100 measured 1.17 (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status

NAME = "streaming"
TREE_TOKENS = 256
TARGET_LAYERS = 4
REPEATS = 3
CONTEXT = 256
# Provisional limit (see the module docstring).
TARGET_RATIO_LIMIT = 1.3


@dataclass(frozen=True)
class StreamingMeasurement:
    """layer_bytes, copy_bytes_per_second (one layer, pinned), pass_seconds for TARGET_LAYERS streamed layers,
    copy_seconds for their bytes. width_divisor > 1: shrunk layers (CPU)."""

    device: str
    width_divisor: int
    tree_tokens: int
    layer_bytes: int
    copy_bytes_per_second: float
    pass_seconds: float
    copy_seconds: float

    @property
    def target_ratio(self) -> float:
        return self.pass_seconds / self.copy_seconds


def measure(
    device, width_divisor: int = 1, repeats: int = REPEATS, target_layers: int = TARGET_LAYERS
) -> StreamingMeasurement:
    """On a GPU at full width in float16; the CPU (tests) runs shrunk layers in float32."""
    import torch

    from core.offload.pass_timing import layer_config, measure_format

    dtype = torch.float16 if device.type == "cuda" else torch.float32
    with torch.no_grad():
        result = measure_format(
            "gptq",
            layer_config(width_divisor),
            device,
            dtype,
            [TREE_TOKENS],
            layers=target_layers,
            bits=4,
            repeats=repeats,
            context=CONTEXT,
        )
    row = result["passes"][0]
    return StreamingMeasurement(
        device=str(device),
        width_divisor=width_divisor,
        tree_tokens=TREE_TOKENS,
        layer_bytes=result["layer_bytes"],
        copy_bytes_per_second=result["copy_rate_gbps"] * 1e9,
        pass_seconds=row["pass_s"],
        copy_seconds=row["copy_s"],
    )


def decide(m: StreamingMeasurement) -> CheckResult:
    measured = {**asdict(m), "target_ratio": m.target_ratio}
    if m.target_ratio > TARGET_RATIO_LIMIT:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"It runs slower than it should: a streamed 70B layer takes {m.target_ratio:.1f} times its "
            "copy time (computing does not hide under the copies as it should).",
            measured,
        )
    return CheckResult(
        NAME,
        Status.PASS,
        f"Streaming keeps up with the copies (a streamed layer takes {m.target_ratio:.2f}x its copy time).",
        measured,
    )
