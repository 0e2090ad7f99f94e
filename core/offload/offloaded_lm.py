"""`OffloadedLM`: a CausalLM whose decoder layers stream from host RAM; the decoding loop cannot tell.

CausalLM.forward's loop runs unchanged; `layers_to_run` hands it each layer through the streamer: wait for
its weights, compute, release its slot. The final norm and lm_head live on the device; the embedding table
stays in host RAM (core.offload.host_embedding) unless it is tied to lm_head. After a pass the first layers
of the next one are already being copied while the draft model searches (automatic; `prefetch()` does it explicitly).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from torch import nn

from core.modeling.causal_lm import CausalLM
from core.planning.residency import DefaultBudget
from core.offload.streaming import LayerStreamer

GIB = 1024**3


@dataclass(frozen=True)
class OffloadReport:
    """What the offloaded target costs; `summary()` is one line for the CLI."""

    weight_format: str
    n_layers: int
    resident_layers: tuple[int, ...]
    n_slots: int
    layer_bytes: int
    bytes_streamed_per_pass: int
    device_layer_bytes: int
    device_fixed_bytes: int
    host_store_bytes: int
    pinned: bool
    streaming: bool
    budget_bytes: int | None
    tree_budget_fit: DefaultBudget | None = None  # set when the tree budget had to be lowered to fit VRAM
    host_table_bytes: int = 0  # non-layer weights kept in host RAM (the embedding table when streaming)
    host_ram_bytes: int = 0  # what the host-memory check asked for (host_memory.host_bytes_needed)
    pinned_bytes: int = 0  # of host_store_bytes, page-locked (the system may refuse part: Windows locks ~half of RAM)

    def summary(self) -> str:
        if not self.streaming:
            return (f"{self.weight_format}: {self.n_layers} layers in host RAM ({self.host_store_bytes / GIB:.2f} GiB), "
                    f"nothing streams (no GPU)")
        if self.pinned:
            pinned = "pinned"
        elif self.pinned_bytes:
            pinned = (f"partly pinned ({self.pinned_bytes / GIB:.2f} GiB; the system refused to lock more, the rest "
                      f"copies more slowly)")
        else:
            pinned = "NOT pinned (slow pageable copies)"
        return (
            f"{self.weight_format}: {len(self.resident_layers)}/{self.n_layers} layers resident, "
            f"{self.n_layers - len(self.resident_layers)} streamed through {self.n_slots} slots, "
            f"{self.bytes_streamed_per_pass / GIB:.2f} GiB per pass from {self.host_store_bytes / GIB:.2f} GiB "
            f"of {pinned} host RAM (streamed layers only){self._table_note()}; "
            f"{(self.device_layer_bytes + self.device_fixed_bytes) / GIB:.2f} GiB of VRAM for weights" + self._tree_note()
        )

    def _table_note(self) -> str:
        return f" + {self.host_table_bytes / GIB:.2f} GiB embedding table" if self.host_table_bytes else ""

    def _tree_note(self) -> str:
        fit = self.tree_budget_fit
        if fit is None:
            return ""
        return (f". Tree budget lowered from {fit.requested_tree_budget} to {fit.tree_budget} draft tokens per pass: "
                f"the GPU has too little free memory for the activations of a bigger tree")


@dataclass(eq=False)
class OffloadedLM(CausalLM):
    """Same interface as CausalLM; `streamer` owns the layer weights, `report` describes the placement."""

    streamer: LayerStreamer | None = None
    report: OffloadReport | None = None

    def prefetch(self) -> None:
        """Start copying the next pass's first streamed layers now (idempotent; forward does it anyway)."""
        self.streamer.prefetch()

    def layers_to_run(self) -> Iterator[nn.Module]:
        """Each layer bound to its weights: resident, or a ring slot whose copy it waited for."""
        return self.streamer.run(self.decoder_layers)
