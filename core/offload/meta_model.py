"""A model folder read as far as its headers: the model built on the meta device, its packed layer layouts,
and where every checkpoint tensor goes. Nothing big is allocated here (core.offload.checkpoint_fill fills).

The meta model is the HF causal LM built from config.json with no memory behind it; GPTQ linears are swapped in
(core.offload.gptq_loader) before the layer layouts are taken, so a layout's size is the exact bytes one layer
holds in the store. The routing maps each checkpoint name to a layer entry (converting a quantised format's
tensor into the GPTQ layout as it is read, core.offload.quant_formats) or to a non-layer weight.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM

from core.modeling.model_files import transformers_config
from core.modeling.model_format import QuantScheme, check_weight_format
from core.offload.checkpoint import (
    checkpoint_files,
    is_ignored,
    map_layer_key,
    read_headers,
)
from core.offload.gptq import DequantScratch, GPTQSettings
from core.offload.gptq_loader import check_lm_head, gptq_settings, quantize_layers
from core.offload.layout import LayerLayout, layer_layout
from core.offload.quant_formats import CheckpointFormat

log = logging.getLogger(__name__)

EMBEDDING_KEY = "model.embed_tokens.weight"


def meta_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def build_meta_model(config, dtype: torch.dtype) -> nn.Module:
    """The HF causal LM from config, on the meta device (no memory), quantisation settings removed."""
    config = config.__class__.from_dict(config.to_dict())
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def top_level_tensors(model: nn.Module) -> dict[str, tuple[nn.Module, str, bool, torch.Tensor]]:
    """Non-layer parameters/persistent buffers: name -> (owner module, attribute, is_parameter, meta tensor)."""
    found = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        if module_name.startswith("model.layers") or module_name.endswith("rotary_emb"):
            continue
        prefix = f"{module_name}." if module_name else ""
        for attr, tensor in module._parameters.items():
            if tensor is not None:
                found[prefix + attr] = (module, attr, True, tensor)
        for attr, tensor in module._buffers.items():
            if tensor is not None and attr not in module._non_persistent_buffers_set:
                found[prefix + attr] = (module, attr, False, tensor)
    return found


@dataclass(frozen=True)
class Checkpoint:
    """A model folder read as far as its headers: the meta-built model (GPTQ linears swapped in), its
    packed layer layouts, and where each checkpoint tensor goes. Nothing big is allocated yet."""

    files: list[Path]
    config: object
    scheme: QuantScheme | None
    settings: GPTQSettings | None
    infos: dict
    model: nn.Module
    scratch: DequantScratch
    largest_linear: int
    layouts: list[LayerLayout]
    top_meta: dict
    top_bytes: int
    targets: dict

    @property
    def largest_tensor(self) -> int:
        """Bytes of the biggest checkpoint tensor (read whole while loading)."""
        return max((info.nbytes for info in self.infos.values()), default=0)

    @property
    def checkpoint_format(self) -> CheckpointFormat | None:
        """How the checkpoint's quantised tensors become GPTQ buffers (None: a 16-bit model)."""
        return CheckpointFormat(self.scheme) if self.scheme is not None else None


def read_checkpoint(folder: Path, dtype: torch.dtype) -> Checkpoint:
    files = checkpoint_files(folder)
    config = transformers_config(folder, folder.name)
    scheme = check_weight_format(folder)  # refuses unread formats and damaged files before any weight is read
    infos = read_headers(files)
    settings = gptq_settings(scheme)
    keys = set(infos)
    model = build_meta_model(config, dtype)
    scratch = DequantScratch()
    largest_linear = 0
    fmt = CheckpointFormat(scheme) if scheme is not None else None  # None: a 16-bit checkpoint
    if settings is not None:
        check_lm_head(keys, folder)
        largest_linear = quantize_layers(model, config.model_type, keys, settings, scratch, fmt.marker)
    canonical: dict[LayerLayout, LayerLayout] = {}
    layouts = [canonical.setdefault(layout, layout) for layout in map(layer_layout, model.model.layers)]
    top_meta = top_level_tensors(model)
    top_bytes = sum(meta_bytes(t) for _, _, _, t in {id(v[3]): v for v in top_meta.values()}.values())
    targets = _route_tensors(config.model_type, keys, layouts, top_meta, fmt)
    return Checkpoint(
        files, config, scheme, settings, infos, model, scratch, largest_linear, layouts, top_meta, top_bytes, targets
    )


def _route_tensors(
    model_type: str, keys: set[str], layouts: list[LayerLayout], top_meta: dict, fmt: CheckpointFormat | None = None
) -> dict:
    """Where every checkpoint tensor goes, from the headers only: None for a non-layer weight, else a
    LayerTarget (with the conversion of a quantised format's tensor into the GPTQ layout). Tensors the model
    has no place for are left out (and logged)."""

    def has_entry(layer: int, name: str) -> bool:
        return layer < len(layouts) and layouts[layer].entry(name) is not None

    def entry_shape(layer: int, name: str):
        return layouts[layer].entry(name).shape

    targets, unused = {}, []
    for key in sorted(keys):
        if key in top_meta:
            targets[key] = None
            continue
        translated = fmt.translate(key) if fmt is not None else (key, None)
        if translated is None:
            continue  # a tensor that carries nothing to load
        name, convert = translated
        if (target := map_layer_key(model_type, name, has_entry, entry_shape)) is not None:
            targets[key] = dataclasses.replace(target, convert=convert)
        elif not is_ignored(key):
            unused.append(key)
    if unused:
        log.warning(
            "ignoring %d checkpoint tensors the model has no place for, e.g. %s", len(unused), ", ".join(unused[:3])
        )
    return targets
