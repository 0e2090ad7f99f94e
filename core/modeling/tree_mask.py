"""Additive attention masks for new tokens on top of a KV cache.

transformers 5 passes a 4D float mask [batch, 1, n_new, past + n_new] straight to attention: 0 attends,
finfo.min blocks. (A bool mask is silently wrong with eager attention.) We only ever build the rows of
the new tokens, never a square mask over the whole context.
"""

from __future__ import annotations

import torch


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool [n_new, total] (True = attend) -> additive float mask [1, 1, n_new, total]."""
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]


def causal_visibility(past_len: int, n_new: int, device: torch.device | str) -> torch.Tensor:
    """bool [n_new, past_len + n_new]: a plain causal chain after a fully visible past."""
    cols = torch.arange(past_len + n_new, device=device)
    rows = torch.arange(n_new, device=device) + past_len
    return cols[None, :] <= rows[:, None]


def ancestor_matrix(parents: torch.Tensor) -> torch.Tensor:
    """bool [N, N]: entry (i, j) is True when node j is node i or one of its ancestors.

    `parents`: long [N] in topological order, -1 for roots. Built by pointer jumping: after step s every
    node knows its ancestors up to 2^s levels up, so ceil(log2(N)) steps cover any depth. The step count
    depends only on N, so nothing is read back to the host.
    """
    n = parents.shape[0]
    device = parents.device
    rows = torch.arange(n, device=device)
    hop = torch.where(parents >= 0, parents, rows)  # a root is its own parent
    reach = torch.eye(n, dtype=torch.bool, device=device)
    reach[rows, hop] = True
    for _ in range(max(n - 1, 1).bit_length()):
        reach = reach | reach[hop]
        hop = hop[hop]
    return reach


def block_visibility(prefix: int, width: int, cols: int, device: torch.device | str) -> torch.Tensor:
    """bool [width, cols]: `width` new rows at columns prefix .. prefix + width - 1, each seeing the first
    `prefix` columns and itself, nothing else (a draft search forward of unrelated nodes, as the doctor's
    check and the cost model's timing run one)."""
    visible = torch.zeros((width, cols), dtype=torch.bool, device=device)
    visible[:, :prefix] = True
    visible[:, prefix : prefix + width] = torch.eye(width, dtype=torch.bool, device=device)
    return visible
