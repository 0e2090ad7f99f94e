"""Offloaded targets: decoder weights in pinned host RAM, streamed layer by layer to the GPU.

Public API (what loading and the CLI use):

    load_offloaded(folder, device, dtype, vram_budget_bytes=None, resident_layers="auto", progress=None,
                   *, n_slots=2, tree_budget=128, context_length=None, draft_weight_bytes=0,
                   draft_kv_bytes=0, draft_graph_bytes=0) -> OffloadedLM
        Load a quantised (GPTQ v1/v2 2/3/4/8-bit, AWQ GEMM, compressed-tensors pack-quantized; any group
        size, act-order) or 16-bit safetensors folder. `OffloadedLM` is a
        `core.modeling.causal_lm.CausalLM`, so SpecExec runs on it unchanged; `.report.summary()` says how many
        layers are resident and how many bytes stream per pass. See `core.offload.loader.load_offloaded`
        for every argument and the errors raised.

    is_quantized_folder(folder) -> bool
        True when the folder's quantisation settings are a format the engine reads (core.modeling.model_format).

Modules, one job each:
    gptq          unpack / dequantise GPTQ tensors; GPTQLinear, GPTQExperts
    gptq_kernel   the fused Triton dequantisation kernel (and the tile code it shares with gptq_matmul)
    gptq_matmul   the fused small-batch GPTQ matmul (1-64 rows: most draft forwards), Triton
    gptq_loader   GPTQLinear settings of a quantised folder; swapping nn.Linear for GPTQLinear in a meta-built
                  model; act-order re-pack
    quant_formats converting AWQ and compressed-tensors tensors into the GPTQ layout as they are read
    checkpoint    safetensors shards, headers, checkpoint-name -> layer-entry mapping (MoE expert fusion)
    layout        a layer's tensors packed in one byte buffer; binding a layer module to such a buffer
    sizes         bytes of a layer / the non-layer weights / GPTQ scratch from a model's shape (pure, no torch)
    host_memory   host RAM an offloaded load needs, and the check (pure, no torch)
    weight_store  layer blocks: the host store of the streamed layers (page-locked in place), the device
                  block of the resident ones
    pin_budget    page-locking in place, and the one budget a load locks through (stops at the first refusal)
    staging       the pinned staging ring for the streamed layers the budget could not lock
    host_embedding  the embedding table kept in host RAM, only the looked-up rows copied to the GPU
    schedule      the streaming plan as pure data (Copy / Compute actions), its invariants and timeline
    streaming     LayerStreamer: executes the plan (CUDA streams + events, or synchronous CPU copies)
    residency     VRAM budget and resident-layer planning (pure functions)
    offloaded_lm  OffloadedLM and its OffloadReport
    meta_model    a folder read as far as its headers: the meta-built model, its layouts, where each tensor goes
    checkpoint_fill  filling the allocated blocks from the checkpoint, and the checks that every weight came
    loader        load_offloaded; load_on_device (a GPTQ draft, whole on the GPU): plan, check, allocate, fill
"""

__all__ = ["OffloadReport", "OffloadedLM", "is_quantized_folder", "load_offloaded"]

_LAZY = {
    "is_quantized_folder": "core.offload.gptq_loader",
    "load_offloaded": "core.offload.loader",
    "OffloadedLM": "core.offload.offloaded_lm",
    "OffloadReport": "core.offload.offloaded_lm",
}


def __getattr__(name: str):
    """Import torch, the loader and transformers' model classes only when used: the pure planning modules
    (residency, sizes, host_memory) import without torch, for the fit prediction in the app's process."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'core.offload' has no attribute '{name}'")
