"""VRAM the draft's CUDA graphs keep, against what the memory plan reserves for them
(core.decoding.graph_memory.planned_graph_bytes: the engine's search forward on the meta device, plus
core.planning.graph_plan's per-graph terms). A random draft of the built-in shape captures its search forward
at one tree budget's width over several column buckets of one cache, as a conversation does; what stays
allocated afterwards is what the graphs keep. Off CUDA only the plan is computed."""

from __future__ import annotations

import torch

from core.bench.gpu_check.random_pair import random_target
from core.decoding.captured_forward import captured_shapes, run_draft_forward
from core.decoding.graph_memory import planned_graph_bytes
from core.modeling.tree_mask import additive_mask, block_visibility
from core.planning.graph_plan import column_bucket, search_width

BUDGET = 256
CONTEXTS = (100, 600, 1100, 1500)
SMALL_CONTEXTS = (10, 300)


def measure(device: torch.device, small: bool) -> dict:
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    draft = random_target(device, dtype, small).lm
    draft.max_tree_tokens = BUDGET
    width, capacity = search_width(BUDGET), draft.kv_rows
    planned = planned_graph_bytes(draft.config, dtype, width, capacity)
    result = {
        "budget": BUDGET,
        "width": width,
        "capacity": capacity,
        "planned_bytes": planned,
        "kept_bytes": None,
        "reserved_growth_bytes": None,
        "captured": [],
    }
    cache = draft.new_cache()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        draft.extend(torch.randint(3, draft.vocab_size, (1,), generator=generator).to(device), cache)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            allocated, reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
        for context in SMALL_CONTEXTS if small else CONTEXTS:
            ids = torch.randint(3, draft.vocab_size, (width,), generator=generator).to(device)
            rows = torch.arange(context, context + width, device=device)
            cols = column_bucket(context + width, cache.capacity)
            mask = additive_mask(block_visibility(context, width, cols, device), dtype)
            logits = run_draft_forward(draft, cache, ids, rows, mask, rows, cols)
            del logits
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            result["kept_bytes"] = torch.cuda.memory_allocated(device) - allocated
            result["reserved_growth_bytes"] = torch.cuda.memory_reserved(device) - reserved
    result["captured"] = [list(shape) for shape in captured_shapes(cache)]
    return result
