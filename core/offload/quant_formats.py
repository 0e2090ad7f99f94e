"""Converting each quantised checkpoint format into the engine's one 4-bit layout, tensor by tensor, at load.

The engine keeps every quantised linear as a `GPTQLinear` (core.offload.gptq): qweight int32 [K*b/32, N]
packed along the input dim, qzeros int32 [G, N*b/32] packed along the output dim, scales [G, N], g_idx [K],
W[k, n] = scales[g[k], n] * (q[k, n] - z[g[k], n] - zero_offset). The host store, the fused Triton kernels,
offloading, 4-bit drafts and the speed model know only that layout. Each format's tensors are converted into
it as they are read (`CheckpointFormat.translate`), so the store holds converted bytes and a streamed layer
costs the same whatever its checkpoint's format (docs/benchmarks.md, issue 32, has the conversion rates).

The conversions only move bits; no value is recomputed, so the dequantised weights are exactly the format's
own (tests/test_quant_formats.py checks them against each format's reference dequantisation):

- GPTQ v1 / v2: the layout itself (zero_offset 1 for v1's zeros-minus-one, 0 for v2).
- AWQ GEMM (AutoAWQ; read as vLLM's awq_triton.py and AutoAWQ's awq/utils/packing_utils.py read it):
  qweight int32 [K, N/8] packed along the OUTPUT dim, nibble i of word c holding column 8c + (0, 2, 4, 6, 1,
  3, 5, 7)[i]; qzeros int32 [G, N/8] packed the same way, zero points as they are; scales fp16 [G, N];
  W[k, n] = (q - z) * s. Converted: qweight unpacked and re-packed along the input dim, the zeros' nibbles put
  in column order; zero_offset 0.
- compressed-tensors pack-quantized (compressed_tensors/compressors/pack_quantized): weight_packed int32
  [N, K*b/32], the values of each output row one little-endian bit stream along the input dim, stored as
  q + 2^(b-1); weight_scale [N, G]; asymmetric: weight_zero_point int32 [N*b/32, G] packed along the output
  dim with the same offset; act-order: weight_g_idx [K]; W[n, k] = (q - zp) * s. The bit stream is the GPTQ
  layout's, transposed: qweight = weight_packed.T, qzeros = weight_zero_point.T, scales = weight_scale.T; the
  offsets cancel in q - zp, and a symmetric scheme's zero point is the offset itself (2^(b-1)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.errors import ModelFormatError
from core.modeling.model_format import QuantScheme
from core.offload.gptq import pack_rows, pack_rows_4bit_u8
from core.planning.sizes import block_shape

# AutoAWQ's packing order: nibble i of a word holds column 8c + AWQ_ORDER[i]
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
# packed words converted per step: bounds the uint8 temporaries to ~K x 4,096 bytes
_COLUMN_WORDS = 512

Convert = Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor]


@dataclass(frozen=True)
class Route:
    """Where a checkpoint tensor of a quantised linear goes: the GPTQLinear buffer `entry` ("qweight", ...)
    and how it becomes that buffer (None: as it is). convert(tensor, buffer shape) -> tensor of that shape."""

    entry: str
    convert: Convert | None = None


def _expect(tensor: torch.Tensor, shape: tuple[int, ...], what: str) -> None:
    if tuple(tensor.shape) != tuple(shape):
        raise ModelFormatError(
            f"a {what} tensor has shape {tuple(tensor.shape)} but the model built from config.json needs "
            f"{tuple(shape)}: does config.json belong to these weights?"
        )


def _awq_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """int32 [R, W] AWQ-packed -> uint8 [R, 8W] of the values in column order.

    Byte j of a little-endian word holds nibbles 2j (low) and 2j + 1 (high), i.e. columns AWQ_ORDER[2j] and
    AWQ_ORDER[2j + 1]: byte 0 columns 0 and 2, byte 1 columns 4 and 6, byte 2 columns 1 and 3, byte 3
    columns 5 and 7. Stacking the eight nibble planes in column order is one pass (a gather by index is
    several times slower on a 70B layer: docs/benchmarks.md, issue 32)."""
    rows, words = packed.shape
    raw = packed.contiguous().view(torch.uint8).view(rows, words, 4)
    low, high = raw & 15, raw >> 4
    columns = (
        low[..., 0],
        low[..., 2],
        high[..., 0],
        high[..., 2],
        low[..., 1],
        low[..., 3],
        high[..., 1],
        high[..., 3],
    )
    return torch.stack(columns, dim=-1).view(rows, words * 8)


def awq_qweight(qweight: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """AWQ qweight int32 [K, N/8] (packed along the output dim) -> int32 [K/8, N] packed along the input dim."""
    k, words = qweight.shape
    _expect(qweight, (shape[0] * 8, shape[1] // 8), "AWQ qweight")
    out = torch.empty(shape, dtype=torch.int32, device=qweight.device)
    for w0 in range(0, words, _COLUMN_WORDS):
        w1 = min(words, w0 + _COLUMN_WORDS)
        out[:, w0 * 8 : w1 * 8] = pack_rows_4bit_u8(_awq_nibbles(qweight[:, w0:w1]))  # [K, 8w] -> [K/8, 8w]
    return out


def awq_qzeros(qzeros: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """AWQ qzeros int32 [G, N/8] -> the same shape with each word's nibbles in column order."""
    _expect(qzeros, shape, "AWQ qzeros")
    values = _awq_nibbles(qzeros).view(shape[0], shape[1], 4, 2)  # [G, W, byte, low/high]
    return (values[..., 0] | (values[..., 1] << 4)).contiguous().view(torch.int32).view(shape)


def transposed(what: str) -> Convert:
    """A compressed-tensors tensor that is the layout's, transposed (weight_packed, weight_scale)."""

    def convert(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        _expect(tensor, (shape[1], shape[0]), what)
        return tensor.t().contiguous()

    return convert


def ct_zero_point(bits: int) -> Convert:
    """compressed-tensors weight_zero_point int32 [ceil(N*b/32), G] -> qzeros [G, packed_rows(N, b)]: the
    transpose, padded with zero words where whole packing blocks need more (3-bit)."""

    def convert(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        if tensor.dim() != 2 or tensor.shape[1] != shape[0] or tensor.shape[0] > shape[1]:
            _expect(tensor, (shape[1], shape[0]), "compressed-tensors weight_zero_point")
        out = torch.zeros(shape, dtype=torch.int32, device=tensor.device)
        out[:, : tensor.shape[0]] = tensor.t()
        return out

    return convert


def g_idx(tensor: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    _expect(tensor, shape, "g_idx")
    return tensor.to(torch.int32)


@dataclass(frozen=True)
class CheckpointFormat:
    """How one quantised format's tensor names and layouts map onto GPTQLinear buffers."""

    scheme: QuantScheme

    @property
    def marker(self) -> str:
        """The tensor whose presence makes a linear quantised in the checkpoint."""
        return "weight_packed" if self.scheme.method == "compressed-tensors" else "qweight"

    def translate(self, key: str) -> tuple[str, Convert | None] | None:
        """A checkpoint name -> (the GPTQLinear buffer's name, its conversion); None for a tensor that carries
        nothing to load (compressed-tensors' weight_shape: the shapes are checked on the other tensors).
        Names that are not a quantised linear's come back as they are."""
        base, _, suffix = key.rpartition(".")
        method = self.scheme.method
        if method == "awq":
            route = {"qweight": Route("qweight", awq_qweight), "qzeros": Route("qzeros", awq_qzeros)}.get(suffix)
        elif method == "compressed-tensors":
            if suffix == "weight_shape":
                return None
            route = {
                "weight_packed": Route("qweight", transposed("compressed-tensors weight_packed")),
                "weight_scale": Route("scales", transposed("compressed-tensors weight_scale")),
                "weight_zero_point": Route("qzeros", ct_zero_point(self.scheme.bits)),
                "weight_g_idx": Route("g_idx", g_idx),
            }.get(suffix)
        else:
            route = Route("g_idx", g_idx) if suffix == "g_idx" else None
        if route is None:
            return key, None
        return f"{base}.{route.entry}", route.convert

    def default(self, entry: str, shape: tuple[int, ...], group_size: int) -> torch.Tensor | None:
        """A buffer the checkpoint need not hold, computed: g_idx of consecutive groups (AWQ, old GPTQ,
        compressed-tensors without act-order), and a symmetric compressed-tensors scheme's zero points
        (2^(b-1), the offset its values are stored with). None: the checkpoint must hold it."""
        if entry.endswith(".g_idx"):
            size = shape[0] if group_size == -1 else group_size
            return torch.arange(shape[0], dtype=torch.int32) // size
        if entry.endswith(".qzeros") and self.scheme.method == "compressed-tensors" and self.scheme.sym:
            bits = self.scheme.bits
            per, words = block_shape(bits)
            columns = shape[1] // words * per
            middle = torch.full((columns, shape[0]), 1 << (bits - 1), dtype=torch.int32)
            return pack_rows(middle, bits).t().contiguous()  # [G, packed_rows(columns, bits)]
        return None
