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
from core.offload.streaming import LayerStreamer
from core.planning.residency import DefaultBudget

GIB = 1024**3


@dataclass(frozen=True)
class PinningReport:
    """What the load could page-lock and how the streamed bytes copy (core.offload.pin_budget, .staging).

    limit_bytes: SPECEXEC_PIN_LIMIT_GB (None: none). locked_bytes: locked in all, ring included; when
    `refused`, that is the budget measured on this machine. staged_bytes_per_pass: streamed bytes that copy
    through the ring of `ring_slots` pinned slots (or, with no ring, from pageable memory). The rates were
    measured with the ring's first slot at load (0: not measured). system: "Windows", "Linux", "WSL2", ...
    """

    limit_bytes: int | None
    locked_bytes: int
    refused: bool
    ring_slots: int
    staged_bytes_per_pass: int
    copy_bytes_per_second: float
    fill_bytes_per_second: float
    system: str

    def sentence(self, streamed_bytes: int) -> str:
        """The copy paths of a pass in plain words."""
        pinned = streamed_bytes - self.staged_bytes_per_pass
        if not self.staged_bytes_per_pass:
            return f"all {streamed_bytes / GIB:.2f} GiB streamed per pass copy from pinned memory"
        if self.refused:
            why = f"{self.system} refused to lock more than {self.locked_bytes / GIB:.2f} GiB"
        elif self.limit_bytes is not None:
            why = f"SPECEXEC_PIN_LIMIT_GB caps locking at {self.limit_bytes / 1e9:.2f} GB"
        else:
            why = "the memory could not be locked"
        if self.system == "WSL2":
            why += " (WSL2 locks well under 1 GiB; Windows itself allows more)"
        path = (
            f"through a ring of {self.ring_slots} pinned buffers, filled ahead of the copies"
            if self.ring_slots
            else "from pageable memory, about a third as fast"
        )
        rates = ""
        if self.copy_bytes_per_second and self.fill_bytes_per_second:
            rates = (
                f" (measured: copies {self.copy_bytes_per_second / 1e9:.1f} GB/s, filling "
                f"{self.fill_bytes_per_second / 1e9:.1f} GB/s per worker)"
            )
        return (
            f"{pinned / GIB:.2f} GiB of the {streamed_bytes / GIB:.2f} GiB streamed per pass copy from pinned "
            f"memory and {self.staged_bytes_per_pass / GIB:.2f} GiB {path}{rates}: {why}"
        )


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
    pinning: PinningReport | None = None  # what could be locked and how the rest copies (streaming loads)

    def summary(self) -> str:
        if not self.streaming:
            return (
                f"{self.weight_format}: {self.n_layers} layers in host RAM ({self.host_store_bytes / GIB:.2f} GiB), "
                f"nothing streams (no GPU)"
            )
        return (
            f"{self.weight_format}: {len(self.resident_layers)}/{self.n_layers} layers resident, "
            f"{self.n_layers - len(self.resident_layers)} streamed through {self.n_slots} slots, "
            f"{self.bytes_streamed_per_pass / GIB:.2f} GiB per pass from {self.host_store_bytes / GIB:.2f} GiB "
            f"of host RAM (streamed layers only){self._table_note()}; "
            f"{(self.device_layer_bytes + self.device_fixed_bytes) / GIB:.2f} GiB of VRAM for weights"
            + self._pin_note()
            + self._tree_note()
        )

    def _pin_note(self) -> str:
        if self.pinning is None or not self.bytes_streamed_per_pass:
            return ""
        return ". " + self.pinning.sentence(self.bytes_streamed_per_pass)

    def _table_note(self) -> str:
        return f" + {self.host_table_bytes / GIB:.2f} GiB embedding table" if self.host_table_bytes else ""

    def _tree_note(self) -> str:
        fit = self.tree_budget_fit
        if fit is None:
            return ""
        return (
            f". Tree budget lowered from {fit.requested_tree_budget} to {fit.tree_budget} draft tokens per pass: "
            f"the GPU has too little free memory for the activations of a bigger tree"
        )


@dataclass(eq=False)
class OffloadedLM(CausalLM):
    """Same interface as CausalLM; `streamer` owns the layer weights, `report` describes the placement."""

    streamer: LayerStreamer | None = None
    report: OffloadReport | None = None

    def prefetch(self) -> None:
        """Start copying the next pass's first streamed layers now (idempotent; forward does it anyway)."""
        self.streamer.prefetch()

    @property
    def streams_layers(self) -> bool:
        """Whether any layer is copied in each pass (none: every layer resident, a step a CUDA graph can hold)."""
        return bool(self.streamer.streamed)

    def layers_to_run(self) -> Iterator[nn.Module]:
        """Each layer bound to its weights: resident, or a ring slot whose copy it waited for."""
        return self.streamer.run(self.decoder_layers)
