"""A 4-bit draft's linears in the layout of torch's own int4 kernel (tinygemm, `aten._weight_int4pack_mm`).

Why this kernel: torch ships it in every CUDA wheel, Windows included, for compute capability 8.0 and newer
(gpt-fast's int4 path), so a draft needs no kernel of ours and no Triton; the fused Triton matmul
(core.offload.gptq_matmul) read a 70B layer at 9% of an H100's bandwidth (docs/benchmarks.md, issue 31).
Which one a card runs faster is measured (core.offload.draft_kernels); this module only repacks and multiplies.

tinygemm computes W[k, n] = (q[k, n] - 8) * s[g, n] + zero[g, n] in bfloat16, with q in [0, 16) packed by
`_convert_weight_to_int4pack` (CUDA: uint8 [N, K/2], the even k in the high nibble; its CPU twin
`_convert_weight_to_int4pack_for_cpu`: int32 [N, K]) and scales and zeros as one bfloat16 [K/g, N, 2] tensor.
A GPTQ linear's W[k, n] = s[g, n] * (q[k, n] - z[g, n]) (z with the format's zero offset added) is the same
with zero = (8 - z) * s: exact for symmetric checkpoints (z = 8, zero 0) up to the scale's rounding to
bfloat16; for asymmetric ones the zero term rounds once more. A draft's rounding moves how many of its
guesses the target accepts, never the output: verification samples from the target alone.

Act-order linears work unchanged: their rows were sorted by group at load ("perm" mode) and the input is
permuted before the product, as for every other kernel. Group sizes 32-256 are taken as they are; larger
ones, and one group per column, are split into groups of 256 with their scales repeated. A linear whose
rows are gathered by an arbitrary g_idx, or whose shape the kernel's tiles do not divide, keeps its kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TINYGEMM_GROUP_SIZES = (32, 64, 128, 256)
TILE_N = 8  # output columns of one tinygemm tile: N must be a multiple
TILE_K = 16  # inputs of one k-tile: K must be a multiple of this times the inner k-tiles


@dataclass(frozen=True)
class Int4Weights:
    """One linear in tinygemm's layout: `packed` as `_convert_weight_to_int4pack` made it for its device,
    `scales_and_zeros` bfloat16 [K / group_size, N, 2]."""

    packed: torch.Tensor
    scales_and_zeros: torch.Tensor
    group_size: int
    in_features: int
    out_features: int


def tinygemm_layout(
    bits: int, group_size: int, mode: str, in_features: int, out_features: int
) -> tuple[int, int] | str:
    """(the group size tinygemm uses, its inner k-tiles) for such a linear, or why it cannot take it."""
    if bits != 4:
        return f"{bits}-bit weights (the kernel reads 4-bit)"
    if mode == "gather":
        return "rows grouped by an arbitrary g_idx"
    if out_features % TILE_N:
        return f"{out_features} outputs (not a multiple of {TILE_N})"
    group = in_features if group_size == -1 else group_size
    if group not in TINYGEMM_GROUP_SIZES:
        if group % 256 or in_features % 256:
            return f"group size {group_size}"
        group = 256
    inner = next((tiles for tiles in (8, 4, 2) if in_features % (tiles * TILE_K) == 0), None)
    if inner is None or in_features % group:
        return f"{in_features} inputs (not a multiple of {2 * TILE_K} and of the group size)"
    return group, inner


def tinygemm_op_available(device: torch.device) -> bool:
    """Whether this torch build multiplies on `device` with tinygemm: CUDA at compute capability 8.0 or newer
    (the kernel's bfloat16 tensor-core path), or the CPU twin (tests check repacking against it)."""
    if device.type == "cuda":
        return hasattr(torch.ops.aten, "_weight_int4pack_mm") and torch.cuda.get_device_capability(device)[0] >= 8
    return device.type == "cpu" and hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu")


@torch.no_grad()
def pack_int4(
    values: torch.Tensor,
    zeros: torch.Tensor,
    scales: torch.Tensor,
    group_size: int,
    tinygemm_group: int,
    inner_k_tiles: int,
) -> Int4Weights:
    """values int32 [K, N] in [0, 16) (rows in the order the input arrives: sorted by group for act-order),
    zeros int32 [G, N] (the format's zero offset already added) and scales [G, N] of `group_size`-row
    groups (-1: one group) -> tinygemm's layout on their device, in `tinygemm_group`-row groups."""
    k, n = values.shape
    repeat = (k if group_size == -1 else group_size) // tinygemm_group
    scales = scales.float().repeat_interleave(repeat, dim=0)
    zeros = zeros.float().repeat_interleave(repeat, dim=0)
    scales_bf16 = scales.to(torch.bfloat16)
    zero_term = ((8 - zeros) * scales_bf16.float()).to(torch.bfloat16)  # 0 exactly for symmetric weights
    scales_and_zeros = torch.stack([scales_bf16, zero_term], dim=-1).contiguous()  # [K/g, N, 2]
    transposed = values.t().contiguous()  # [N, K]
    if values.device.type == "cuda":
        as_bytes = (transposed[:, ::2] << 4 | transposed[:, 1::2]).to(torch.uint8)  # [N, K/2], even k high
        packed = torch.ops.aten._convert_weight_to_int4pack(as_bytes, inner_k_tiles)
    else:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(transposed.to(torch.int32), inner_k_tiles)
    return Int4Weights(packed, scales_and_zeros, tinygemm_group, k, n)


def int4_matmul(x: torch.Tensor, weights: Int4Weights) -> torch.Tensor:
    """x [M, K] -> y [M, N] in x's dtype; the product runs in bfloat16 (the kernel's only input dtype)."""
    x16 = x.to(torch.bfloat16)
    if x.device.type == "cuda":
        y = torch.ops.aten._weight_int4pack_mm(x16, weights.packed, weights.group_size, weights.scales_and_zeros)
    else:
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            x16, weights.packed, weights.group_size, weights.scales_and_zeros
        )
    return y.to(x.dtype)
