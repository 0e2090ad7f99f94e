"""How the CLI and the engine ask for a target's offloading (OffloadSettings), as plain data that checks
itself and imports no torch: `specexec chat` refuses a bad offload flag before the engine starts without the
seconds of imports core.loading.offload_policy (which acts on it) needs."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.errors import InvalidSettingError
from core.planning.graph_plan import search_width
from core.planning.residency import config_kv_bytes

if TYPE_CHECKING:
    from core.modeling.causal_lm import CausalLM

OFFLOAD_MODES = ("auto", "on", "off")


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
        if self.vram_budget_gb is not None and not (math.isfinite(self.vram_budget_gb) and self.vram_budget_gb > 0):
            raise InvalidSettingError(f"the VRAM budget must be a positive number of GB, got {self.vram_budget_gb}")
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
