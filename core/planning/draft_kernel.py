"""Which kernel a 4-bit draft multiplies with on a card (torch-free: the fit prediction in the app's process
prices the kernel the engine will run, by this same rule).

The kernels, in the order they are expected to be fastest where nothing was measured:
- TINYGEMM: torch's own int4 kernel (`aten._weight_int4pack_mm`, core.offload.int4pack), in every CUDA wheel
  of torch, Windows included, from compute capability 8.0 (Ampere) on;
- FUSED: this engine's Triton matmul (core.offload.gptq_matmul), where Triton imports;
- DEQUANTISE: the Triton dequantisation kernel, then a cuBLAS GEMM;
- EAGER_DEQUANTISE: PyTorch operations unpack the weights, then a GEMM (no Triton: torch's Windows builds).
Where the engine, `specexec hw --measure` or the doctor measured the kernels on the card, the fastest
measured one runs instead (core.offload.draft_kernels).
"""

from __future__ import annotations

TINYGEMM = "tinygemm"
FUSED = "fused"
DEQUANTISE = "dequantise"
EAGER_DEQUANTISE = "eager dequantise"
ALL_KERNELS = (TINYGEMM, FUSED, DEQUANTISE, EAGER_DEQUANTISE)


def available_kernels(compute_capability: tuple[int, int] | None, triton: bool) -> tuple[str, ...]:
    """The kernels a 4-bit draft can use on a CUDA card of this compute capability (None: unknown, taken as a
    current card), best expected first. The fused matmul needs Triton's tensor-core dot (8.0 and newer) to
    beat a dequantisation on a draft's batches (core.offload.gptq_matmul.PRE_AMPERE_MAX_ROWS)."""
    modern = compute_capability is None or compute_capability[0] >= 8
    kernels = [TINYGEMM] if modern else []
    if triton:
        kernels += [FUSED, DEQUANTISE] if modern else [DEQUANTISE]
    return (*kernels, EAGER_DEQUANTISE)


def choose_kernel(available: tuple[str, ...], measured: dict[str, float] | None = None) -> str:
    """The fastest measured of the `available` kernels (`measured`: bytes of weights read per second), or,
    with none of them measured, the first available."""
    rates = {name: rate for name, rate in (measured or {}).items() if name in available and rate and rate > 0}
    return max(rates, key=rates.__getitem__) if rates else available[0]


def parse_capability(text: str | None) -> tuple[int, int] | None:
    """'8.6' -> (8, 6); None or anything unreadable -> None."""
    try:
        major, minor = (text or "").split(".")
        return int(major), int(minor)
    except ValueError:
        return None
