"""One GPTQ linear's packed tensors and how to read them: the one record the eager dequantisation
(core.offload.gptq.dequantize_into), the fused dequantisation kernel (core.offload.gptq_kernel) and the fused
matmul (core.offload.gptq_matmul) all take, so the three cannot be handed the tensors in different orders."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedGPTQ:
    """qweight, qzeros, scales in the layout core.offload.gptq describes; `g_idx` only for rows grouped by an
    arbitrary g_idx ("gather": row k in group g_idx[k]), else None (row k in group k // group_size, act-order
    rows already sorted by group at load); `group_size` -1 for one group; `zero_offset` 1 for GPTQ v1's zeros
    stored minus one, 0 for every other format."""

    qweight: torch.Tensor
    qzeros: torch.Tensor
    scales: torch.Tensor
    g_idx: torch.Tensor | None
    bits: int
    group_size: int
    zero_offset: int = 1

    @property
    def gathered(self) -> bool:
        return self.g_idx is not None

    @property
    def nbytes(self) -> int:
        """Bytes a product reads of the packed weights, zeros and scales (what kernels' read rates count)."""
        return sum(t.numel() * t.element_size() for t in (self.qweight, self.qzeros, self.scales))
