"""The input embedding table of an offloaded target, kept in host RAM.

A Llama-3 / Qwen2.5 table is 2.1-2.5 GB; a pass looks up at most a few thousand of its rows. Keeping it in
host RAM and copying only the looked-up rows (a few MB) to the GPU gives those gigabytes to resident layers.
"""

from __future__ import annotations

import torch
from torch import nn


class HostEmbedding(nn.Module):
    """Drop-in for nn.Embedding: `weight` [V, H] lives in host RAM, the looked-up rows go to `device`.

    The ids are brought to the host first (a small device-to-host copy, once per forward, outside the
    per-layer loop); the gathered rows [*ids.shape, H] are copied to `device` in one transfer.
    """

    def __init__(self, weight: torch.Tensor, device: torch.device) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.device = torch.device(device)

    @property
    def num_embeddings(self) -> int:
        return self.weight.shape[0]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        ids = input_ids.to(self.weight.device)  # host sync when the ids are on the GPU: once per pass
        rows = self.weight.index_select(0, ids.reshape(-1)).view(*ids.shape, self.weight.shape[1])
        return rows.to(self.device, non_blocking=True)
