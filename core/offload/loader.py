"""Loading a quantised (GPTQ, AWQ, compressed-tensors) or 16-bit safetensors folder as an OffloadedLM.

Order matters for memory: the model is built on the meta device (no weights), the layer layouts give the
exact sizes, the residency plan is made and host RAM and VRAM are checked BEFORE anything big is allocated,
then the host store (streamed layers only) and the device block (resident layers) are allocated and filled
tensor by tensor from each shard: a resident layer goes from the checkpoint straight to the GPU, so peak
host RAM is the streamed layers, the embedding table (kept in host RAM, see core.offload.host_embedding)
and one tensor.

`load_on_device` is the other route, for a 4-bit draft: the same checkpoint reading, every weight in one
device block, nothing streams.

Every quantised format is converted tensor by tensor, as it is read, into the one GPTQ layout the store,
the kernels and the streaming know (core.offload.quant_formats); the folder's format is checked before
anything is read (core.modeling.model_format.check_weight_format), so a format the engine does not read is refused
in words, not after minutes of loading.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM

from core.modeling.causal_lm import CausalLM, check_architecture
from core.errors import InsufficientVRAMError, InvalidSettingError, ModelFormatError
from core.modeling.model_format import QuantScheme, check_weight_format
from core.planning import residency
from core.offload.draft_kernels import apply_draft_kernel, choose_draft_kernel
from core.offload.checkpoint import (
    checkpoint_files,
    expected_parts,
    is_ignored,
    iter_tensors,
    map_layer_key,
    read_headers,
)
from core.offload.gptq import DequantScratch, GPTQSettings
from core.offload.gptq_loader import check_lm_head, finalize_gptq_layer, gptq_settings, quantize_layers
from core.offload.quant_formats import CheckpointFormat
from core.offload.host_embedding import HostEmbedding
from core.offload.layout import LayerBinding, LayerLayout, layer_layout
from core.offload.offloaded_lm import OffloadedLM, OffloadReport
from core.offload.streaming import LayerStreamer
from core.planning.host_memory import check_host_memory, embedding_in_host_ram, host_bytes_needed, host_table_bytes
from core.planning.sizes import gptq_scratch_bytes
from core.offload.weight_store import HostWeightStore, LayerBlock

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
EMBEDDING_KEY = "model.embed_tokens.weight"


def _dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _meta_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _read_config(folder: Path):
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise ModelFormatError(f"cannot read config.json in {folder}: {error}") from error
    check_architecture(config.model_type)
    return config


def build_meta_model(config, dtype: torch.dtype) -> nn.Module:
    """The HF causal LM from config, on the meta device (no memory), quantisation settings removed."""
    config = config.__class__.from_dict(config.to_dict())
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def _eos_ids(folder: Path, config) -> tuple[int, ...]:
    ids: list[int] = []
    for source in (config.eos_token_id, _generation_eos(folder)):
        if source is None:
            continue
        for value in source if isinstance(source, (list, tuple)) else [source]:
            if int(value) not in ids:
                ids.append(int(value))
    return tuple(ids)


def _generation_eos(folder: Path):
    path = folder / "generation_config.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get("eos_token_id")
    except json.JSONDecodeError:
        return None


def _top_level_tensors(model: nn.Module) -> dict[str, tuple[nn.Module, str, bool, torch.Tensor]]:
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


def _materialise_top_level(model: nn.Module, device: torch.device, host_names: set[str]) -> dict[str, torch.Tensor]:
    """Allocate non-layer weights on `device` (those in `host_names` in host RAM), keeping ties (a tied
    lm_head shares the embedding)."""
    allocated: dict[int, torch.Tensor] = {}
    targets: dict[str, torch.Tensor] = {}
    for name, (module, attr, is_parameter, meta) in _top_level_tensors(model).items():
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


def load_offloaded(
    folder: str,
    device: str,
    dtype: torch.dtype,
    vram_budget_bytes: int | None = None,
    resident_layers: int | str = "auto",
    progress: Progress | None = None,
    *,
    n_slots: int = residency.DEFAULT_SLOTS,
    tree_budget: int = 128,
    context_length: int | None = None,
    draft_weight_bytes: int = 0,
    draft_kv_bytes: int = 0,
    draft_graph_bytes: int = 0,
    stream_on_cpu: bool = False,
    record_trace: bool = False,
    available_ram_bytes: int | None = None,
) -> OffloadedLM:
    """Load a quantised (GPTQ, AWQ, compressed-tensors) or 16-bit safetensors model folder with its decoder
    layers in (pinned) host RAM.

    folder: config.json + model.safetensors or sharded with model.safetensors.index.json; quantisation
        settings from quantize_config.json or config.json["quantization_config"] (core.modeling.model_format).
    device: "cuda[:i]" streams layers through a ring of `n_slots` GPU slots; "cpu" keeps every layer in
        host RAM and binds it in place (nothing streams) unless `stream_on_cpu` (tests: the GPU's placement
        and ring on the CPU, with memcpy: resident layers in their own block, the embedding table apart).
        "meta" with `stream_on_cpu` (tests): the same placement with the device's tensors on the meta device,
        which stands in for a GPU (shapes only): an op that mixes it with a host tensor raises, as on CUDA.
    dtype: compute dtype (float16/bfloat16 on a GPU; float32 on a CPU). 16-bit checkpoints are stored in
        this dtype; quantised tensors stay packed (converted to the GPTQ layout) and dequantise into it.
    vram_budget_bytes: VRAM the target's weights may use (non-layer weights, dequantisation scratch, slots,
        resident layers). None: free VRAM - draft weights (`draft_weight_bytes`) - target and draft KV
        caches (the planned context + `tree_budget` + 1 rows; `draft_kv_bytes`) - what the draft's CUDA
        graphs keep (`draft_graph_bytes`, core/planning/graph_plan.py) - activations of a prefill
        chunk plus a `tree_budget` tree - a margin (core.planning.residency.default_vram_budget).
    context_length: the planned context (None: 4,096 or the model's limit if lower); the result's
        `max_context`, and the rows its KV caches are preallocated with.
    resident_layers: "auto" = as many as fit in the budget after the ring; or an explicit count.
    progress: called as progress(bytes_done, bytes_total) after each tensor read.

    Raises: ModelNotFoundError, ModelFormatError (bad folder, missing tensors, shapes), UnsupportedFormatError
    (a format the engine does not read, before anything is read), DamagedModelError (truncated files, missing
    shards), UnsupportedArchitectureError, InsufficientHostMemoryError (checked before loading starts),
    InsufficientVRAMError (budget too small even for a tree of one token, or an explicit budget / resident
    count that does not fit). With the default budget, a tree budget whose activations leave too little VRAM
    is halved until it fits: the result's `max_tree_tokens` and `report` say so.
    InvalidSettingError (bad device / resident count).
    """
    folder_path = Path(folder)
    device = _check_device(device, stream_on_cpu)
    ck = _read_checkpoint(folder_path, dtype)
    config, model, layouts, top_meta = ck.config, ck.model, ck.layouts, ck.top_meta
    top_bytes = ck.top_bytes
    layers = model.model.layers
    context = _context(config, context_length)

    # Plan and memory checks before any big allocation.
    streaming = device.type == "cuda" or stream_on_cpu
    tied = bool(getattr(config, "tie_word_embeddings", False))
    embedding_on_host = embedding_in_host_ram(streaming, tied) and EMBEDDING_KEY in top_meta
    embedding_bytes = _meta_bytes(top_meta[EMBEDDING_KEY][3]) if EMBEDDING_KEY in top_meta else 0
    scratch_bytes = gptq_scratch_bytes(ck.largest_linear, _dtype_bytes(dtype))
    fixed_bytes = residency.device_fixed_bytes(top_bytes, embedding_bytes, embedding_on_host, scratch_bytes)
    plan, fit = _plan_device(config, device, dtype, layouts, fixed_bytes, vram_budget_bytes, resident_layers, n_slots,
                             tree_budget, context, draft_weight_bytes, draft_kv_bytes, draft_graph_bytes, stream_on_cpu)
    lowered = fit if fit is not None and fit.lowered else None  # the tree budget VRAM forced down, if any
    resident = plan.resident if streaming else tuple(range(len(layouts)))
    streamed = [i for i in range(len(layouts)) if i not in set(resident)]
    host_tables = host_table_bytes(top_bytes, embedding_bytes, streaming, embedding_on_host)
    host_layers = sum(layouts[i].nbytes for i in (streamed if streaming else range(len(layouts))))
    host_needed = host_bytes_needed(host_layers, ck.largest_tensor, host_tables)
    check_host_memory(host_needed, available_ram_bytes, what=f"the offloaded weights of {folder_path.name}")

    store = HostWeightStore(layouts, pin=device.type == "cuda", layers=streamed)
    resident_block = LayerBlock(layouts, resident, device)
    top = _materialise_top_level(model, device, {EMBEDDING_KEY} if embedding_on_host else set())
    _fill_and_finish(ck, (store, resident_block), top, device, dtype, progress)
    if embedding_on_host:
        model.model.embed_tokens = HostEmbedding(top[EMBEDDING_KEY], device)

    streamer = LayerStreamer(store, layers, resident, plan.n_slots or 1, device, stream=streaming,
                             record_trace=record_trace, resident_block=resident_block)
    weight_format = ck.scheme.label if ck.scheme is not None else f"{dtype}".replace("torch.", "")
    report = OffloadReport(
        weight_format=weight_format,
        n_layers=len(layers),
        resident_layers=streamer.resident if streaming else (),
        n_slots=streamer.n_slots,
        layer_bytes=max(layout.nbytes for layout in layouts),
        bytes_streamed_per_pass=streamer.bytes_streamed_per_pass if streaming else 0,
        device_layer_bytes=streamer.device_bytes,
        device_fixed_bytes=fixed_bytes if streaming else 0,
        host_store_bytes=store.nbytes if streaming else resident_block.nbytes,
        pinned=store.pinned,
        pinned_bytes=store.pinned_bytes,
        streaming=streaming,
        budget_bytes=plan.budget_bytes,
        tree_budget_fit=lowered,
        host_table_bytes=host_tables,
        host_ram_bytes=host_needed,
    )
    return OffloadedLM(
        model=model,
        name=folder_path.name,
        eos_token_ids=_eos_ids(folder_path, config),
        max_context=context,
        max_tree_tokens=fit.tree_budget if fit is not None else tree_budget,
        streamer=streamer,
        report=report,
    )


def load_on_device(folder: str, device: str, dtype: torch.dtype, progress: Progress | None = None, *,
                   context_length: int | None = None, available_bytes: int | None = None) -> CausalLM:
    """Load a quantised (or 16-bit) safetensors folder with every weight on `device`: one block holds the
    decoder layers, the embeddings and LM head sit beside it, nothing streams and no host copy is kept.

    This is the route of a 4-bit draft (GPTQ, AWQ or compressed-tensors): a 7-8B model takes 4-5 GB in 4 bits,
    and it runs dozens of forwards per pass, so it stays on the GPU, where its GPTQ linears multiply the draft's
    small batches with the kernel measured fastest on the card (core.offload.draft_kernels: torch's int4 kernel,
    the fused Triton matmul, or a dequantisation). On the CPU it runs through the eager path.
    available_bytes: free memory on `device` to check against (None: free VRAM on a GPU, available RAM on
    the CPU). context_length: as in `load_offloaded`.

    Raises: the errors of `load_offloaded` (ModelFormatError, InvalidSettingError, ...), and
    InsufficientVRAMError / InsufficientHostMemoryError before anything big is allocated when the weights
    do not fit.
    """
    folder_path = Path(folder)
    device = _check_device(device)
    ck = _read_checkpoint(folder_path, dtype)
    model = ck.model
    needed = (sum(layout.nbytes for layout in ck.layouts) + ck.top_bytes
              + gptq_scratch_bytes(ck.largest_linear, _dtype_bytes(dtype)))
    _check_device_memory(needed, device, available_bytes, folder_path.name)
    block = LayerBlock(ck.layouts, None, device)
    top = _materialise_top_level(model, device, set())
    _fill_and_finish(ck, (block,), top, device, dtype, progress)
    for index, layer in enumerate(model.model.layers):
        LayerBinding(layer, ck.layouts[index]).bind(ck.layouts[index].views(block.layer_bytes(index)))
    choice = choose_draft_kernel(model, device)
    changed = apply_draft_kernel(model, choice.kernel)
    if progress is not None and changed:
        progress(f"4-bit kernel: {choice.kernel} ({choice.source})")
    return CausalLM(model=model, name=folder_path.name, eos_token_ids=_eos_ids(folder_path, ck.config),
                    max_context=_context(ck.config, context_length))


def _check_device(device: str, stream_on_cpu: bool = False) -> torch.device:
    """Raises InvalidSettingError for a device other than the CPU or a usable CUDA GPU (or, streaming as on a
    GPU, the meta device standing in for one)."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidSettingError("device 'cuda' was requested but no CUDA GPU is available; use device 'cpu'")
    if device.type not in ("cpu", "cuda") and not (device.type == "meta" and stream_on_cpu):
        raise InvalidSettingError(
            f"4-bit and offloaded models load on the 'cpu' and 'cuda' devices, not '{device.type}'")
    return device


def _check_device_memory(needed: int, device: torch.device, available: int | None, name: str) -> None:
    """Raises InsufficientVRAMError (GPU) or InsufficientHostMemoryError (CPU) when `needed` bytes do not fit."""
    if device.type == "cpu":
        check_host_memory(host_bytes_needed(needed, 0, 0), available, what=f"the weights of {name}")
        return
    free = available if available is not None else torch.cuda.mem_get_info(device)[0]
    if needed + residency.DEFAULT_MARGIN_BYTES > free:
        raise InsufficientVRAMError(
            f"{name} needs {needed / 1024**3:.2f} GiB of VRAM for its weights and {free / 1024**3:.2f} GiB is free "
            f"on {device}: close programs that use the GPU, or use a smaller model")


def _context(config, requested: int | None) -> int:
    return residency.resolve_context_length(
        requested, int(getattr(config, "max_position_embeddings", 0) or residency.PLANNED_CONTEXT))


@dataclass(frozen=True)
class _Checkpoint:
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


def _read_checkpoint(folder: Path, dtype: torch.dtype) -> _Checkpoint:
    files = checkpoint_files(folder)
    config = _read_config(folder)
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
    top_meta = _top_level_tensors(model)
    top_bytes = sum(_meta_bytes(t) for _, _, _, t in {id(v[3]): v for v in top_meta.values()}.values())
    targets = _route_tensors(config.model_type, keys, layouts, top_meta, fmt)
    return _Checkpoint(files, config, scheme, settings, infos, model, scratch, largest_linear, layouts, top_meta,
                       top_bytes, targets)


def _fill_and_finish(ck: _Checkpoint, blocks: tuple[LayerBlock, ...], top: dict, device: torch.device,
                     dtype: torch.dtype, progress: Progress | None) -> None:
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


def _route_tensors(model_type: str, keys: set[str], layouts: list[LayerLayout], top_meta: dict,
                   fmt: CheckpointFormat | None = None) -> dict:
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
        log.warning("ignoring %d checkpoint tensors the model has no place for, e.g. %s", len(unused), ", ".join(unused[:3]))
    return targets


def _plan_device(config, device, dtype, layouts, fixed_bytes, budget, resident_layers, n_slots, tree_budget,
                 context, draft_weight_bytes, draft_kv_bytes, draft_graph_bytes, stream_on_cpu
                 ) -> tuple[residency.ResidencyPlan, residency.DefaultBudget | None]:
    """The residency plan, and the default budget's fit when one was computed (CUDA without --vram-budget).
    With `stream_on_cpu` an explicit budget is planned as on a GPU (fixed weights counted)."""
    layer_bytes = [layout.nbytes for layout in layouts]
    if device.type != "cuda":  # the CPU, or the meta device standing in for a GPU
        if resident_layers == "auto" and budget is None:
            resident_layers = 0
        if not stream_on_cpu:
            return residency.plan_residency(layer_bytes, None, 0, n_slots, len(layer_bytes)), None
        return residency.plan_residency(layer_bytes, budget, fixed_bytes if budget is not None else 0, n_slots,
                                        resident_layers), None
    free, _ = torch.cuda.mem_get_info(device)
    fit = None
    if budget is None:
        minimum = residency.minimum_device_bytes(layer_bytes, fixed_bytes, n_slots)
        fit = residency.fit_default_budget(config, free, _dtype_bytes(dtype), context, draft_weight_bytes,
                                           draft_kv_bytes, minimum, tree_budget, draft_graph_bytes)
        budget = fit.budget_bytes
    elif budget > free:
        raise InsufficientVRAMError(
            f"the VRAM budget of {budget / 1024**3:.2f} GiB is more than the {free / 1024**3:.2f} GiB free on {device}: "
            f"lower --vram-budget"
        )
    return residency.plan_residency(layer_bytes, budget, fixed_bytes, n_slots, resident_layers), fit


def _block_of(blocks: tuple[LayerBlock, ...], layer: int) -> LayerBlock:
    """The block (host store or resident device block) that holds `layer`."""
    return next(block for block in blocks if layer in block)


def _fill(files, infos, targets, top, blocks: tuple[LayerBlock, ...], progress: Progress | None,
          work_device: torch.device | None = None) -> None:
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

