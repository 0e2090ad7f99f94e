"""Quantised checkpoints (GPTQ, AWQ, compressed-tensors): their GPTQLinear settings, and turning a
meta-built model into one with GPTQ linears.

gpt-fast style transform: the model is built from config on the meta device, then every nn.Linear of a
decoder layer whose packed weight is in the checkpoint is swapped for a `GPTQLinear` (and fused MoE experts
for `GPTQExperts`), the one layout every format is converted into (core.offload.quant_formats). The loader
then fills the layer's packed buffers and calls `finalize_gptq_layer`, which decides each linear's row mode
and re-packs act-order weights so groups are contiguous.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from core.errors import ModelFormatError, UnsupportedFormatError
from core.modeling.model_format import QuantScheme, check_weight_format, quant_scheme
from core.offload.gptq import (
    DequantScratch,
    GPTQExperts,
    GPTQLinear,
    GPTQSettings,
    plan_gptq_rows,
    sort_rows_by_group,
)
from core.planning.sizes import EXPERT_NAMES

EXPERT_PREFIX = {"mixtral": "block_sparse_moe.experts", "qwen2_moe": "mlp.experts", "qwen3_moe": "mlp.experts"}


def is_quantized_folder(folder: str | Path) -> bool:
    """True when the folder's settings describe a format the engine reads as 4-bit (or 2/3/8-bit) linears:
    GPTQ, AWQ or compressed-tensors pack-quantized (core.modeling.model_format). Raises what `quant_scheme` raises
    for a format it does not read."""
    return quant_scheme(Path(folder)) is not None


def read_gptq_settings(folder: str | Path) -> GPTQSettings | None:
    """The GPTQLinear settings a folder's checkpoint converts into, or None for an unquantised one.

    Raises: UnsupportedFormatError, DamagedModelError, ModelFormatError (core.modeling.model_format.check_weight_format).
    """
    return gptq_settings(check_weight_format(Path(folder)))


def gptq_settings(scheme: QuantScheme | None) -> GPTQSettings | None:
    """The GPTQLinear settings of a quantised scheme (None: a 16-bit model)."""
    if scheme is None:
        return None
    return GPTQSettings(
        bits=scheme.bits,
        group_size=scheme.group_size,
        desc_act=scheme.desc_act,
        sym=scheme.sym,
        zero_offset=scheme.zero_offset,
        scale_dtype=scheme.scale_dtype,
        bias_dtype=scheme.bias_dtype,
    )


def quantize_layers(
    model: nn.Module,
    model_type: str,
    keys: set[str],
    settings: GPTQSettings,
    scratch: DequantScratch,
    marker: str = "qweight",
) -> int:
    """Swap nn.Linear (and fused experts) for GPTQ modules in every decoder layer whose checkpoint has its
    packed weight (`marker`: "qweight" for GPTQ and AWQ, "weight_packed" for compressed-tensors). Returns the
    largest in*out among the GPTQ linears (the scratch size).

    Raises: ModelFormatError when a layer has no quantised linear at all, or a shape does not pack.
    """
    largest = 0
    for index, layer in enumerate(model.model.layers):
        prefix = f"model.layers.{index}."
        swapped = _swap_experts(layer, model_type, prefix, keys, settings, scratch, marker)
        for name, module in list(layer.named_modules()):
            if not isinstance(module, nn.Linear) or f"{prefix}{name}.{marker}" not in keys:
                continue
            _check_packable(module.in_features, module.out_features, settings, prefix + name)
            replacement = GPTQLinear(
                module.in_features, module.out_features, settings, module.bias is not None, scratch
            )
            parent_name, _, attr = name.rpartition(".")
            setattr(layer.get_submodule(parent_name) if parent_name else layer, attr, replacement)
            swapped += 1
        if swapped == 0:
            raise ModelFormatError(
                f"the quantised checkpoint has no quantised weights for decoder layer {index} "
                f"(no '{prefix}...{marker}' tensors): is this really a quantised model of this architecture?"
            )
        for module in layer.modules():
            if isinstance(module, GPTQLinear):
                largest = max(largest, module.in_features * module.out_features)
    return largest


def _check_packable(in_features: int, out_features: int, settings: GPTQSettings, name: str) -> None:
    per = settings.block_values
    group = in_features if settings.group_size == -1 else settings.group_size
    if in_features % per or in_features % group:
        raise ModelFormatError(
            f"{name}: {in_features} inputs do not split into {settings.bits}-bit words and groups of {group}"
        )


def _swap_experts(
    layer: nn.Module, model_type: str, prefix: str, keys: set[str], settings, scratch, marker: str
) -> int:
    names = EXPERT_NAMES.get(model_type)
    if names is None:
        return 0
    mlp = getattr(layer, "mlp", None)
    experts = getattr(mlp, "experts", None)
    if experts is None or f"{prefix}{EXPERT_PREFIX[model_type]}.0.{names[0]}.{marker}" not in keys:
        return 0
    count, hidden, intermediate = experts.down_proj.shape
    mlp.experts = GPTQExperts(count, hidden, intermediate, names, settings, scratch, experts.act_fn)
    return 3 * count


def finalize_gptq_layer(layer: nn.Module, tensor_of, work_device: torch.device | None = None) -> None:
    """After a layer's tensors are in the store: choose each GPTQLinear's mode from its g_idx and, for
    act-order, re-pack qweight in place (rows sorted by group) and store the input permutation.

    tensor_of(name) -> the store view of the layer entry `name`. work_device: where to re-pack (a GPU does
    a 70B layer in milliseconds; two CPU cores take ~8 s per layer, so a 70B act-order load gains minutes).
    """
    for name, module in layer.named_modules():
        if not isinstance(module, GPTQLinear):
            continue
        g_idx = tensor_of(f"{name}.g_idx")
        mode, perm = plan_gptq_rows(g_idx, module.group_size)
        if mode == "perm" and module.perm is None:
            mode = "gather"  # act-order rows in a checkpoint that declared desc_act=False: keep rows as they are
        if mode == "perm":
            qweight = tensor_of(f"{name}.qweight")
            if work_device is not None and work_device.type == "cuda":
                qweight.copy_(sort_rows_by_group(qweight.to(work_device), perm.to(work_device), module.bits).cpu())
            else:
                qweight.copy_(sort_rows_by_group(qweight, perm, module.bits))
            tensor_of(f"{name}.perm").copy_(perm)
        module.mode = mode


def check_lm_head(keys: set[str], folder) -> None:
    """Raises UnsupportedFormatError for a checkpoint whose output layer (lm_head) is quantised too."""
    if {"lm_head.qweight", "lm_head.weight_packed"} & keys:
        raise UnsupportedFormatError(
            f"the model in {folder} has its output layer (lm_head) quantised as well, which this app cannot read: "
            "download a version of the model that keeps lm_head in 16 bits (the usual GPTQ, AWQ and W4A16 uploads "
            "do)"
        )
