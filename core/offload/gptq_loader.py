"""GPTQ checkpoints: reading the settings and turning a meta-built model into a GPTQ one.

gpt-fast style transform: the model is built from config on the meta device, then every nn.Linear of a
decoder layer whose `qweight` is in the checkpoint is swapped for a `GPTQLinear` (and fused MoE experts
for `GPTQExperts`). The loader then fills the layer's packed buffers and calls `finalize_gptq_layer`,
which decides each linear's row mode and re-packs act-order weights so groups are contiguous.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from core.errors import ModelFormatError
from core.offload.gptq import (
    SUPPORTED_BITS,
    DequantScratch,
    GPTQExperts,
    GPTQLinear,
    GPTQSettings,
    plan_gptq_rows,
    sort_rows_by_group,
)
from core.offload.sizes import EXPERT_NAMES

QUANTIZE_CONFIG = "quantize_config.json"
EXPERT_PREFIX = {"mixtral": "block_sparse_moe.experts", "qwen2_moe": "mlp.experts"}


def _raw_quantization_config(folder: Path) -> dict | None:
    path = folder / QUANTIZE_CONFIG
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ModelFormatError(f"{path} is not valid JSON ({error})") from error
    config = folder / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text())
        except json.JSONDecodeError as error:
            raise ModelFormatError(f"{config} is not valid JSON ({error})") from error
        quantization = data.get("quantization_config")
        if isinstance(quantization, dict):
            return quantization
    return None


def is_gptq_folder(folder: str | Path) -> bool:
    """True when the folder's quantize_config.json or config.json["quantization_config"] describes GPTQ."""
    raw = _raw_quantization_config(Path(folder))
    if raw is None:
        return False
    method = str(raw.get("quant_method", "gptq")).lower()
    return method == "gptq" and "bits" in raw


def read_gptq_settings(folder: str | Path) -> GPTQSettings | None:
    """GPTQ settings of a folder, or None for an unquantised one.

    Raises: ModelFormatError for another quantisation method, unsupported bits or a bad group size.
    """
    raw = _raw_quantization_config(Path(folder))
    if raw is None:
        return None
    method = str(raw.get("quant_method", "gptq")).lower()
    if method != "gptq":
        raise ModelFormatError(f"quantisation method '{method}' is not supported for offloading; use a GPTQ or a 16-bit model")
    try:
        bits = int(raw["bits"])
        group_size = int(raw.get("group_size", -1))
    except (KeyError, TypeError, ValueError) as error:
        raise ModelFormatError(f"GPTQ settings in {folder} lack a valid 'bits'/'group_size' ({error})") from error
    if bits not in SUPPORTED_BITS:
        raise ModelFormatError(
            f"GPTQ with {bits}-bit weights is not supported; supported: {', '.join(map(str, SUPPORTED_BITS))}-bit "
            f"(4-bit is the common choice)"
        )
    per = GPTQSettings(bits, group_size).block_values
    if group_size != -1 and (group_size <= 0 or group_size % per):
        raise ModelFormatError(f"GPTQ group size {group_size} is not supported: use -1 or a positive multiple of {per}")
    fmt = str(raw.get("checkpoint_format", "gptq")).lower()
    return GPTQSettings(
        bits=bits,
        group_size=group_size,
        desc_act=bool(raw.get("desc_act", False)),
        sym=bool(raw.get("sym", True)),
        zero_offset=0 if fmt == "gptq_v2" else 1,
    )


def quantize_layers(model: nn.Module, model_type: str, keys: set[str], settings: GPTQSettings, scratch: DequantScratch) -> int:
    """Swap nn.Linear (and fused experts) for GPTQ modules in every decoder layer whose checkpoint has
    `qweight` for them. Returns the largest in*out among the GPTQ linears (the scratch size).

    Raises: ModelFormatError when a layer has no quantised linear at all, or a shape does not pack.
    """
    largest = 0
    for index, layer in enumerate(model.model.layers):
        prefix = f"model.layers.{index}."
        swapped = _swap_experts(layer, model_type, prefix, keys, settings, scratch)
        for name, module in list(layer.named_modules()):
            if not isinstance(module, nn.Linear) or f"{prefix}{name}.qweight" not in keys:
                continue
            _check_packable(module.in_features, module.out_features, settings, prefix + name)
            replacement = GPTQLinear(module.in_features, module.out_features, settings, module.bias is not None, scratch)
            parent_name, _, attr = name.rpartition(".")
            setattr(layer.get_submodule(parent_name) if parent_name else layer, attr, replacement)
            swapped += 1
        if swapped == 0:
            raise ModelFormatError(
                f"the GPTQ checkpoint has no quantised weights for decoder layer {index} "
                f"(no '{prefix}...qweight' tensors): is this really a GPTQ model of this architecture?"
            )
        for module in layer.modules():
            if isinstance(module, GPTQLinear):
                largest = max(largest, module.in_features * module.out_features)
    return largest


def _check_packable(in_features: int, out_features: int, settings: GPTQSettings, name: str) -> None:
    per = settings.block_values
    group = in_features if settings.group_size == -1 else settings.group_size
    if in_features % per or in_features % group:
        raise ModelFormatError(f"{name}: {in_features} inputs do not split into {settings.bits}-bit words and groups of {group}")


def _swap_experts(layer: nn.Module, model_type: str, prefix: str, keys: set[str], settings, scratch) -> int:
    names = EXPERT_NAMES.get(model_type)
    if names is None:
        return 0
    mlp = getattr(layer, "mlp", None)
    experts = getattr(mlp, "experts", None)
    if experts is None or f"{prefix}{EXPERT_PREFIX[model_type]}.0.{names[0]}.qweight" not in keys:
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


def check_lm_head(keys: set[str]) -> None:
    if "lm_head.qweight" in keys:
        raise ModelFormatError("GPTQ checkpoints with a quantised lm_head are not supported")

