"""Loading a quantised (GPTQ, AWQ, compressed-tensors) or 16-bit safetensors folder as an OffloadedLM.

Order matters for memory: the model is built on the meta device (no weights), the layer layouts give the
exact sizes, the residency plan is made and host RAM and VRAM are checked BEFORE anything big is allocated,
then the host store (streamed layers only) and the device block (resident layers) are allocated and filled
tensor by tensor from each shard: a resident layer goes from the checkpoint straight to the GPU, so peak
host RAM is the streamed layers, the embedding table (kept in host RAM, see core.offload.host_embedding)
and one tensor.

The reading of the folder's headers (the meta model, layouts, routing) is core.offload.meta_model; the
filling of the blocks and the completeness checks are core.offload.checkpoint_fill. This module plans,
checks memory, allocates and assembles.

`load_on_device` is the other route, for a 4-bit draft: the same checkpoint reading, every weight in one
device block, nothing streams.

Every quantised format is converted tensor by tensor, as it is read, into the one GPTQ layout the store,
the kernels and the streaming know (core.offload.quant_formats); the folder's format is checked before
anything is read (core.modeling.model_format.check_weight_format), so a format the engine does not read is refused
in words, not after minutes of loading.
"""

from __future__ import annotations

import logging
import platform
from pathlib import Path

import torch

from core.errors import InsufficientVRAMError, InvalidSettingError
from core.modeling.causal_lm import CausalLM
from core.modeling.families import context_limit
from core.modeling.model_files import end_token_ids
from core.offload.checkpoint_fill import (
    Progress,
    fill_and_finish,
    materialise_top_level,
)
from core.offload.draft_kernels import apply_draft_kernel, choose_draft_kernel
from core.offload.host_embedding import HostEmbedding
from core.offload.layout import LayerBinding
from core.offload.meta_model import EMBEDDING_KEY, meta_bytes, read_checkpoint
from core.offload.offloaded_lm import OffloadedLM, OffloadReport, PinningReport
from core.offload.pin_budget import PinBudget, lock_on_cpu, pin_in_place
from core.offload.staging import open_ring
from core.offload.streaming import LayerStreamer
from core.offload.weight_store import HostWeightStore, LayerBlock
from core.planning import residency
from core.planning.host_memory import (
    check_host_memory,
    embedding_in_host_ram,
    host_bytes_needed,
    host_table_bytes,
)
from core.planning.graph_plan import step_graph_bytes
from core.planning.pin_record import record_load
from core.planning.pinning import (
    pin_limit_from_env,
    platform_name,
    running_under_wsl,
)
from core.planning.sizes import format_bytes, gptq_scratch_bytes

log = logging.getLogger(__name__)


def _dtype_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


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
    pin_limit_bytes: int | None = None,
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
    pin_limit_bytes: bytes of streamed layers the load may page-lock (None: SPECEXEC_PIN_LIMIT_GB, else as
        much as the system allows). Streamed layers past it copy through the pinned staging ring
        (core.offload.staging), whose slots are taken beside the limit; on a CPU run that streams, the limit
        decides the same split without locking.

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
    pin_limit_bytes = pin_limit_bytes if pin_limit_bytes is not None else pin_limit_from_env()
    ck = read_checkpoint(folder_path, dtype)
    config, model, layouts, top_meta = ck.config, ck.model, ck.layouts, ck.top_meta
    top_bytes = ck.top_bytes
    layers = model.model.layers
    context = _context(config, context_length, folder_path.name)

    # Plan and memory checks before any big allocation.
    streaming = device.type == "cuda" or stream_on_cpu
    tied = bool(getattr(config, "tie_word_embeddings", False))
    embedding_on_host = embedding_in_host_ram(streaming, tied) and EMBEDDING_KEY in top_meta
    embedding_bytes = meta_bytes(top_meta[EMBEDDING_KEY][3]) if EMBEDDING_KEY in top_meta else 0
    scratch_bytes = gptq_scratch_bytes(ck.largest_linear, _dtype_bytes(dtype))
    fixed_bytes = residency.device_fixed_bytes(top_bytes, embedding_bytes, embedding_on_host, scratch_bytes)
    plan, fit = _plan_device(
        config,
        device,
        dtype,
        layouts,
        fixed_bytes,
        vram_budget_bytes,
        resident_layers,
        n_slots,
        tree_budget,
        context,
        draft_weight_bytes,
        draft_kv_bytes,
        draft_graph_bytes,
        stream_on_cpu,
    )
    lowered = fit if fit is not None and fit.lowered else None  # the tree budget VRAM forced down, if any
    resident = plan.resident if streaming else tuple(range(len(layouts)))
    streamed = [i for i in range(len(layouts)) if i not in set(resident)]
    host_tables = host_table_bytes(top_bytes, embedding_bytes, streaming, embedding_on_host)
    host_layers = sum(layouts[i].nbytes for i in (streamed if streaming else range(len(layouts))))
    host_needed = host_bytes_needed(host_layers, ck.largest_tensor, host_tables)
    check_host_memory(host_needed, available_ram_bytes, what=f"the offloaded weights of {folder_path.name}")

    # Pinned memory first, before the large GPU allocations: the staging ring, then the store's layers.
    budget = PinBudget(pin_limit_bytes, pin_in_place if device.type == "cuda" else lock_on_cpu)
    store = HostWeightStore(layouts, pin=False, layers=streamed)
    ring, ring_rates = open_ring(store, device, budget, record_trace) if streaming else (None, None)
    if streaming:
        store.pin_layers(budget)
    if device.type == "cuda":
        record_load(budget.locked_bytes, budget.refused)  # the fit's next prediction plans with it
    if ring is not None and store.pinned:
        ring.close()  # every streamed layer stays pinned: nothing to stage
        ring = None
    resident_block = LayerBlock(layouts, resident, device)
    top = materialise_top_level(model, device, {EMBEDDING_KEY} if embedding_on_host else set())
    fill_and_finish(ck, (store, resident_block), top, device, dtype, progress)
    if embedding_on_host:
        model.model.embed_tokens = HostEmbedding(top[EMBEDDING_KEY], device)

    streamer = LayerStreamer(
        store,
        layers,
        resident,
        plan.n_slots or 1,
        device,
        stream=streaming,
        record_trace=record_trace,
        resident_block=resident_block,
        ring=ring,
    )
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
        pinning=PinningReport(
            limit_bytes=budget.limit,
            locked_bytes=budget.locked_bytes,
            refused=budget.refused,
            ring_slots=ring.depth if streamer.ring is not None else 0,
            staged_bytes_per_pass=streamer.staged_bytes_per_pass,
            copy_bytes_per_second=ring_rates.copy if ring_rates else 0.0,
            fill_bytes_per_second=ring_rates.fill if ring_rates else 0.0,
            system=platform_name(platform.system(), running_under_wsl()),
        )
        if streaming
        else None,
        streaming=streaming,
        budget_bytes=plan.budget_bytes,
        tree_budget_fit=lowered,
        host_table_bytes=host_tables,
        host_ram_bytes=host_needed,
    )
    tree_tokens = fit.tree_budget if fit is not None else tree_budget
    return OffloadedLM(
        model=model,
        name=folder_path.name,
        eos_token_ids=end_token_ids(model, folder_path),
        max_context=context,
        max_tree_tokens=tree_tokens,
        step_graph_room=step_graph_room(plan, config, _dtype_bytes(dtype), residency.kv_rows(context, tree_tokens)),
        streamer=streamer,
        report=report,
    )


def step_graph_room(plan: residency.ResidencyPlan, config, dtype_bytes: int, capacity: int) -> bool:
    """Whether the CUDA graphs of a resident target's one-token step (core.planning.graph_plan.step_graph_bytes,
    for its KV cache of `capacity` rows) fit in what its weight budget holds beyond its weights. The plan
    reserves nothing for them, since it cannot know before placing the layers that none will stream; so the step
    is captured only into room the plan left unused, and otherwise runs eagerly, and the plan stays true. No
    budget (the CPU, where nothing is captured): True."""
    if plan.budget_bytes is None:
        return True
    return plan.budget_bytes - plan.device_bytes >= step_graph_bytes(config, dtype_bytes, capacity)


def load_on_device(
    folder: str,
    device: str,
    dtype: torch.dtype,
    progress: Progress | None = None,
    *,
    context_length: int | None = None,
    available_bytes: int | None = None,
) -> CausalLM:
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
    ck = read_checkpoint(folder_path, dtype)
    model = ck.model
    needed = (
        sum(layout.nbytes for layout in ck.layouts)
        + ck.top_bytes
        + gptq_scratch_bytes(ck.largest_linear, _dtype_bytes(dtype))
    )
    _check_device_memory(needed, device, available_bytes, folder_path.name)
    block = LayerBlock(ck.layouts, None, device)
    top = materialise_top_level(model, device, set())
    fill_and_finish(ck, (block,), top, device, dtype, progress)
    for index, layer in enumerate(model.model.layers):
        LayerBinding(layer, ck.layouts[index]).bind(ck.layouts[index].views(block.layer_bytes(index)))
    choice = choose_draft_kernel(model, device)
    changed = apply_draft_kernel(model, choice.kernel)
    if progress is not None and changed:
        progress(f"4-bit kernel: {choice.kernel} ({choice.source})")
    return CausalLM(
        model=model,
        name=folder_path.name,
        eos_token_ids=end_token_ids(model, folder_path),
        max_context=_context(ck.config, context_length, folder_path.name),
    )


def _check_device(device: str, stream_on_cpu: bool = False) -> torch.device:
    """Raises InvalidSettingError for a device other than the CPU or a usable CUDA GPU (or, streaming as on a
    GPU, the meta device standing in for one)."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidSettingError("device 'cuda' was requested but no CUDA GPU is available; use device 'cpu'")
    if device.type not in ("cpu", "cuda") and not (device.type == "meta" and stream_on_cpu):
        raise InvalidSettingError(
            f"4-bit and offloaded models load on the 'cpu' and 'cuda' devices, not '{device.type}'"
        )
    return device


def _check_device_memory(needed: int, device: torch.device, available: int | None, name: str) -> None:
    """Raises InsufficientVRAMError (GPU) or InsufficientHostMemoryError (CPU) when `needed` bytes do not fit."""
    if device.type == "cpu":
        check_host_memory(host_bytes_needed(needed, 0, 0), available, what=f"the weights of {name}")
        return
    free = available if available is not None else torch.cuda.mem_get_info(device)[0]
    if needed + residency.DEFAULT_MARGIN_BYTES > free:
        raise InsufficientVRAMError(
            f"{name} needs {format_bytes(needed)} of VRAM for its weights and {format_bytes(free)} is free "
            f"on {device}: close programs that use the GPU, or use a smaller model"
        )


def _context(config, requested: int | None, name: str) -> int:
    return residency.resolve_context_length(requested, context_limit(config), model=name)


def _plan_device(
    config,
    device,
    dtype,
    layouts,
    fixed_bytes,
    budget,
    resident_layers,
    n_slots,
    tree_budget,
    context,
    draft_weight_bytes,
    draft_kv_bytes,
    draft_graph_bytes,
    stream_on_cpu,
) -> tuple[residency.ResidencyPlan, residency.DefaultBudget | None]:
    """The residency plan, and the default budget's fit when one was computed (CUDA without --vram-budget).
    With `stream_on_cpu` an explicit budget is planned as on a GPU (fixed weights counted)."""
    layer_bytes = [layout.nbytes for layout in layouts]
    if device.type != "cuda":  # the CPU, or the meta device standing in for a GPU
        if resident_layers == "auto" and budget is None:
            resident_layers = 0
        if not stream_on_cpu:
            return residency.plan_residency(layer_bytes, None, 0, n_slots, len(layer_bytes)), None
        return residency.plan_residency(
            layer_bytes, budget, fixed_bytes if budget is not None else 0, n_slots, resident_layers
        ), None
    free, _ = torch.cuda.mem_get_info(device)
    fit = None
    if budget is None:
        minimum = residency.minimum_device_bytes(layer_bytes, fixed_bytes, n_slots)
        fit = residency.fit_default_budget(
            config,
            free,
            _dtype_bytes(dtype),
            context,
            draft_weight_bytes,
            draft_kv_bytes,
            minimum,
            tree_budget,
            draft_graph_bytes,
        )
        budget = fit.budget_bytes
    elif budget > free:
        raise InsufficientVRAMError(
            f"the VRAM budget of {format_bytes(budget)} is more than the {format_bytes(free)} free on {device}: "
            f"lower --vram-budget"
        )
    return residency.plan_residency(layer_bytes, budget, fixed_bytes, n_slots, resident_layers), fit
