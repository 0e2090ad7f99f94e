"""How fast a GPU reads its memory and multiplies 16-bit matrices, by name: the speed model's GPU figures.

NVML gives a card's name but neither its memory bandwidth nor its tensor throughput, so common cards are
listed here with their datasheet figures (NVIDIA's product pages and architecture whitepapers): memory
bandwidth, and dense fp16 tensor-core throughput with float32 accumulation, which is what PyTorch's fp16 and
bf16 GEMMs use (GeForce cards run it at half their fp16-accumulate rate). A card that is not listed gets a
mid-range estimate that says it is one. The speed model applies MEMORY_EFFICIENCY and MATMUL_EFFICIENCY
(what large reads and large GEMMs sustain in practice) to these peaks.
"""

from __future__ import annotations

from dataclasses import dataclass

# (name fragment as NVML spells it, memory GB/s, dense fp16 tensor TFLOP/s with fp32 accumulation); the most
# specific fragment first, since "RTX 4060 Ti" also contains "RTX 4060".
_CARDS: tuple[tuple[str, float, float], ...] = (
    ("H200", 4800, 989),
    ("H100 PCIe", 2000, 756),
    ("H100", 3350, 989),
    ("A100-SXM4-80GB", 2039, 312),
    ("A100 80GB PCIe", 1935, 312),
    ("A100", 1555, 312),
    ("L40S", 864, 362),
    ("L40", 864, 181),
    ("L4", 300, 121),
    ("A10G", 600, 70),
    ("A10", 600, 125),
    ("RTX 6000 Ada", 960, 364),
    ("RTX A6000", 768, 155),
    ("RTX A5000", 768, 111),
    ("RTX A4000", 448, 77),
    ("T4", 320, 65),
    ("V100", 900, 125),
    ("RTX 5090", 1792, 210),
    ("RTX 5080", 960, 113),
    ("RTX 5070 Ti", 896, 88),
    ("RTX 5070", 672, 62),
    ("RTX 4090", 1008, 165),
    ("RTX 4080 SUPER", 736, 104),
    ("RTX 4080", 717, 97),
    ("RTX 4070 Ti SUPER", 672, 88),
    ("RTX 4070 Ti", 504, 80),
    ("RTX 4070 SUPER", 504, 71),
    ("RTX 4070", 504, 58),
    ("RTX 4060 Ti", 288, 44),
    ("RTX 4060", 272, 30),
    ("RTX 3090 Ti", 1008, 40),
    ("RTX 3090", 936, 36),
    ("RTX 3080 Ti", 912, 34),
    ("RTX 3080", 760, 30),
    ("RTX 3070 Ti", 608, 22),
    ("RTX 3070", 448, 20),
    ("RTX 3060 Ti", 448, 16),
    ("RTX 3060", 360, 13),
    ("RTX 2080 Ti", 616, 28),
    ("RTX 2080", 448, 20),
    ("RTX 2070", 448, 15),
    ("RTX 2060", 336, 13),
)
# A card not in the list: about an RTX 3060-4060 Ti.
_UNKNOWN = (360.0, 20.0)


@dataclass(frozen=True)
class GpuSpecs:
    """Peak memory bandwidth (bytes/s) and fp16 tensor throughput (FLOP/s), and where they come from."""

    memory_bytes_per_second: float
    flops: float
    source: str


def gpu_specs(name: str) -> GpuSpecs:
    """The listed figures for a card named `name` (NVML's name, e.g. "NVIDIA GeForce RTX 4090"), or the
    estimate for an unknown card."""
    for fragment, memory, tflops in _CARDS:
        if fragment.lower() in name.lower():
            return GpuSpecs(memory * 1e9, tflops * 1e12, f"datasheet figures for the {fragment}")
    memory, tflops = _UNKNOWN
    return GpuSpecs(
        memory * 1e9, tflops * 1e12, f"estimate for an unlisted card ({memory:.0f} GB/s, {tflops:.0f} TFLOP/s assumed)"
    )
