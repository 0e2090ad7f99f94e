"""Round-to-nearest (RTN) weight quantisation, simulated: quantise then dequantise straight back.

Used to make the built-in draft model: the same SmolLM2 weights with every decoder linear layer rounded to
4 bits, so it is a cheaper-quality copy of the target (what a real 4-bit draft of a big model looks like).
`save_gptq_checkpoint` writes a model as a real GPTQ folder instead (packed 4-bit weights, GPTQ's
symmetric scheme): the 4-bit drafts whose exactness and acceptance are measured here.

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

import json

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


# --- real GPTQ checkpoints ---------------------------------------------------------------------------------


def gptq_rtn_tensors(weight: torch.Tensor, bits: int = 4, group_size: int = 128) -> dict[str, torch.Tensor]:
    """The GPTQ checkpoint tensors of one `[out_features, in_features]` linear, rounded to nearest: the
    symmetric scheme GPTQ checkpoints use (sym=True, v1 format, no act-order), without GPTQ's error feedback.

    Per group of `group_size` inputs of each output: scale = 2 * max|w| / (2^bits - 1) (1 for an all-zero
    group), zero = 2^(bits-1), q = clamp(round(w / scale) + zero, 0, 2^bits - 1), so W = scale * (q - zero)
    with the float16 scale that is stored. Layout as in core.offload.gptq (`qzeros` holds zero - 1).
    """
    from core.offload.gptq import GPTQSettings, pack_rows

    if weight.dim() != 2:
        raise ValueError(f"expected a 2-D [out, in] weight, got shape {tuple(weight.shape)}")
    out_features, in_features = weight.shape
    size = in_features if group_size == -1 else group_size
    per = GPTQSettings(bits, group_size).block_values
    if in_features % size or in_features % per or out_features % per:
        raise ValueError(
            f"a {out_features} x {in_features} weight does not split into groups of {size} and {bits}-bit words"
        )
    levels, zero = 2**bits - 1, 2 ** (bits - 1)
    groups = weight.detach().double().T.reshape(in_features // size, size, out_features)  # [G, size, N]
    peak = groups.abs().amax(dim=1)  # [G, N]
    scales = torch.where(peak > 0, 2 * peak / levels, torch.ones_like(peak)).half()
    q = (groups / scales.double()[:, None, :]).round().add(zero).clamp(0, levels).long()
    stored_zeros = torch.full((out_features, scales.shape[0]), zero - 1, dtype=torch.int64)
    return {
        "qweight": pack_rows(q.reshape(in_features, out_features), bits),
        "qzeros": pack_rows(stored_zeros, bits).T.contiguous(),
        "scales": scales.contiguous(),
        "g_idx": (torch.arange(in_features, dtype=torch.int32) // size).contiguous(),
    }


def save_gptq_checkpoint(
    model: nn.Module, folder, bits: int = 4, group_size: int = 128, dtype: torch.dtype = torch.float16
) -> int:
    """Write a transformers causal LM as a GPTQ model folder (config.json with its quantization_config,
    model.safetensors): every nn.Linear of the decoder layers through `gptq_rtn_tensors`, the other weights
    (embeddings, norms, lm_head) in `dtype`. A tokenizer is the caller's to save. Returns the linears
    quantised. Used to make a 4-bit copy of a draft whose acceptance and exactness can be measured here."""
    from pathlib import Path

    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    quantised = {
        f"model.layers.{name}" for name, module in model.model.layers.named_modules() if isinstance(module, nn.Linear)
    }
    tensors: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if name in quantised:
            tensors.update(
                {f"{name}.{part}": value for part, value in gptq_rtn_tensors(module.weight, bits, group_size).items()}
            )
            if module.bias is not None:
                tensors[f"{name}.bias"] = module.bias.detach().half().contiguous()
    for name, parameter in model.named_parameters():
        if name.rpartition(".")[0] not in quantised:
            tensors[name] = parameter.detach().to(dtype).contiguous()
    config = model.config.to_dict()
    config["quantization_config"] = {
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group_size,
        "desc_act": False,
        "sym": True,
        "checkpoint_format": "gptq",
    }
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file(tensors, str(folder / "model.safetensors"))
    return len(quantised)
