"""Which kernel a 4-bit draft multiplies with on a card (torch-free: the fit prediction in the app's process
prices the kernel the engine will run, by this same rule).

The kernels, in the order they are expected to be fastest where nothing was measured:
- TINYGEMM: torch's own int4 kernel (`aten._weight_int4pack_mm`, core.offload.int4pack), in every CUDA wheel
  of torch, Windows included, from compute capability 8.0 (Ampere) on;
- FUSED: this engine's Triton matmul (core.offload.gptq_matmul), where Triton imports;
- DEQUANTISE: the Triton dequantisation kernel, then a cuBLAS GEMM;
- EAGER_DEQUANTISE: PyTorch operations unpack the weights, then a GEMM (no Triton: torch's Windows builds).
Where the engine, `specexec hw --measure` or the doctor measured the kernels on the card, the fastest
measured one at the search's width runs instead (core.offload.draft_kernels).

A kernel's rate, measured or assumed, is in one unit everywhere (the engine's timing at load, `hw --measure`,
the doctor, the speed model): bytes of packed weights per second, counting each pass the kernel makes over
them (`weight_passes`). FUSED and the dequantisations pass once whatever the rows; TINYGEMM's time grows
with the rows: on an H100 (docs/benchmarks.md, issue 37, "First run") an 8B draft layer took 218, 443, 637
and 1,113 us at 1, 16, 32 and 64 rows, which (rows + 15) / 16 passes fit within 3% (496-522 GB/s in this unit
at each row count, 508 over all four), where whole 16-row tiles (1, 1, 2, 4) miss by up to 50%.
"""

from __future__ import annotations

from core.planning.graph_plan import DEFAULT_EXPAND

TINYGEMM = "tinygemm"
FUSED = "fused"
DEQUANTISE = "dequantise"
EAGER_DEQUANTISE = "eager dequantise"
ALL_KERNELS = (TINYGEMM, FUSED, DEQUANTISE, EAGER_DEQUANTISE)
TINYGEMM_TILE_ROWS = 16


def weight_passes(kernel: str, rows: int) -> float:
    """How many times `kernel` reads a weight matrix's packed bytes multiplying `rows` rows (module docstring)."""
    return (rows + TINYGEMM_TILE_ROWS - 1) / TINYGEMM_TILE_ROWS if kernel == TINYGEMM else 1.0


def available_kernels(compute_capability: tuple[int, int] | None, triton: bool) -> tuple[str, ...]:
    """The kernels a 4-bit draft can use on a CUDA card of this compute capability (None: unknown, taken as a
    current card), best expected first. The fused matmul needs Triton's tensor-core dot (8.0 and newer) to
    beat a dequantisation on a draft's batches (core.offload.gptq_matmul.PRE_AMPERE_MAX_ROWS)."""
    modern = compute_capability is None or compute_capability[0] >= 8
    kernels = [TINYGEMM] if modern else []
    if triton:
        kernels += [FUSED, DEQUANTISE] if modern else [DEQUANTISE]
    return (*kernels, EAGER_DEQUANTISE)


def choose_kernel(
    available: tuple[str, ...], measured: dict[str, float] | None = None, rows: int = DEFAULT_EXPAND
) -> str:
    """The `available` kernel that multiplies `rows` rows (default: the search's width) fastest by its
    measured rate (`measured`: the module docstring's unit), or, with none of them measured, the first
    available."""
    rates = {name: rate for name, rate in (measured or {}).items() if name in available and rate and rate > 0}
    if not rates:
        return available[0]
    return max(rates, key=lambda name: rates[name] / weight_passes(name, rows))


def parse_capability(text: str | None) -> tuple[int, int] | None:
    """'8.6' -> (8, 6); None or anything unreadable -> None."""
    try:
        major, minor = (text or "").split(".")
        return int(major), int(minor)
    except ValueError:
        return None
