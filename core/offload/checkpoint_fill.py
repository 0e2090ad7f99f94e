"""Filling the allocated blocks from a checkpoint, and the checks that every weight came.

`fill_and_finish` reads every tensor once, in file order, into its place (a layer block's slice, or a
non-layer weight that `materialise_top_level` allocated), checks nothing is missing (or takes the format's
default: computed g_idx, symmetric zero points), finalises the GPTQ layers and rebuilds the rotary embedding
on the device. What goes where was decided from the headers (core.offload.meta_model.read_checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from core.errors import ModelFormatError
from core.offload.checkpoint import expected_parts, iter_tensors
from core.offload.gptq_loader import finalize_gptq_layer
from core.offload.meta_model import Checkpoint, top_level_tensors
from core.offload.quant_formats import CheckpointFormat
from core.offload.weight_store import LayerBlock

Progress = Callable[[int, int], None]


def materialise_top_level(model: nn.Module, device: torch.device, host_names: set[str]) -> dict[str, torch.Tensor]:
    """Allocate non-layer weights on `device` (those in `host_names` in host RAM), keeping ties (a tied
    lm_head shares the embedding)."""
    allocated: dict[int, torch.Tensor] = {}
    targets: dict[str, torch.Tensor] = {}
    for name, (module, attr, is_parameter, meta) in top_level_tensors(model).items():
        real = allocated.get(id(meta))
        if real is None:
            real = torch.empty(meta.shape, dtype=meta.dtype, device="cpu" if name in host_names else device)
            real = nn.Parameter(real, requires_grad=False) if is_parameter else real
            allocated[id(meta)] = real
        (module._parameters if is_parameter else module._buffers)[attr] = real
        targets[name] = real
    return targets


def _rebuild_rotary(model: nn.Module, device: torch.device) -> None:
    inner = model.model
    inner.rotary_emb = type(inner.rotary_emb)(config=inner.config).to(device)


def fill_and_finish(
    ck: Checkpoint,
    blocks: tuple[LayerBlock, ...],
    top: dict,
    device: torch.device,
    dtype: torch.dtype,
    progress: Progress | None,
) -> None:
    """Read every tensor into `blocks` / `top`, check nothing is missing, finalise GPTQ layers (act-order
    re-pack, the shared scratch) and rebuild the rotary embedding on `device`."""
    _fill(ck.files, ck.infos, ck.targets, top, blocks, progress, device if device.type == "cuda" else None)
    _check_complete(blocks, ck.layouts, ck.targets, top, ck.config, ck.settings, ck.checkpoint_format)
    if ck.settings is not None:
        for index, layer in enumerate(ck.model.model.layers):
            block = _block_of(blocks, index)
            finalize_gptq_layer(layer, lambda name, i=index, b=block: b.tensor(i, name), device)
        ck.scratch.reserve(ck.largest_linear, dtype, device)
    _rebuild_rotary(ck.model, device)
    if device.type != "meta":  # on the meta device standing in for a GPU every weight is a meta tensor
        _check_no_meta_outside_layers(ck.model)


def _block_of(blocks: tuple[LayerBlock, ...], layer: int) -> LayerBlock:
    """The block (host store or resident device block) that holds `layer`."""
    return next(block for block in blocks if layer in block)


def _fill(
    files,
    infos,
    targets,
    top,
    blocks: tuple[LayerBlock, ...],
    progress: Progress | None,
    work_device: torch.device | None = None,
) -> None:
    """Read every wanted tensor once and copy it to its place (a layer block's slice or a non-layer tensor).
    A tensor of another format is converted into the GPTQ layout on `work_device` when given (a GPU turns a
    70B layer around in milliseconds; a processor takes seconds: docs/benchmarks.md, issue 32)."""
    total = sum(infos[key].nbytes for key in targets)
    done = 0
    for key, tensor in iter_tensors(files, set(targets)):
        target = targets[key]
        if target is None:
            destination = top[key]
        else:
            destination = _block_of(blocks, target.layer).tensor(target.layer, target.name)
            if target.part is not None:
                destination = target.part(destination)
            if target.convert is not None:
                if work_device is not None:
                    tensor = tensor.to(work_device)
                try:
                    tensor = target.convert(tensor, tuple(destination.shape))
                except ModelFormatError as error:
                    raise ModelFormatError(f"tensor {key}: {error}") from error
        if tuple(destination.shape) != tuple(tensor.shape):
            raise ModelFormatError(
                f"tensor {key} has shape {tuple(tensor.shape)} in the checkpoint but the model built from "
                f"config.json expects {tuple(destination.shape)}: does config.json belong to these weights?"
            )
        with torch.no_grad():
            destination.copy_(tensor)
        done += infos[key].nbytes
        if progress is not None:
            progress(done, total)
    if progress is not None and done == 0:
        progress(0, total)


def _check_complete(blocks, layouts, targets, top, config, settings, fmt: CheckpointFormat | None) -> None:
    """Every layer entry and non-layer weight must have come from the checkpoint (or have a default: the
    format's computed g_idx or symmetric zero points)."""
    filled: dict[tuple[int, str], set] = {}
    for target in targets.values():
        if target is not None:
            filled.setdefault((target.layer, target.name), set()).add(target.part_id)
    missing = []
    for index, layout in enumerate(layouts):
        for entry in layout.entries:
            parts = filled.get((index, entry.name), set())
            if None in parts or len(parts) >= expected_parts(entry.name, entry.shape):
                continue
            if entry.name.endswith(".perm"):
                continue  # computed from g_idx by finalize_gptq_layer
            default = fmt.default(entry.name, entry.shape, settings.group_size) if fmt is not None else None
            if default is not None:
                _block_of(blocks, index).tensor(index, entry.name).copy_(default)
                continue
            missing.append(f"model.layers.{index}.{entry.name}")
    present = {key for key, target in targets.items() if target is None}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    for name in top:
        if name not in present and not (tied and name == "lm_head.weight"):
            missing.append(name)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ModelFormatError(
            f"the checkpoint lacks {len(missing)} tensors the model needs ({shown}): are all shards present, "
            f"and does config.json belong to these weights?"
        )


def _check_no_meta_outside_layers(model: nn.Module) -> None:
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        if tensor.is_meta and not name.startswith("model.layers."):
            raise ModelFormatError(f"no weights for {name} in the checkpoint")
