"""Fused GPTQ dequantisation: one Triton kernel reads the packed weights and writes W [K, N] once.

`core.offload.gptq.dequantize_into` (several eager passes with int32 temporaries) stays the reference and
the fallback: it runs on the CPU, and on a GPU when Triton cannot be imported. This kernel computes the
same arithmetic element by element, so its output is bit for bit the reference's:

    W[k, n] = float(q[k, n] - z[g, n] - zero_offset) * float(scales[g, n] rounded to the output dtype)

rounded once to the output dtype (|q - z| < 2^9 and an fp16 scale has 11 significant bits, so the product
is exact in float32 before that rounding, as it is in the reference's fp16 multiply). Each thread block
handles a BLOCK_K x BLOCK_N tile: it reads the tile's packed words (each word serves 32 / bits rows), the
groups' zeros and scales, and writes the tile in the output dtype: memory traffic is the packed bytes plus
one write of W, instead of the reference's several int32 passes.

Bit addressing covers every supported width: along the packed dim a column is one little-endian bit
stream, value i at bit bits * i; a 3-bit value may straddle two words, and is then read from both.

Tests run the kernel on the CPU through Triton's interpreter (`TRITON_INTERPRET=1` when the kernel is first
built; see `interpreted`). The GPU speed of this kernel has not been measured (no GPU was lent).
"""

from __future__ import annotations

import functools
import os

import torch

from core.offload.packed_gptq import PackedGPTQ

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs without Triton: the reference path is used
    triton = tl = None

BLOCK_K = 32
BLOCK_N = 128

_OUT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def triton_available() -> bool:
    """True when Triton imports (it ships with CUDA builds of torch; CPU test setups install it pinned)."""
    return triton is not None


def fused_dequant_available(device: torch.device) -> bool:
    """The fused kernel runs compiled on CUDA devices when Triton is present; elsewhere use the reference."""
    return device.type == "cuda" and triton_available()


def _dequant_tile(
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
    BITS: tl.constexpr,
    WORK_DTYPE: tl.constexpr,
    BF16: tl.constexpr,
):
    """W[rows, cols] as a [BK, BN] tile in WORK_DTYPE, 0 where masked (jitted by `dequant_tile`; both the
    dequantisation kernel and the fused matmul call it). rows, row_ok [BK]; cols, col_ok [BN]; group, group_ok:
    the group of each row, [BK, 1], or [1, 1] when every row of the tile is in one group.
    BF16: round to bfloat16 by hand (nearest even, on the float32 bits, as torch does), because Triton's
    interpreter truncates float32 -> bfloat16."""
    mask = row_ok[:, None] & col_ok[None, :]  # [BK, BN]
    value_mask = (1 << BITS) - 1
    # q [BK, BN]: row k of column n starts at bit BITS * k of the column's stream in qweight [K*BITS/32, N]
    bit = rows * BITS
    word, offset = (bit // 32)[:, None], (bit % 32)[:, None]
    words = tl.load(qweight_ptr + word * N + cols[None, :], mask=mask, other=0).to(tl.uint32, bitcast=True)
    q = words >> offset.to(tl.uint32)
    if BITS == 3:  # values 10 and 21 of each 32-value block continue in the next word
        straddle = offset > 29
        high = tl.load(qweight_ptr + (word + 1) * N + cols[None, :], mask=mask & straddle, other=0)
        shift = tl.where(straddle, 32 - offset, 0).to(tl.uint32)
        q = q | tl.where(straddle, high.to(tl.uint32, bitcast=True) << shift, 0).to(tl.uint32)
    q = (q & value_mask).to(tl.int32)

    # z [G, BN]: qzeros [G, zero_words] is packed along the output dim, one bit stream per group
    group_mask = group_ok & col_ok[None, :]  # [BK or 1, BN]
    zbit = cols * BITS
    zword, zoffset = (zbit // 32)[None, :], (zbit % 32)[None, :]
    zrow = qzeros_ptr + group * zero_words
    zeros = tl.load(zrow + zword, mask=group_mask, other=0).to(tl.uint32, bitcast=True)
    z = zeros >> zoffset.to(tl.uint32)
    if BITS == 3:
        zstraddle = zoffset > 29
        zhigh = tl.load(zrow + zword + 1, mask=group_mask & zstraddle, other=0)
        zshift = tl.where(zstraddle, 32 - zoffset, 0).to(tl.uint32)
        z = z | tl.where(zstraddle, zhigh.to(tl.uint32, bitcast=True) << zshift, 0).to(tl.uint32)
    z = (z & value_mask).to(tl.int32)

    scale = tl.load(scales_ptr + group * N + cols[None, :], mask=group_mask, other=0.0)
    scale = scale.to(WORK_DTYPE)
    if BF16:  # the reference rounds the fp16 scale to bfloat16 first (a no-op for the other dtypes)
        bits = scale.to(tl.uint32, bitcast=True)
        scale = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).to(tl.float32, bitcast=True)
    weight = (q - z - zero_offset).to(WORK_DTYPE) * scale
    if BF16:  # after this the value is exact in bfloat16, so a later cast does not round again
        bits = weight.to(tl.uint32, bitcast=True)
        weight = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).to(tl.float32, bitcast=True)
    return tl.where(mask, weight, 0.0)


def _dequant_kernel(
    qweight_ptr,
    qzeros_ptr,
    scales_ptr,
    g_idx_ptr,
    out_ptr,
    K,
    N,
    zero_words,
    group_size,
    zero_offset,
    BITS: tl.constexpr,
    USE_G_IDX: tl.constexpr,
    OUT_DTYPE: tl.constexpr,
    WORK_DTYPE: tl.constexpr,
    BF16: tl.constexpr,
    DEQUANT_TILE: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """One BLOCK_K x BLOCK_N tile of W (jitted by `_kernel`); DEQUANT_TILE is the jitted `_dequant_tile`."""
    rows = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)  # [BK]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN]
    row_ok = rows < K
    if USE_G_IDX:
        group = tl.load(g_idx_ptr + rows, mask=row_ok, other=0)
    else:
        group = rows // group_size
    col_ok = cols < N
    weight = DEQUANT_TILE(
        qweight_ptr,
        qzeros_ptr,
        scales_ptr,
        rows,
        cols,
        row_ok,
        col_ok,
        group[:, None],
        row_ok[:, None],
        N,
        zero_words,
        zero_offset,
        BITS,
        WORK_DTYPE,
        BF16,
    )
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], weight.to(OUT_DTYPE), mask=row_ok[:, None] & col_ok[None, :])


@functools.cache
def _kernel(interpret: bool):
    """The jitted kernel, built once per mode: Triton picks compiled or interpreted (TRITON_INTERPRET) when
    `jit` runs, so building it on first use lets tests interpret it whatever was imported before."""
    return triton.jit(_dequant_kernel)


@functools.cache
def dequant_tile(interpret: bool):
    """`_dequant_tile` jitted for this mode: kernels receive it as a constexpr argument (a jitted helper called
    by its global name could not be both compiled and interpreted in one process)."""
    return triton.jit(_dequant_tile)


def interpreted() -> bool:
    """Whether kernels built now run in Triton's CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def fused_dequantize_into(out: torch.Tensor, weights: PackedGPTQ) -> torch.Tensor:
    """Write W [K, N] into `out` with one kernel launch; returns `out`. Same contract as
    `core.offload.gptq.dequantize_into`: `weights.g_idx` given = row k in group g_idx[k]; None = row k in
    group k // group_size (group_size -1: one group).

    Raises: ValueError for an output dtype the kernel does not write, or non-contiguous tensors.
    """
    qweight, qzeros, scales, g_idx = weights.qweight, weights.qzeros, weights.scales, weights.g_idx
    bits, group_size, zero_offset = weights.bits, weights.group_size, weights.zero_offset
    dtype_name = str(out.dtype).removeprefix("torch.")
    if dtype_name not in _OUT_DTYPES:
        raise ValueError(f"fused GPTQ dequantisation writes {', '.join(_OUT_DTYPES)}, not {out.dtype}")
    tensors = (out, qweight, qzeros, scales) + ((g_idx,) if g_idx is not None else ())
    if not all(t.is_contiguous() for t in tensors):
        raise ValueError("fused GPTQ dequantisation needs contiguous tensors")
    k, n = out.shape
    out_dtype = getattr(tl, dtype_name)
    work_dtype = tl.float64 if out.dtype == torch.float64 else tl.float32
    grid = (-(-k // BLOCK_K), -(-n // BLOCK_N))
    _kernel(interpreted())[grid](
        qweight,
        qzeros,
        scales,
        g_idx if g_idx is not None else qweight,
        out,
        k,
        n,
        qzeros.shape[1],
        k if group_size == -1 else group_size,
        zero_offset,
        BITS=bits,
        USE_G_IDX=g_idx is not None,
        OUT_DTYPE=out_dtype,
        WORK_DTYPE=work_dtype,
        BF16=out.dtype == torch.bfloat16,
        DEQUANT_TILE=dequant_tile(interpreted()),
        BLOCK_K=BLOCK_K,
        BLOCK_N=BLOCK_N,
    )
    return out
