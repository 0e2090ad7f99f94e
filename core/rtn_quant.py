"""Round-to-nearest (RTN) weight quantisation, simulated: quantise then dequantise straight back.

Used to make the built-in draft model: the same SmolLM2 weights with every decoder linear layer rounded to
4 bits, so it is a cheaper-quality copy of the target (what a real 4-bit draft of a big model looks like).

Scheme, per group of `group_size` consecutive weights along the INPUT dimension of each output row
(the layout GPTQ / AWQ checkpoints use): asymmetric, with `levels = 2**bits - 1`
    lo = min(group, 0), hi = max(group, 0)
    scale = (hi - lo) / levels
    zero  = clamp(round(-lo / scale), 0, levels)
    q     = clamp(round(w / scale) + zero, 0, levels)
    w'    = (q - zero) * scale
The range is widened to include 0 (as GPTQ's quantiser does) so that a group whose weights all have one sign
still gets an error of at most scale / 2 per element; for the usual mixed-sign group lo/hi are just the
group's min/max. An all-zero group (scale 0) stays zero.
"""

from __future__ import annotations

import torch
from torch import nn


def rtn_quantize_dequantize(weight: torch.Tensor, bits: int = 4, group_size: int = 64) -> torch.Tensor:
    """Quantise a 2-D `[out_features, in_features]` weight to `bits` bits in groups along the input dim,
    and return the dequantised weight (same shape, dtype and device). Vectorised over all groups."""
    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D [out, in] weight, got shape {tuple(weight.shape)}")
    if not 1 <= bits <= 16:
        raise ValueError(f"bits must be in 1..16, got {bits}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    out_features, in_features = weight.shape
    levels = float(2**bits - 1)
    work_dtype = torch.float64 if weight.dtype == torch.float64 else torch.float32
    pad = (-in_features) % group_size
    if pad:
        # Repeat the last column: the padded entries leave the last group's min/max unchanged.
        w = torch.cat([weight.detach(), weight.detach()[:, -1:].expand(out_features, pad)], dim=1).to(work_dtype)
    else:
        w = weight.detach().to(work_dtype, copy=True)
    # groups: [out, n_groups, group_size]; worked on in place (fresh allocations cost more than the math)
    groups = w.reshape(out_features, -1, group_size)
    lo, hi = torch.aminmax(groups, dim=-1, keepdim=True)
    lo, hi = lo.clamp(max=0), hi.clamp(min=0)
    scale = (hi - lo) / levels
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # all-zero group: any scale gives zeros
    zero = torch.round(-lo / scale).clamp_(0, levels)
    groups.div_(scale).round_().add_(zero).clamp_(0, levels)  # q
    groups.sub_(zero).mul_(scale)  # dequantised
    dequantised = w[:, :in_features].contiguous() if pad else w
    return dequantised.to(weight.dtype)


def quantize_decoder_linears(model: nn.Module, bits: int = 4, group_size: int = 64) -> int:
    """RTN-quantise (in place, dequantised) the weight of every nn.Linear inside `model.model.layers`
    (q/k/v/o projections and the MLP's gate/up/down). Embeddings and lm_head are left alone.
    Returns the number of layers changed."""
    layers = model.model.layers
    count = 0
    with torch.no_grad():
        for module in layers.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(rtn_quantize_dequantize(module.weight, bits=bits, group_size=group_size))
                count += 1
    return count
