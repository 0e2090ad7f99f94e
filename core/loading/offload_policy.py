"""When to offload a target, and loading it through the offloaded path with its tokenizer.

Quantised folders (GPTQ, AWQ, compressed-tensors) always take this path: it is the engine's own reader of
their layouts (transformers 5 needs gptqmodel or compressed-tensors' kernels for them); 16-bit folders take
it when asked (`on`) or, with `auto`, when their weights would not fit in free VRAM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from core.loading.offload_settings import OffloadSettings
from core.modeling.model_files import LoadedModel, end_token_ids, load_tokenizer
from core.offload.gptq_loader import is_quantized_folder
from core.planning.sizes import format_bytes
from core.system import json_text

GIB = 1024**3
# Share of free VRAM a fully resident 16-bit target may take under `auto`: the rest is for the draft,
# both KV caches and activations.
_AUTO_FIT_SHARE = 0.8


def _weight_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def should_offload(folder: Path, settings: OffloadSettings, device: torch.device) -> bool:
    if is_quantized_folder(folder):
        return True
    if settings.mode != "auto":
        return settings.mode == "on"
    if device.type != "cuda":
        return False
    free, _total = torch.cuda.mem_get_info(device)
    return _weight_bytes(folder) > _AUTO_FIT_SHARE * free


def load_offloaded_folder(
    folder: Path,
    name: str,
    dtype: torch.dtype,
    device: torch.device,
    settings: OffloadSettings,
    report: Callable[[str], None],
    weight_progress: Callable[[int, int], None] | None = None,
    context_length: int | None = None,
):
    """Load `folder` as an OffloadedLM (GPTQ with `off` keeps every layer resident: nothing streams).

    `report` gets a sentence every 10% of the weights; `weight_progress` (bytes read, bytes in all) every 1%.
    `context_length`: the planned context (None: residency.resolve_context_length's default).
    """
    from core.offload import load_offloaded

    resident = settings.resident_layers
    if settings.mode == "off":
        resident = json_text.loads((folder / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]
    budget = int(settings.vram_budget_gb * GIB) if settings.vram_budget_gb is not None else None
    last_percent = [-1]

    def bytes_progress(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if percent == last_percent[0]:  # the loader calls after every tensor: throttle to every 1%
            return
        if percent // 10 != last_percent[0] // 10:
            report(f"Loading {name}: {format_bytes(done)} of {format_bytes(total)}")
        last_percent[0] = percent
        if weight_progress is not None:
            weight_progress(done, total)

    tokenizer = load_tokenizer(name, folder)
    lm = load_offloaded(
        str(folder),
        str(device),
        dtype,
        budget,
        resident,
        bytes_progress,
        tree_budget=settings.tree_budget,
        context_length=context_length,
        draft_kv_bytes=settings.draft_kv_bytes,
        draft_graph_bytes=settings.draft_graph_bytes,
    )
    lm.name = name
    lm.eos_token_ids = end_token_ids(lm.model, folder, tokenizer)
    report(lm.report.summary())
    return LoadedModel(lm=lm, tokenizer=tokenizer)
