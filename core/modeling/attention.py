"""Attention for grouped key/value heads without copying the keys and values for every query head.

transformers' sdpa attention, given a mask (the engine always passes one: the tree's), repeats each key/value
head for the query heads that share it (`repeat_kv`) before calling PyTorch's fused attention, which reads a
mask but not grouped heads there: for an 8B draft at a 4k context that writes and reads again about 2 GB of
keys and values per forward, as much memory traffic as the draft's 4-bit weights. Here the query heads of a
group are stacked along the query rows instead ([b, kv_heads, groups * n, d], the mask's rows repeated once
per group), which is the same attention for every head and lets the fused kernel read each key/value head
once. That repeats the mask (groups * n * columns elements) instead of the keys and values
(2 * heads * columns * head_dim), so it is used while it writes less: n < 2 * kv_heads * head_dim rows,
every draft forward and every tree the engine plans. A one-token step's mask is not repeated at all (one row
broadcasts over the group's rows). transformers 5.23 packs a one-token query this way itself, but 5.17 (the
lent GPU machine's) still repeats the keys and values there, so the engine does it for every version: the step a
GPU check measures is the step users run. Other calls go to transformers' own sdpa attention.

Every model the engine runs uses it (`use_grouped_attention`, from core.modeling.causal_lm.CausalLM), so the tree pass
and the one-token pass of a model keep computing attention the same way as each other.

Attention that never re-plans (issue 37): torch 2.11+ prefers cuDNN attention on sm90 and newer, and cuDNN builds
an execution plan per (shapes, strides), tens to hundreds of ms each; with a mask whose key length grows by one
per token that is a plan per token. So on CUDA the engine turns cuDNN attention off (`steady_attention`: flash
and memory-efficient attention need no plan), and a model's attention columns are rounded up to the draft's
column buckets (core.planning.graph_plan.column_bucket; CausalLM.hidden_states), so an answer touches a few
column counts instead of one per token. SPECEXEC_ATTENTION_FIX=0 turns both off (the GPU check's "before").
"""

from __future__ import annotations

import os

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from core.system.env import ATTENTION_FIX_ENV

GROUPED_SDPA = "specexec_grouped_sdpa"


def grouped_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """An AttentionInterface function: query [b, heads, n, d], key/value [b, kv_heads, cols, d], an additive
    or boolean mask [b or 1, 1, n, cols]. Returns the output [b, n, heads, d], as transformers' sdpa does."""
    batch, heads, rows, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    plain = (
        groups == 1
        or attention_mask is None
        or attention_mask.shape[1] != 1
        or kwargs.get("position_bias") is not None
        or rows >= 2 * kv_heads * dim
    )
    if plain:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    stacked = query.reshape(batch, kv_heads, groups * rows, dim)  # row g * n + i: query head kv * groups + g, token i
    mask = attention_mask if rows == 1 else attention_mask.repeat(1, 1, groups, 1)
    out = torch.nn.functional.scaled_dot_product_attention(
        stacked, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )
    return out.reshape(batch, heads, rows, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_SDPA, grouped_sdpa_attention)


def use_grouped_attention(model: torch.nn.Module) -> None:
    """Switch a model loaded with attn_implementation='sdpa' to `grouped_sdpa_attention` (its layers read
    the config's choice at every call). Other implementations are left as they are."""
    config = model.config
    if getattr(config, "_attn_implementation", None) == "sdpa":
        config._attn_implementation = GROUPED_SDPA


def attention_fix_enabled() -> bool:
    """Whether cuDNN attention is kept off on CUDA and attention columns are bucketed (SPECEXEC_ATTENTION_FIX)."""
    return os.environ.get(ATTENTION_FIX_ENV, "1") != "0"


def steady_attention(device: torch.device) -> None:
    """On CUDA, turn cuDNN attention off for this process (see the module docstring), unless the fix is off.
    A process-wide setting: flash and memory-efficient attention then serve every masked call."""
    if device.type == "cuda" and attention_fix_enabled():
        torch.backends.cuda.enable_cudnn_sdp(False)
