"""When to offload a target, and loading it through the offloaded path with its tokenizer.

Quantised folders (GPTQ, AWQ, compressed-tensors) always take this path: it is the engine's own reader of
their layouts (transformers 5 needs gptqmodel or compressed-tensors' kernels for them); 16-bit folders take
it when asked (`on`) or, with `auto`, when their weights would not fit in free VRAM.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import torch

from core.errors import InvalidSettingError
from core.planning.graph_plan import search_width
from core.modeling.model_files import LoadedModel, eos_token_ids, load_tokenizer
from core.offload.gptq_loader import is_quantized_folder
from core.planning.residency import config_kv_bytes
from core.planning.sizes import format_bytes

if TYPE_CHECKING:
    from core.modeling.causal_lm import CausalLM

GIB = 1024**3
OFFLOAD_MODES = ("auto", "on", "off")
# Share of free VRAM a fully resident 16-bit target may take under `auto`: the rest is for the draft,
# both KV caches and activations.
_AUTO_FIT_SHARE = 0.8


@dataclass(frozen=True)
class OffloadSettings:
    """mode: auto|on|off; vram_budget_gb: VRAM for the target's weights (None = free VRAM minus the
    draft, caches, activations and a margin); resident_layers: 'auto' or a count; tree_budget: sizes the
    activations reserved for a target pass; draft_kv_bytes, draft_graph_bytes: VRAM the draft's KV cache and
    its CUDA graphs will take (`with_draft`)."""

    mode: str = "auto"
    vram_budget_gb: float | None = None
    resident_layers: int | str = "auto"
    tree_budget: int = 128
    draft_kv_bytes: int = 0
    draft_graph_bytes: int = 0

    def __post_init__(self) -> None:
        if self.mode not in OFFLOAD_MODES:
            raise InvalidSettingError(f"offload must be one of {', '.join(OFFLOAD_MODES)}, got '{self.mode}'")
        if self.vram_budget_gb is not None and self.vram_budget_gb <= 0:
            raise InvalidSettingError(f"the VRAM budget must be positive (GB), got {self.vram_budget_gb}")
        if self.resident_layers != "auto" and (not isinstance(self.resident_layers, int) or self.resident_layers < 0):
            raise InvalidSettingError(f"resident layers must be 'auto' or a count >= 0, got {self.resident_layers!r}")

    def with_draft(self, draft: "CausalLM | None") -> "OffloadSettings":
        """These settings with the draft's KV cache (the rows it is preallocated with) and, where its search
        forwards are captured in CUDA graphs, what the graphs keep (core.decoding.graph_memory.planned_graph_bytes, at
        the search width of this tree budget) reserved in the default VRAM budget. The draft's weights need
        no reserve: it loads first, so free VRAM is measured without them."""
        if draft is None:
            return self
        from core.decoding.captured_forward import capture_enabled
        from core.decoding.graph_memory import planned_graph_bytes

        graphs = 0
        if capture_enabled(draft.device):
            graphs = planned_graph_bytes(draft.config, draft.dtype, search_width(self.tree_budget), draft.kv_rows)
        return dataclasses.replace(
            self,
            draft_kv_bytes=config_kv_bytes(draft.config, draft.kv_rows, draft.dtype.itemsize),
            draft_graph_bytes=graphs,
        )


def parse_resident_layers(text: str) -> int | str:
    """CLI value: 'auto' or a non-negative integer."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError as error:
        raise InvalidSettingError(f"--resident-layers takes 'auto' or a number, got '{text}'") from error


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
        import json

        resident = json.loads((folder / "config.json").read_text())["num_hidden_layers"]
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
    lm.eos_token_ids = eos_token_ids(lm.model, tokenizer)
    report(lm.report.summary())
    return LoadedModel(lm=lm, tokenizer=tokenizer)
