"""How much VRAM the offloaded target may use, and how many layers it keeps resident: pure functions.

Budget (bytes the target's weights may occupy on the GPU) = free VRAM - draft model weights - both KV
caches (preallocated once at the planned context + the tree) - activations of one pass (a prefill chunk
plus the tree) - a safety margin. Inside that budget the target needs its non-layer weights on the GPU
(final norm, lm_head; the embedding table stays in host RAM), the GPTQ dequantisation scratch and the ring
slots; whatever is left holds resident layers, which never stream, so every pass moves fewer bytes.

Host RAM (`core.planning.host_memory`) holds the streamed layers only: resident layers go from the
checkpoint straight to the GPU. These functions are the single source of truth for both the loader and the
fit prediction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.errors import InsufficientVRAMError, InvalidSettingError
from core.planning.sizes import format_bytes
from core.system import json_text

GIB = 1024**3
DEFAULT_MARGIN_BYTES = GIB // 2  # CUDA context slack, allocator fragmentation, cuBLAS workspaces
DEFAULT_SLOTS = 2
# Context (tokens) both KV caches are preallocated for when the user sets none; a conversation that reaches
# it is trimmed (oldest turns first) or refused with a clear error, never grown.
PLANNED_CONTEXT = 4096
MIN_CONTEXT = 64
# The room for an answer a longer context is sized to give a prompt that did not fit: its longest answer, at
# most this (context_needed; the app's Make room and `specexec chat`'s advice): a model that thinks first gets
# its default longest answer (the app's THINKING_MAX_TOKENS), so its thought is not cut off for want of room.
ANSWER_ROOM = 4096
# Prompt tokens one forward takes at most: a long prompt is prefilled in chunks of this many, so a pass
# holds at most this many prompt rows plus the tree (the activation reserve counts exactly that).
PREFILL_CHUNK = 512


def resolve_context_length(requested: int | None, model_limit: int, fit: bool = False, model: str = "") -> int:
    """The planned context: `requested`, or PLANNED_CONTEXT capped at the model's own limit when None.

    fit: a `requested` above the model's limit is taken down to the limit (the app's setting: a preference
    kept from one model to the next); else it is refused, as an explicit flag is, naming `model` (a pair's
    two models may keep different lengths).
    Raises InvalidSettingError for a value above the model's limit (unless `fit`) or below MIN_CONTEXT.
    """
    if requested is None:
        return min(PLANNED_CONTEXT, model_limit)
    if not json_text.is_whole(requested) or requested < MIN_CONTEXT:
        raise InvalidSettingError(f"the context length must be at least {MIN_CONTEXT} tokens, got {requested!r}")
    if fit:
        return min(requested, model_limit)
    if requested > model_limit:
        raise InvalidSettingError(
            f"the context length {requested} is longer than {model or 'this model'} supports: use at most "
            f"{model_limit} tokens"
        )
    return requested


def context_needed(prompt_tokens: int, max_new_tokens: int) -> int:
    """The context a prompt that did not fit needs: itself and the start of its answer (its longest answer,
    at most ANSWER_ROOM: a longer context costs memory, and the answer is the point, not its whole length)."""
    return prompt_tokens + min(max(max_new_tokens, 1), ANSWER_ROOM)


def context_to_hold(
    prompt_tokens: int, max_new_tokens: int, in_force: int, model_limit: int, steps: Iterable[int]
) -> int | None:
    """The context length that would hold a prompt which did not fit `in_force`: the first of `steps` (in
    order) that holds it and the start of its answer (context_needed), or the models' own `model_limit` where
    that comes first; None where the prompt's length or the limit is not known (0), or the limit is too short."""
    needed = context_needed(prompt_tokens, max_new_tokens)
    if prompt_tokens <= 0 or not model_limit or needed > model_limit or needed <= in_force:
        return None
    return min(next((n for n in steps if n >= needed), model_limit), model_limit)


def device_fixed_bytes(non_layer_bytes: int, embedding_bytes: int, embedding_on_host: bool, scratch_bytes: int) -> int:
    """GPU bytes the target needs besides its layers: non-layer weights (less the embedding table when it
    stays in host RAM) and the GPTQ dequantisation scratch."""
    return non_layer_bytes - (embedding_bytes if embedding_on_host else 0) + scratch_bytes


def kv_rows(context: int, tree_tokens: int) -> int:
    """Rows a KV cache is preallocated with: the planned context, the draft tree of one pass and its root."""
    return context + tree_tokens + 1


@dataclass(frozen=True)
class ResidencyPlan:
    """resident: layer indices kept on the GPU; n_slots: ring slots for the others (0 if none stream)."""

    n_layers: int
    resident: tuple[int, ...]
    n_slots: int
    slot_bytes: int
    resident_bytes: int
    streamed_bytes_per_pass: int
    fixed_bytes: int
    budget_bytes: int | None

    @property
    def device_bytes(self) -> int:
        """Everything the plan puts on the GPU: fixed weights + resident layers + slots."""
        return self.fixed_bytes + self.resident_bytes + self.n_slots * self.slot_bytes

    def summary(self) -> str:
        streamed = self.n_layers - len(self.resident)
        return (
            f"{len(self.resident)}/{self.n_layers} layers resident ({self.resident_bytes / GIB:.2f} GiB), "
            f"{streamed} streamed through {self.n_slots} slots: {self.streamed_bytes_per_pass / GIB:.2f} GiB "
            f"per pass"
        )


def minimum_device_bytes(layer_bytes: Sequence[int], fixed_bytes: int, n_slots: int = DEFAULT_SLOTS) -> int:
    """The least VRAM an offloaded target runs in: its fixed weights and the ring slots, no resident layer."""
    return fixed_bytes + min(n_slots, len(layer_bytes)) * max(layer_bytes, default=0)


def spread_layers(n_layers: int, count: int) -> tuple[int, ...]:
    """`count` layer indices spread evenly over 0..n_layers-1.

    Spread, not the first ones: while the GPU computes a resident layer the copy stream keeps filling the
    ring, so resident layers between streamed ones hide copy time; a block of them at the start would only
    let the ring fill once and then leave the PCIe link idle.
    """
    count = max(0, min(count, n_layers))
    return tuple(int((i + 0.5) * n_layers / count) for i in range(count))


def plan_residency(
    layer_bytes: Sequence[int],
    budget_bytes: int | None,
    fixed_bytes: int = 0,
    n_slots: int = DEFAULT_SLOTS,
    resident_layers: int | str = "auto",
) -> ResidencyPlan:
    """Choose resident layers under `budget_bytes` (None = no limit, only valid with an explicit count).

    fixed_bytes: non-layer weights + dequantisation scratch that live on the GPU regardless.
    resident_layers: "auto" (as many as fit after the ring slots) or an explicit count.
    Raises InsufficientVRAMError when not even the fixed weights and the ring fit, or an explicit count
    does not fit; InvalidSettingError for a bad count or slot number.
    """
    n = len(layer_bytes)
    if n_slots < 1:
        raise InvalidSettingError(f"the streaming ring needs at least 1 slot (2 to overlap copies), got {n_slots}")
    if resident_layers == "auto":
        if budget_bytes is None:
            raise InvalidSettingError("resident_layers='auto' needs a VRAM budget")
        count = _max_resident(layer_bytes, budget_bytes, fixed_bytes, n_slots)
    elif json_text.is_whole(resident_layers) and resident_layers >= 0:
        count = min(resident_layers, n)
    else:
        raise InvalidSettingError(f"resident layers must be 'auto' or a count >= 0, got {resident_layers!r}")
    resident = spread_layers(n, count)
    plan = _make_plan(layer_bytes, resident, n_slots, fixed_bytes, budget_bytes)
    if budget_bytes is not None and plan.device_bytes > budget_bytes:
        _raise_too_small(plan, budget_bytes, explicit=resident_layers != "auto")
    return plan


def _make_plan(layer_bytes, resident, n_slots, fixed_bytes, budget_bytes) -> ResidencyPlan:
    keep = set(resident)
    streamed = [b for i, b in enumerate(layer_bytes) if i not in keep]
    slots = min(n_slots, len(streamed))
    return ResidencyPlan(
        n_layers=len(layer_bytes),
        resident=tuple(resident),
        n_slots=slots,
        slot_bytes=max(streamed, default=0),
        resident_bytes=sum(layer_bytes[i] for i in resident),
        streamed_bytes_per_pass=sum(streamed),
        fixed_bytes=fixed_bytes,
        budget_bytes=budget_bytes,
    )


def _max_resident(layer_bytes, budget_bytes, fixed_bytes, n_slots) -> int:
    n = len(layer_bytes)
    # Everything resident needs no slots at all.
    if fixed_bytes + sum(layer_bytes) <= budget_bytes:
        return n
    best = 0
    for count in range(n):
        if (
            _make_plan(layer_bytes, spread_layers(n, count), n_slots, fixed_bytes, budget_bytes).device_bytes
            <= budget_bytes
        ):
            best = count
        else:
            break
    return best


def _raise_too_small(plan: ResidencyPlan, budget_bytes: int, explicit: bool) -> None:
    need = plan.device_bytes
    if explicit and plan.resident:
        raise InsufficientVRAMError(
            f"{len(plan.resident)} resident layers need {format_bytes(need)} of VRAM but the budget is "
            f"{format_bytes(budget_bytes)}: use fewer resident layers (or 'auto')"
        )
    raise InsufficientVRAMError(
        f"the GPU budget for the target's weights is {format_bytes(budget_bytes)} but it needs at least "
        f"{format_bytes(need)} (embeddings/lm_head {format_bytes(plan.fixed_bytes)} + {plan.n_slots} layer "
        f"slots of {format_bytes(plan.slot_bytes)}). Lower the tree budget (--budget) or the context length "
        f"so activations and KV caches take less, use a smaller draft model, or free GPU memory."
    )


# --- the default budget ------------------------------------------------------------------------------


def kv_cache_bytes(n_layers: int, kv_heads: int, head_dim: int, tokens: int, dtype_bytes: int) -> int:
    """Bytes of an InPlaceKVCache preallocated for `tokens` rows (keys + values; it never grows)."""
    return 2 * n_layers * kv_heads * tokens * head_dim * dtype_bytes


def config_kv_bytes(config, tokens: int, dtype_bytes: int) -> int:
    """kv_cache_bytes from a transformers config (Llama/Mistral/Mixtral/Qwen2 field names)."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return kv_cache_bytes(config.num_hidden_layers, kv_heads, head_dim, tokens, dtype_bytes)


def activation_bytes(
    config, tree_tokens: int, context: int, dtype_bytes: int, prefill_chunk: int = PREFILL_CHUNK
) -> int:
    """Peak activation bytes of one target pass over a prefill chunk and `tree_tokens` draft tokens on top of
    `context` (estimate).

    Counted: a few hidden-state copies, q/k/v and the attention output, the attention mask and (worst case,
    the math fallback of sdpa) the attention scores, the MLP intermediates, keys/values expanded for GQA,
    and float32 logits with their sampling copies for the ONE row verification is looking at (the LM head
    runs row by row on the rows the walk visits).
    """
    t = prefill_chunk + tree_tokens
    total = context + t
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    vocab = config.vocab_size
    hidden_states = 6 * t * hidden * dtype_bytes
    qkv = 3 * t * heads * head_dim * dtype_bytes
    mask = t * total * dtype_bytes
    scores = heads * t * total * dtype_bytes
    expanded_kv = 2 * heads * total * head_dim * dtype_bytes
    mlp = 3 * t * intermediate * dtype_bytes
    logits = vocab * (dtype_bytes + 3 * 4)
    return hidden_states + qkv + mask + scores + expanded_kv + mlp + logits


def default_vram_budget(
    free_vram_bytes: int,
    draft_weight_bytes: int,
    target_kv_bytes: int,
    draft_kv_bytes: int,
    activation_bytes_: int,
    margin_bytes: int = DEFAULT_MARGIN_BYTES,
    draft_graph_bytes: int = 0,
) -> int:
    """VRAM the offloaded target's weights may use; may be negative (plan_residency then explains).
    draft_graph_bytes: what the draft's CUDA graphs keep (core/planning/graph_plan.py)."""
    return (
        free_vram_bytes
        - draft_weight_bytes
        - target_kv_bytes
        - draft_kv_bytes
        - draft_graph_bytes
        - activation_bytes_
        - margin_bytes
    )


@dataclass(frozen=True)
class DefaultBudget:
    """The default VRAM budget for the target's weights and the tree budget it was computed for: the
    requested one, or a lower one when the requested tree's activations and KV rows would not leave room
    for the minimum (non-layer weights + ring slots)."""

    budget_bytes: int
    tree_budget: int
    requested_tree_budget: int

    @property
    def lowered(self) -> bool:
        return self.tree_budget < self.requested_tree_budget


def fit_default_budget(
    config,
    free_vram_bytes: int,
    dtype_bytes: int,
    context: int,
    draft_weight_bytes: int,
    draft_kv_bytes: int,
    minimum_bytes: int,
    tree_budget: int,
    draft_graph_bytes: int = 0,
) -> DefaultBudget:
    """The default budget (`default_vram_budget`) at the requested tree budget, halving the tree until the
    budget holds `minimum_bytes` (the target's non-layer weights and ring slots, which it cannot run without).
    draft_graph_bytes: what the draft's CUDA graphs keep, planned for the requested tree (core/planning/graph_plan.py).

    A smaller tree accepts fewer tokens per pass but still runs; refusing to load would leave a non-technical
    user with nothing. Raises InsufficientVRAMError, naming what takes the memory, when not even a tree of one
    token fits.
    """
    tree = tree_budget
    while True:
        activation = activation_bytes(config, tree, context, dtype_bytes)
        target_kv = config_kv_bytes(config, kv_rows(context, tree), dtype_bytes)
        budget = default_vram_budget(
            free_vram_bytes,
            draft_weight_bytes,
            target_kv,
            draft_kv_bytes,
            activation,
            draft_graph_bytes=draft_graph_bytes,
        )
        if budget >= minimum_bytes:
            return DefaultBudget(budget, tree, tree_budget)
        if tree <= 1:
            draft = f"the draft model {format_bytes(draft_weight_bytes)}, " if draft_weight_bytes else ""
            raise InsufficientVRAMError(
                f"not enough VRAM for the target model even with a tree budget of 1 token: of "
                f"{format_bytes(free_vram_bytes)} free on the GPU, {draft}the KV caches for {context} tokens take "
                f"{format_bytes(target_kv + draft_kv_bytes)}, the draft's CUDA graphs "
                f"{format_bytes(draft_graph_bytes)}, activations {format_bytes(activation)} and a safety "
                f"margin {format_bytes(DEFAULT_MARGIN_BYTES)}, leaving {format_bytes(max(budget, 0))} for the "
                f"target's weights, which need at least {format_bytes(minimum_bytes)} (embeddings/lm_head and the "
                f"streaming slots). Use a shorter context length or a smaller draft model, close programs that use "
                "the GPU, or run on the CPU."
            )
        tree = max(1, tree // 2)
