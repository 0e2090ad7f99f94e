"""GPTQ weights: unpacking, act-order reordering and a drop-in `GPTQLinear` that dequantises per forward.

Checkpoint layout (the "v1" format written by AutoGPTQ / GPTQ-for-LLaMa), for a linear with K inputs and
N outputs, bits b in {2, 3, 4, 8}. Along the packed dim each column is one little-endian bit stream: value k
occupies bits b*k .. b*k + b - 1 (word = bit // 32). For b in {2, 4, 8} that is p = 32 / b values per
int32, none crossing a word; for b = 3, 32 values fill 3 int32s and values 10 and 21 of each block straddle
two words (AutoGPTQ's 3-bit layout).

    qweight int32 [K * b / 32, N]   packed along the input dim
    qzeros  int32 [G, ceil(N / v) * w]  packed along the output dim the same way (v values in w words per
                               block: 32 in 3 for b = 3, p in 1 otherwise), stored minus 1 (v1)
    scales  fp16  [G, N]
    g_idx   int32 [K]          group of input row k (not monotone with act-order / desc_act)
    bias    fp16  [N]          optional

    W[k, n] = scales[g[k], n] * (q[k, n] - (z[g[k], n] + 1))      and  y = x @ W (+ bias)

At load time each linear is put in one of three modes (`plan_gptq_rows`):
- "groups": g_idx == k // group_size, so rows of a group are contiguous: scales broadcast per group.
- "perm":   act-order; rows were re-packed sorted by group at load time (`sort_rows_by_group`) and the
            input is permuted at run time (`x[:, perm]`), which makes the sorted rows contiguous groups.
- "gather": any other g_idx: scales and zeros gathered per row (slow, always correct).

The packed tensors stay packed in host RAM and over PCIe; `GPTQLinear` dequantises into one scratch
buffer shared by every linear of the model (`DequantScratch`) and runs one matmul, which is what exllama
and vLLM do for the 100-2,000 token batches of a tree pass. On a CUDA device with Triton the dequantisation
is one fused kernel (core.offload.gptq_kernel); `dequantize_into` here is its reference and fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from core.offload.gptq_kernel import fused_dequant_available, fused_dequantize_into
from core.offload.gptq_matmul import fused_gptq_matmul, fused_matmul_available
from core.offload.packed_gptq import PackedGPTQ
from core.offload.int4pack import Int4Weights, int4_matmul, pack_int4, tinygemm_layout, tinygemm_op_available
from core.planning.sizes import block_shape, gptq_linear_tensors, packed_rows

# Rows of the int32 temporary a dequantisation chunk may hold, as a number of elements (64 MB of int32).
CHUNK_ELEMENTS = 16 * 1024 * 1024
# The same for paths with several int64 temporaries per value (3-bit unpacking, generic re-packing).
WIDE_CHUNK_ELEMENTS = CHUNK_ELEMENTS // 8


@dataclass(frozen=True)
class GPTQSettings:
    """bits per weight; group_size (-1 = one group per output column); desc_act (act-order); sym;
    zero_offset: 1 for the v1 format (zeros stored minus 1), 0 for gptq_v2 and every format converted into
    this layout (AWQ, compressed-tensors); scale_dtype / bias_dtype: the checkpoint's (float16, bfloat16 or
    float32), kept as stored so that the dequantised weights are exactly the checkpoint's."""

    bits: int
    group_size: int
    desc_act: bool = False
    sym: bool = True
    zero_offset: int = 1
    scale_dtype: str = "float16"
    bias_dtype: str = "float16"

    @property
    def block_values(self) -> int:
        """Values in one packing block (32 for 3-bit, 32 / bits otherwise): dims and groups split into these."""
        return block_shape(self.bits)[0]

    def groups(self, in_features: int) -> int:
        return 1 if self.group_size == -1 else -(-in_features // self.group_size)


# --- packing -------------------------------------------------------------------------------------------


def _unpack_3bit(blocks: torch.Tensor) -> torch.Tensor:
    """int32 [A, m, 3, B] (m blocks of 3 words) -> int32 [A, m, 32, B]: value j starts at bit 3j of the
    block's 96-bit little-endian stream. int64 temporaries, so no sign bits leak into straddling values."""
    j = torch.arange(32, device=blocks.device)
    word, offset = (3 * j) // 32, ((3 * j) % 32).view(1, 1, 32, 1)
    unsigned = blocks.to(torch.int64) & 0xFFFFFFFF
    low = unsigned.index_select(2, word)
    high = unsigned.index_select(2, (word + 1).clamp_max(2))  # only used where the value straddles
    return (((low | (high << 32)) >> offset) & 7).to(torch.int32)


def _pack_3bit(values: torch.Tensor) -> torch.Tensor:
    """Inverse of _unpack_3bit: int [A, m, 32, B] -> int32 [A, m, 3, B]."""
    v = values.to(torch.int64)
    words = torch.zeros(v.shape[0], v.shape[1], 3, v.shape[3], dtype=torch.int64, device=v.device)
    for j in range(32):
        word, offset = divmod(3 * j, 32)
        words[:, :, word] |= (v[:, :, j] << offset) & 0xFFFFFFFF
        if offset > 29:  # the value's high bits continue in the next word
            words[:, :, word + 1] |= v[:, :, j] >> (32 - offset)
    return _to_int32_bits(words)


def unpack_rows(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 [R, C] packed along dim 0 -> int32 [R * 32/bits, C] of values in [0, 2^bits)."""
    if bits == 3:
        blocks = packed.view(1, packed.shape[0] // 3, 3, packed.shape[1])
        return _unpack_3bit(blocks).reshape(packed.shape[0] // 3 * 32, packed.shape[1])
    per = 32 // bits
    shifts = torch.arange(0, 32, bits, device=packed.device, dtype=torch.int32)
    # values: [R, per, C]; arithmetic shift of negative words is fixed by the mask
    values = (packed.unsqueeze(1) >> shifts.view(1, per, 1)) & ((1 << bits) - 1)
    return values.reshape(packed.shape[0] * per, packed.shape[1])


def unpack_cols(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """int32 [R, C] packed along dim 1 -> int32 [R, C * 32/bits]."""
    if bits == 3:
        blocks = packed.reshape(packed.shape[0], packed.shape[1] // 3, 3, 1)
        return _unpack_3bit(blocks).reshape(packed.shape[0], packed.shape[1] // 3 * 32)
    per = 32 // bits
    shifts = torch.arange(0, 32, bits, device=packed.device, dtype=torch.int32)
    values = (packed.unsqueeze(2) >> shifts.view(1, 1, per)) & ((1 << bits) - 1)
    return values.reshape(packed.shape[0], packed.shape[1] * per)


def _to_int32_bits(words: torch.Tensor) -> torch.Tensor:
    """int64 words in [0, 2^32) -> int32 with the same bit pattern."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def pack_rows(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Inverse of unpack_rows: int [K, C] (K a multiple of the block's values) -> int32 [K * bits/32, C]."""
    if bits == 3:
        blocks = values.reshape(1, values.shape[0] // 32, 32, values.shape[1])
        return _pack_3bit(blocks).reshape(values.shape[0] // 32 * 3, values.shape[1])
    per = 32 // bits
    shifts = torch.arange(0, 32, bits, device=values.device, dtype=torch.int64)
    grouped = values.to(torch.int64).reshape(values.shape[0] // per, per, values.shape[1])
    return _to_int32_bits((grouped << shifts.view(1, per, 1)).sum(dim=1))


# --- act-order ------------------------------------------------------------------------------------------


def plan_gptq_rows(g_idx: torch.Tensor, group_size: int) -> tuple[str, torch.Tensor | None]:
    """Decide how a linear's rows are grouped: ("groups", None), ("perm", perm int32 [K]) or ("gather", None).

    "perm" means: sorting rows by g_idx (stable) gives contiguous groups of exactly `group_size` rows.
    """
    k = g_idx.shape[0]
    size = k if group_size == -1 else group_size
    if k % size != 0:
        return "gather", None
    expected = torch.arange(k, dtype=torch.int64) // size
    g = g_idx.to(torch.int64).cpu()
    if torch.equal(g, expected):
        return "groups", None
    perm = torch.argsort(g, stable=True)
    if torch.equal(g[perm], expected):
        return "perm", perm.to(torch.int32)
    return "gather", None


def sort_rows_by_group(qweight: torch.Tensor, perm: torch.Tensor, bits: int, column_chunk: int = 4096) -> torch.Tensor:
    """Re-pack qweight so that packed row order follows `perm` (new row i = old row perm[i]).

    Works on column chunks so the unpacked temporary stays small (K x 4096 bytes for 4-bit).
    Returns a new int32 tensor shaped like `qweight`.
    """
    out = torch.empty_like(qweight)
    index = perm.to(torch.int64)
    if bits != 4:  # the generic path holds int64 temporaries of every row for each column of the chunk
        column_chunk = min(column_chunk, max(1, WIDE_CHUNK_ELEMENTS // perm.shape[0]))
    for c0 in range(0, qweight.shape[1], column_chunk):
        block = qweight[:, c0 : c0 + column_chunk]
        if bits == 4:
            out[:, c0 : c0 + column_chunk] = _sort_rows_4bit(block, index)
        else:
            out[:, c0 : c0 + column_chunk] = pack_rows(unpack_rows(block, bits)[index], bits)
    return out


def _sort_rows_4bit(block: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """4-bit row reorder with uint8 temporaries (1 byte per weight instead of 8). Little-endian words."""
    return pack_rows_4bit_u8(unpack_rows_4bit_u8(block)[index])


def unpack_rows_4bit_u8(packed: torch.Tensor) -> torch.Tensor:
    """int32 [R, C] of 4-bit values packed along dim 0 -> uint8 [8R, C] (1 byte per value; little-endian words)."""
    rows, cols = packed.shape
    # bytes: [R, 4, C]; byte j of a word holds rows 8r + 2j (low nibble) and 8r + 2j + 1 (high nibble)
    raw = packed.contiguous().view(torch.uint8).view(rows, cols, 4).permute(0, 2, 1)
    return torch.stack([raw & 15, raw >> 4], dim=2).reshape(rows * 8, cols)


def pack_rows_4bit_u8(values: torch.Tensor) -> torch.Tensor:
    """Inverse of unpack_rows_4bit_u8: uint8 [K, C] of values in [0, 16), K a multiple of 8 -> int32 [K/8, C]."""
    rows, cols = values.shape[0] // 8, values.shape[1]
    pairs = values.reshape(rows, 4, 2, cols)
    packed = pairs[:, :, 0] | (pairs[:, :, 1] << 4)  # [R, 4, C]
    return packed.permute(0, 2, 1).contiguous().view(torch.int32).view(rows, cols)


# --- dequantisation -------------------------------------------------------------------------------------


def dequantize_reference(
    qweight, qzeros, scales, g_idx, bits: int, zero_offset: int = 1, dtype=torch.float32
) -> torch.Tensor:
    """Straightforward W [K, N] from the checkpoint tensors (any g_idx). Used on small layers and in tests."""
    q = unpack_rows(qweight, bits)
    n = scales.shape[1]
    z = unpack_cols(qzeros, bits)[:, :n] + zero_offset
    g = g_idx.to(torch.int64)
    return (q - z[g]).to(dtype) * scales.to(dtype)[g]


def dequantize_into(out: torch.Tensor, weights: PackedGPTQ) -> torch.Tensor:
    """Write W [K, N] into `out` (its dtype is the compute dtype) chunk by chunk; returns `out`.

    Row k belongs to group k // group_size (act-order rows were sorted at load time), or with `weights.g_idx`
    ("gather") to group g_idx[k].
    """
    qweight, qzeros, scales, g_idx = weights.qweight, weights.qzeros, weights.scales, weights.g_idx
    bits, group_size, zero_offset = weights.bits, weights.group_size, weights.zero_offset
    mode = "gather" if weights.gathered else "groups"
    k, n = out.shape
    per, words = block_shape(bits)
    size = k if group_size == -1 else group_size
    # zeros1: [G, N] int32 (small); scales_c: [G, N] in the compute dtype so the product rounds once
    zeros1 = unpack_cols(qzeros, bits)[:, :n] + zero_offset
    scales_c = scales.to(out.dtype)
    budget = WIDE_CHUNK_ELEMENTS if bits == 3 else CHUNK_ELEMENTS
    rows = max(per, (budget // max(n, 1)) // per * per)
    if mode != "gather" and size < k:
        rows = size * max(1, rows // size)
    for r0 in range(0, k, rows):
        r1 = min(k, r0 + rows)
        q = unpack_rows(qweight[r0 // per * words : packed_rows(r1, bits)], bits)[: r1 - r0]  # int32 [c, N]
        target = out[r0:r1]
        if mode == "gather":
            g = g_idx[r0:r1].to(torch.int64)
            q.sub_(zeros1.index_select(0, g))
            torch.mul(q, scales_c.index_select(0, g), out=target)
        elif size >= k:
            q.sub_(zeros1[0])
            torch.mul(q, scales_c[0], out=target)
        else:
            g0, ng = r0 // size, (r1 - r0) // size
            q3 = q.view(ng, size, n)
            q3.sub_(zeros1[g0 : g0 + ng, None, :])
            torch.mul(q3, scales_c[g0 : g0 + ng, None, :], out=target.view(ng, size, n))
    return out


class DequantScratch:
    """One reusable buffer that every GPTQLinear of a model dequantises into (layers run one at a time,
    on one stream, so reuse is safe). Reserve the largest K*N up front so no pass allocates."""

    def __init__(self) -> None:
        self._buffer: torch.Tensor | None = None

    def reserve(self, numel: int, dtype: torch.dtype, device: torch.device | str) -> None:
        buffer = self._buffer
        if buffer is None or buffer.numel() < numel or buffer.dtype != dtype or buffer.device != torch.device(device):
            self._buffer = torch.empty(numel, dtype=dtype, device=device)

    def matrix(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        self.reserve(rows * cols, dtype, device)
        return self._buffer[: rows * cols].view(rows, cols)

    @property
    def nbytes(self) -> int:
        return 0 if self._buffer is None else self._buffer.numel() * self._buffer.element_size()


class GPTQLinear(nn.Module):
    """Drop-in replacement for nn.Linear holding GPTQ tensors as buffers.

    Buffers are usually views into an offloaded layer slot (see core.offload.layout); `mode` and `perm`
    are set by the loader once the checkpoint's g_idx is known (see `plan_gptq_rows`).
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        settings: GPTQSettings,
        bias: bool,
        scratch: DequantScratch,
        device: torch.device | str = "meta",
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.bits, self.group_size, self.zero_offset = settings.bits, settings.group_size, settings.zero_offset
        self.scratch = scratch
        self.mode = "groups"
        self.int4: Int4Weights | None = None  # set by use_int4_kernel: tinygemm's layout replaces qweight
        self.fused = True  # False: small batches dequantise and use a GEMM (core.offload.draft_kernels decides)
        dtypes = {"int32": torch.int32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
        # Shapes from the one pure description the fit prediction also uses (core.planning.sizes). `perm`
        # (act-order only) is the input permutation of "perm" mode, filled by the loader.
        for spec in gptq_linear_tensors(
            in_features,
            out_features,
            settings.bits,
            settings.group_size,
            settings.desc_act,
            bias,
            settings.scale_dtype,
            settings.bias_dtype,
        ):
            self.register_buffer(spec.name, torch.empty(spec.shape, dtype=dtypes[spec.dtype], device=device))
        for optional in ("perm", "bias"):
            if optional not in self._buffers:
                setattr(self, optional, None)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, bits={self.bits}, group={self.group_size}, mode={self.mode}"

    @property
    def packed(self) -> PackedGPTQ:
        """This linear's tensors as the dequantisation and the kernels take them."""
        return PackedGPTQ(
            self.qweight,
            self.qzeros,
            self.scales,
            self.g_idx if self.mode == "gather" else None,
            self.bits,
            self.group_size,
            self.zero_offset,
        )

    @torch.no_grad()
    def use_int4_kernel(self) -> bool:
        """Repack this linear into torch's int4 (tinygemm) layout and multiply through it from now on (a
        draft's linears, which stay on the device); False, with nothing changed, where the kernel cannot take
        it (core.offload.int4pack.tinygemm_layout) or this torch has no such kernel for the device. The repacked
        words take the GPTQ words' own bytes (the same count), so the draft does not grow by its weights; only
        the bfloat16 scales and zeros are new (4 bytes per group and column)."""
        layout = tinygemm_layout(self.bits, self.group_size, self.mode, self.in_features, self.out_features)
        if isinstance(layout, str) or self.int4 is not None or not tinygemm_op_available(self.qweight.device):
            return False
        values = unpack_rows(self.qweight, 4)[: self.in_features]  # int32 [K, N]
        zeros = unpack_cols(self.qzeros, 4)[:, : self.out_features] + self.zero_offset
        weights = pack_int4(values, zeros, self.scales, self.group_size, *layout)
        del values
        words = self.qweight
        if (
            words.is_contiguous()
            and words.numel() * words.element_size() == weights.packed.numel() * weights.packed.element_size()
        ):
            own = words.view(-1).view(torch.uint8)
            own.copy_(weights.packed.reshape(-1).view(torch.uint8))
            weights = Int4Weights(
                own.view(weights.packed.dtype).view(weights.packed.shape),
                weights.scales_and_zeros,
                weights.group_size,
                weights.in_features,
                weights.out_features,
            )
        self.int4 = weights
        self.qweight = None  # its bytes now hold the repacked words
        return True

    def dequantize(self, dtype: torch.dtype) -> torch.Tensor:
        """W [K, N] in `dtype`, written into the shared scratch buffer (valid until the next dequantise):
        by the fused kernel on a CUDA device with Triton, else by the reference `dequantize_into`."""
        if self.int4 is not None:
            raise RuntimeError("this linear was repacked for torch's int4 kernel and multiplies only through it")
        out = self.scratch.matrix(self.in_features, self.out_features, dtype, self.qweight.device)
        if fused_dequant_available(out.device):
            return fused_dequantize_into(out, self.packed)
        return dequantize_into(out, self.packed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., K] -> [..., N]. Repacked for torch's int4 kernel (`use_int4_kernel`: a draft on a card where
        it measured fastest), every batch goes through it. Otherwise up to FUSED_MATMUL_MAX_ROWS rows on a GPU
        (a draft's forwards, a one-token pass) go through the fused kernel, which never writes W, unless `fused`
        was turned off; more rows (a tree pass) dequantise W once into the scratch and run one GEMM."""
        if self.mode == "perm":
            x = x.index_select(-1, self.perm.to(torch.int64))
        if self.int4 is not None:
            y = int4_matmul(x.reshape(-1, self.in_features), self.int4).view(*x.shape[:-1], self.out_features)
        elif self.fused and fused_matmul_available(x):
            y = fused_gptq_matmul(x.reshape(-1, self.in_features), self.packed).view(*x.shape[:-1], self.out_features)
        else:
            y = torch.matmul(x, self.dequantize(x.dtype))
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y


class GPTQExperts(nn.Module):
    """MoE experts as separate GPTQ linears, with the call signature of transformers 5's fused
    `MixtralExperts` / `Qwen2MoeExperts`: (hidden [T, H], top_k_index [T, k], top_k_weights [T, k]) -> [T, H].

    Routed: each expert dequantises and runs only if some token chose it, on exactly those tokens (as
    transformers' own eager and grouped_mm experts do for 16-bit weights). The (token, expert) pairs are
    grouped by expert with one sort, and one host read per MoE layer learns how many tokens each expert
    got. `names` are the checkpoint's (gate, up, down) linear names: ("w1", "w3", "w2") for Mixtral.
    """

    def __init__(
        self,
        num_experts: int,
        hidden: int,
        intermediate: int,
        names: tuple[str, str, str],
        settings: GPTQSettings,
        scratch: DequantScratch,
        act_fn,
    ) -> None:
        super().__init__()
        self.num_experts, self.names, self.act_fn = num_experts, names, act_fn
        gate, up, down = names
        for e in range(num_experts):
            expert = nn.Module()
            setattr(expert, gate, GPTQLinear(hidden, intermediate, settings, False, scratch))
            setattr(expert, up, GPTQLinear(hidden, intermediate, settings, False, scratch))
            setattr(expert, down, GPTQLinear(intermediate, hidden, settings, False, scratch))
            self.add_module(str(e), expert)

    def forward(
        self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor
    ) -> torch.Tensor:
        gate, up, down = self.names
        top_k = top_k_index.shape[1]
        # pairs [T * k] sorted by expert (stable: by token within an expert); token_of: the pair's token row
        expert_of = top_k_index.reshape(-1)
        order = torch.sort(expert_of, stable=True).indices
        token_of = order // top_k
        pair_weight = top_k_weights.reshape(-1)[order].to(hidden_states.dtype)[:, None]  # [T * k, 1]
        counts = torch.bincount(expert_of, minlength=self.num_experts).tolist()  # host sync: once per MoE layer
        out = torch.zeros_like(hidden_states)
        start = 0
        for e, count in enumerate(counts):
            if count == 0:
                continue  # no token chose this expert: its weights are neither dequantised nor multiplied
            rows = token_of[start : start + count]
            x = hidden_states.index_select(0, rows)  # [count, H]
            expert = getattr(self, str(e))
            h = self.act_fn(getattr(expert, gate)(x)) * getattr(expert, up)(x)
            out.index_add_(0, rows, getattr(expert, down)(h) * pair_weight[start : start + count])
            start += count
        return out
