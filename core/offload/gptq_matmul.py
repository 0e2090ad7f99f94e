"""Fused small-batch GPTQ matrix multiply: y = x @ W for 1-64 rows of x, W dequantised in registers.

A draft model's forward multiplies 1-256 rows (one per tree node it expands) by every weight matrix; up to
FUSED_MATMUL_MAX_ROWS rows (most of its forwards) come here. The eager route (`GPTQLinear.dequantize` then
one GEMM) writes W [K, N] in 16 bits and reads it back: for 4-bit
weights that moves 0.25 + 1 + 1 = 2.25x the bytes of a 16-bit model, where the packed weights alone are
0.25x. This kernel reads the packed words, zeros and scales once per tile of rows of x, dequantises the
tile in registers (the same `_dequant_tile` the dequantisation kernel uses, so W is bit for bit the
reference's W in the compute dtype) and feeds it to `tl.dot` with a float32 accumulator. Nothing of W is
written to memory. (exllama, Marlin and vLLM's GPTQ kernels do the same below ~50-256 rows; gptqmodel's
Triton and Marlin kernels need torch >= 2.14.1, above this project's pin, and none runs in Triton's
interpreter here.)

Numerics: W is exact (as in the reference), products of 16-bit values are exact in float32, and only the
order of the float32 additions differs from the eager GEMM, so y differs from the reference by float32
rounding of the sums and one final rounding to the output dtype (the tolerance in tests/test_gptq_matmul.py
is that bound). The draft's numerics change acceptance, never the output: verification samples from the
target alone.

Tiles: BLOCK_M rows of x (16 for up to 16 rows, the smallest `tl.dot` takes; 32; else 64), BLOCK_N output
columns (64), BLOCK_K inputs per step (64, or 32 when the group size is not a multiple of 64). When a step's
rows are all in one group (no g_idx and the group size a multiple of BLOCK_K, act-order rows already sorted
by group) the zeros and scales are read once per step instead of once per row.

Split K: a draft's few rows make few tiles (a 4096 x 1024 key projection at 32 rows is 16 programs, for a
GPU with 30-170 multiprocessors), which leaves most of the memory system idle: a GEMV is bound by how many
loads are in flight (an H100 read the 70B layer's packed weights at 316 GB/s of its 3,350 at 1-16 rows
without a split: docs/benchmarks.md, issue 31). So the K range is split among SPLIT_K programs per tile
(`launch_config`: about TARGET_PROGRAMS programs in all, each split at least MIN_SPLIT_STEPS steps of BLOCK_K,
and the float32 partial sums, written and read back, at most a quarter of the packed weights' bytes), each
writes its partial sums, and one sum over the splits (in a fixed order: deterministic, no atomics) gives y.
The float32 sums are added in another order than without splitting, which the bound below covers. The
split's speed is not measured (no GPU since it was written); `specexec bench matmul --sweep` times it
against other launches, and the doctor measures what the default reaches on the user's card.

On the CPU the kernel runs through Triton's interpreter (TRITON_INTERPRET=1; see
`core.offload.gptq_kernel.interpreted`), where NumPy cannot multiply bfloat16: there the same bfloat16
values are multiplied as float32, the same arithmetic (exact products, float32 sums); and the kernel uses
`tl.full`, not `tl.zeros` (a jitted library function, which the interpreter un-patches when a jitted helper
such as `_dequant_tile` returns). Float64 and devices
without Triton use the eager route. The GPU speed of this kernel has not been measured (no GPU was lent);
tests/test_gptq_matmul.py compiles it to PTX for sm_75-sm_90 without a GPU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from core.offload.gptq_kernel import dequant_tile, interpreted, tl, triton, triton_available
from core.offload.packed_gptq import PackedGPTQ
from core.planning.sizes import packed_rows

# Rows of x up to which a GPTQ linear on CUDA multiplies with this kernel instead of dequantise-then-GEMM.
# Measured on an H100 80GB HBM3 with a 70B layer's linears (before the split K; docs/benchmarks.md, issue 31):
# 1.41 ms against 1.88 ms at 1-16 rows, even at 64 rows (1.93 / 1.89), 3x slower at 256 (5.97 / 1.99).
FUSED_MATMUL_MAX_ROWS = 64
# Before Ampere (compute capability 8.0) Triton's tl.dot has no tensor-core path and runs on FMA units: there
# the kernel only wins where the product is small, and wider batches dequantise and use cuBLAS.
PRE_AMPERE_MAX_ROWS = 16
# Programs a launch aims at (about four per multiprocessor of a large GPU), splitting K to get there; each
# split keeps at least MIN_SPLIT_STEPS steps of BLOCK_K, and there are at most MAX_SPLIT_K of them.
TARGET_PROGRAMS = 512
MIN_SPLIT_STEPS = 4
MAX_SPLIT_K = 16
_DOT_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def fused_matmul_available(x: torch.Tensor) -> bool:
    """Whether `GPTQLinear` multiplies `x` with `fused_gptq_matmul`: at most FUSED_MATMUL_MAX_ROWS rows
    (PRE_AMPERE_MAX_ROWS before compute capability 8.0, which also lacks bfloat16 products) in float16,
    bfloat16 or float32, Triton present, and x on a CUDA device, or on any device while kernels run in
    Triton's interpreter (tests run a whole draft model through it on the CPU)."""
    rows = x.numel() // x.shape[-1]
    if not triton_available() or x.dtype not in _DOT_DTYPES or rows > FUSED_MATMUL_MAX_ROWS:
        return False
    if x.device.type != "cuda":
        return interpreted()
    major, _ = _capability(x.device)
    return (major >= 8 or rows <= PRE_AMPERE_MAX_ROWS) and (x.dtype != torch.bfloat16 or major >= 8)


@functools.cache
def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def _matmul_kernel(
    x_ptr,
    qweight_ptr,
    qzeros_ptr,
    scales_ptr,
    g_idx_ptr,
    out_ptr,
    M,
    N,
    K,
    zero_words,
    group_size,
    zero_offset,
    k_per_split,
    BITS: tl.constexpr,
    USE_G_IDX: tl.constexpr,
    SAME_GROUP: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    BF16: tl.constexpr,
    IEEE: tl.constexpr,
    DEQUANT_TILE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):
    """One BLOCK_M x BLOCK_N tile of y = x @ W (jitted by `_kernel`) over the K range [k_per_split * s,
    k_per_split * (s + 1)) of split s = program_id(2), in BLOCK_K steps. With SPLIT_K > 1 it writes its
    float32 partial sums to out[s] (out: float32 [SPLIT_K, M, N]); else y in OUT_DTYPE to out [M, N]."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    m_ok, col_ok = m < M, cols < N
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)  # tl.full: see the module's docstring
    k_start = tl.program_id(2) * k_per_split
    for k0 in range(k_start, k_start + k_per_split, BLOCK_K):  # rows past K are masked
        rows = k0 + tl.arange(0, BLOCK_K)  # [BK]
        row_ok = rows < K
        if SAME_GROUP:
            group = tl.full((1, 1), k0 // group_size, tl.int32)  # [1, 1]
            group_ok = group >= 0
        else:
            if USE_G_IDX:
                group = tl.load(g_idx_ptr + rows, mask=row_ok, other=0)[:, None]
            else:
                group = (rows // group_size)[:, None]
            group_ok = row_ok[:, None]
        # w [BK, BN]: exact in the compute dtype (float32 work, bfloat16-rounded for bfloat16)
        w = DEQUANT_TILE(
            qweight_ptr,
            qzeros_ptr,
            scales_ptr,
            rows,
            cols,
            row_ok,
            col_ok,
            group,
            group_ok,
            N,
            zero_words,
            zero_offset,
            BITS,
            tl.float32,
            BF16,
        )
        x = tl.load(x_ptr + m[:, None] * K + rows[None, :], mask=m_ok[:, None] & row_ok[None, :], other=0.0)
        if IEEE:
            acc += tl.dot(x.to(DOT_DTYPE), w.to(DOT_DTYPE), input_precision="ieee")
        else:
            acc += tl.dot(x.to(DOT_DTYPE), w.to(DOT_DTYPE))
    out_mask = m_ok[:, None] & col_ok[None, :]
    if SPLIT_K > 1:
        tl.store(out_ptr + tl.program_id(2) * M * N + m[:, None] * N + cols[None, :], acc, mask=out_mask)
    else:
        if BF16:  # round to nearest even by hand, as `_dequant_tile` does: the interpreter's cast truncates
            bits = acc.to(tl.uint32, bitcast=True)
            acc = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).to(tl.float32, bitcast=True)
        tl.store(out_ptr + m[:, None] * N + cols[None, :], acc.to(OUT_DTYPE), mask=out_mask)


@functools.cache
def _kernel(interpret: bool):
    """The jitted kernel, built on first use per mode (see `core.offload.gptq_kernel._kernel`)."""
    return triton.jit(_matmul_kernel)


@dataclass(frozen=True)
class LaunchConfig:
    """How one fused matmul is launched: tile sizes, K splits, and Triton's warps and pipeline stages."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4
    num_stages: int = 3


def launch_config(rows: int, n: int, k: int, group_size: int) -> LaunchConfig:
    """The launch for `rows` rows of x, N = `n` outputs and K = `k` inputs; group_size: rows per group (K for
    a single group). Tiles as the module's docstring says, then K split until about TARGET_PROGRAMS programs."""
    block_m = 16 if rows <= 16 else 32 if rows <= 32 else 64
    block_k = 64 if group_size % 64 == 0 else 32
    block_n = 64
    tiles = -(-rows // block_m) * -(-n // block_n)
    # partial sums: split * rows * n * 4 bytes, written and read, against k * n / 2 packed bytes
    traffic_cap = k // (64 * rows)
    split = max(1, min(MAX_SPLIT_K, -(-TARGET_PROGRAMS // tiles), k // (block_k * MIN_SPLIT_STEPS), traffic_cap))
    return LaunchConfig(block_m, block_n, block_k, split)


def fused_gptq_matmul(x: torch.Tensor, weights: PackedGPTQ, config: LaunchConfig | None = None) -> torch.Tensor:
    """y [M, N] = x [M, K] @ W in x's dtype, W given by the GPTQ tensors (layout in core.offload.gptq): one
    kernel launch, and with a split K one sum over the splits. `weights.g_idx` given: row k of W is in group
    g_idx[k]; None: row k is in group k // group_size (group_size -1: one group; act-order weights
    re-packed by the loader, x permuted by the caller, as `GPTQLinear.forward` does). `config`: the launch
    (None: `launch_config`'s; benchmarks try others).

    Raises: ValueError for a dtype the kernel does not multiply, or an x that is not [rows, K].
    """
    qweight, qzeros, scales, g_idx = weights.qweight, weights.qzeros, weights.scales, weights.g_idx
    bits, group_size, zero_offset = weights.bits, weights.group_size, weights.zero_offset
    if x.dtype not in _DOT_DTYPES:
        raise ValueError(f"the fused GPTQ matmul multiplies {', '.join(_DOT_DTYPES.values())}, not {x.dtype}")
    if x.dim() != 2 or packed_rows(x.shape[1], bits) != qweight.shape[0]:
        raise ValueError(
            f"x must be [rows, K] with K the {bits}-bit weight's inputs, got {tuple(x.shape)} for "
            f"qweight {tuple(qweight.shape)}"
        )
    x = x.contiguous()
    (m, k), n = x.shape, scales.shape[1]
    size = k if group_size == -1 else group_size
    config = config or launch_config(m, n, k, size)
    k_per_split = -(-k // (config.split_k * config.block_k)) * config.block_k
    splits = -(-k // k_per_split)
    if splits > 1:
        out = torch.empty(splits, m, n, dtype=torch.float32, device=x.device)
    else:
        out = torch.empty(m, n, dtype=x.dtype, device=x.device)
    name = _DOT_DTYPES[x.dtype]
    bf16 = x.dtype == torch.bfloat16
    dot_dtype = tl.float32 if bf16 and interpreted() else getattr(tl, name)  # see the module's docstring
    grid = (-(-m // config.block_m), -(-n // config.block_n), splits)
    _kernel(interpreted())[grid](
        x,
        qweight,
        qzeros,
        scales,
        g_idx if g_idx is not None else qweight,
        out,
        m,
        n,
        k,
        qzeros.shape[1],
        size,
        zero_offset,
        k_per_split,
        BITS=bits,
        USE_G_IDX=g_idx is not None,
        SAME_GROUP=g_idx is None and size % config.block_k == 0,
        DOT_DTYPE=dot_dtype,
        OUT_DTYPE=getattr(tl, name),
        BF16=bf16,
        IEEE=x.dtype == torch.float32,
        DEQUANT_TILE=dequant_tile(interpreted()),
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        SPLIT_K=splits,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return out.sum(0).to(x.dtype) if splits > 1 else out
