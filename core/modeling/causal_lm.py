"""A decoder-only model as the engine sees it: token ids + positions + mask + cache -> logits.

We run the decoder loop ourselves (embed, each decoder layer, final norm, lm_head) instead of calling the
HF model's forward, for three reasons: logits are computed only for the rows a caller needs (a 2,000-token
prefill must not materialise 2,000 x 128k logits, and a scored tree keeps its hidden states so that
verification applies the LM head only to the rows it visits: `RowLogits`), an offloaded target can stream
each layer's weights inside the same loop, and we never depend on how a model class slices its layer list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from core.modeling.attention import attention_fix_enabled, steady_attention, use_grouped_attention
from core.modeling.kv_cache import InPlaceKVCache
from core.planning.graph_plan import column_bucket
from core.planning.residency import PREFILL_CHUNK, kv_rows
from core.modeling.tree_mask import additive_mask, causal_visibility

# Draft tokens per pass a model's KV cache has rows for when no tree budget was planned (max_tree_tokens).
DEFAULT_TREE_ROWS = 2048


@dataclass
class CausalLM:
    """A loaded HF causal LM plus what the engine needs to know about it.

    max_context: the planned context (the model's own limit or less, see residency.resolve_context_length);
    conversations are trimmed to it and the KV caches are preallocated for it.
    max_tree_tokens: the most draft tokens one pass may add to this model's cache (None: DEFAULT_TREE_ROWS).
    Loading sets it to the planned tree budget (an offloaded target lowers it when free VRAM cannot hold the
    activations of the requested tree); generation caps its tree budget to it.
    prefill_chunk: the most prompt tokens one forward takes (longer prompts are prefilled in chunks).
    step_graph_room: whether the VRAM plan leaves room for the CUDA graphs of a one-token step
    (core.planning.graph_plan.step_graph_bytes); an offloaded target's loader sets it from its budget.
    """

    model: nn.Module
    name: str
    eos_token_ids: tuple[int, ...]
    max_context: int
    max_tree_tokens: int | None = None
    prefill_chunk: int = PREFILL_CHUNK
    step_graph_room: bool = True

    def __post_init__(self) -> None:
        use_grouped_attention(self.model)  # grouped key/value heads read once, not copied per head
        steady_attention(self.device)  # no cuDNN attention: it plans anew for every shape

    @property
    def config(self):
        return self.model.config

    @property
    def vocab_size(self) -> int:
        return self.model.lm_head.out_features

    @property
    def device(self) -> torch.device:
        return self.model.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.lm_head.weight.dtype

    @property
    def decoder_layers(self) -> nn.ModuleList:
        return self.model.model.layers

    @property
    def tree_rows(self) -> int:
        """Draft tokens per pass the KV cache has room for."""
        return self.max_tree_tokens if self.max_tree_tokens is not None else DEFAULT_TREE_ROWS

    @property
    def kv_rows(self) -> int:
        """Rows each KV cache is preallocated with: the planned context plus one pass's tree and root."""
        return kv_rows(self.max_context, self.tree_rows)

    def new_cache(self) -> InPlaceKVCache:
        return InPlaceKVCache(len(self.decoder_layers), self.kv_rows)

    @property
    def streams_layers(self) -> bool:
        """Whether a forward copies layer weights in (an offloaded target): its step cannot be a CUDA graph."""
        return False

    def layers_to_run(self) -> Iterator[nn.Module]:
        """The decoder layers of one pass, in order, each ready to compute. An offloaded model overrides
        this to stream each layer's weights in before yielding it and to free its slot afterwards."""
        yield from self.decoder_layers

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor,
        cache: InPlaceKVCache,
        logit_rows: torch.Tensor | slice | None = None,
    ) -> torch.Tensor:
        """Run new tokens on top of `cache` (which they extend) and return logits for `logit_rows`.

        input_ids, position_ids: long [n]; mask: additive [1, 1, n, cache.length + n] in the model dtype.
        Returns logits [rows, V] in the model dtype.
        """
        return self.model.lm_head(self.hidden_states(input_ids, position_ids, mask, cache, logit_rows))

    @torch.no_grad()
    def row_logits(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor,
        cache: InPlaceKVCache,
        rows: torch.Tensor | slice | None = None,
    ) -> "RowLogits":
        """Like forward, but the LM head is applied later, to each row a caller reads (see RowLogits)."""
        return RowLogits(self.hidden_states(input_ids, position_ids, mask, cache, rows), self.model.lm_head)

    @torch.no_grad()
    def extend(self, input_ids: torch.Tensor, cache: InPlaceKVCache) -> None:
        """Append a causal chunk of tokens to `cache` without computing any logits (prefill)."""
        n = input_ids.shape[0]
        visible = causal_visibility(cache.length, n, self.device)
        positions = torch.arange(cache.length, cache.length + n, device=self.device)
        self.hidden_states(input_ids, positions, additive_mask(visible, self.dtype), cache, slice(0, 0))

    @torch.no_grad()
    def hidden_states(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor,
        cache: InPlaceKVCache,
        rows: torch.Tensor | slice | None = None,
    ) -> torch.Tensor:
        """The decoder stack over new tokens on top of `cache`; final-normed hidden states [rows, H]."""
        return self.decoder_states(self.embed(input_ids), position_ids, mask, cache, rows)

    @torch.no_grad()
    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The embedded tokens [1, n, H]. Apart from `decoder_states` because a CUDA graph can only capture
        what follows it: an offloaded target's embedding table may sit in host RAM (core.offload.host_embedding),
        a lookup on the host that a graph would not repeat."""
        return self.model.model.embed_tokens(input_ids.to(self.device)[None])

    @torch.no_grad()
    def decoder_states(
        self,
        hidden: torch.Tensor,
        position_ids: torch.Tensor,
        mask: torch.Tensor,
        cache: InPlaceKVCache,
        rows: torch.Tensor | slice | None = None,
    ) -> torch.Tensor:
        """The decoder layers and the final norm over embedded tokens `hidden` [1, n, H] (see hidden_states)."""
        inner = self.model.model
        positions = position_ids.to(self.device)[None]
        rope = inner.rotary_emb(hidden, position_ids=positions)
        mask = mask.to(device=self.device, dtype=hidden.dtype)
        columns = bucketed_columns(cache, mask.shape[-1])
        if columns is not None:  # mask: [1, 1, n, columns], the added columns blocked
            mask = torch.nn.functional.pad(mask, (0, columns - mask.shape[-1]), value=torch.finfo(mask.dtype).min)
        layers = self.layers_to_run()
        cache.attend_columns(columns)
        try:
            for layer in layers:
                out = layer(
                    hidden,
                    attention_mask=mask,
                    position_embeddings=rope,
                    position_ids=positions,
                    past_key_values=cache,
                    use_cache=True,
                )
                hidden = out[0] if isinstance(out, tuple) else out
        finally:
            cache.attend_columns(None)
            layers.close()  # after an error an offloaded model drops its prefetch state at once
        selected = hidden[0] if rows is None else hidden[0, rows]
        return inner.norm(selected)


def bucketed_columns(cache: InPlaceKVCache, needed: int) -> int | None:
    """The attention columns of a forward that needs `needed` (cache rows after it): the column bucket that
    holds them (core.planning.graph_plan.column_bucket), so that a conversation's forwards share a few shapes;
    None where nothing is rounded: the fix is off (SPECEXEC_ATTENTION_FIX=0), a windowed search forward (its
    columns are bucketed already), or more rows than the cache has (the cache then refuses the write)."""
    if not attention_fix_enabled() or cache.windowed or needed > cache.capacity:
        return None
    columns = column_bucket(needed, cache.capacity)
    return columns if columns > needed else None


class RowLogits:
    """The logits of a scored tree, row by row: the LM head runs on one row when it is read.

    Verification walks the tree from the root and reads the distribution of each node it visits (the
    accepted path and the node it stops at): a handful of rows, where a 2,049-token tree times a 128k
    vocabulary would be 0.5 GB of logits. One row through the head is also the exact computation a
    sequential step does, so the two agree to the last bit whenever the hidden states do.
    """

    def __init__(self, hidden: torch.Tensor, head: nn.Module) -> None:
        self._hidden = hidden  # [N, H], final-normed
        self._head = head

    @property
    def device(self) -> torch.device:
        return self._hidden.device

    @property
    def vocab_size(self) -> int:
        return self._head.out_features

    def __len__(self) -> int:
        return self._hidden.shape[0]

    @torch.no_grad()
    def __getitem__(self, row: int) -> torch.Tensor:
        """Logits [V] after node `row`."""
        return self._head(self._hidden[row : row + 1])[0]

    @torch.no_grad()
    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """Logits [n, V] after the nodes in `index` (long [n], on the device: nothing is read back)."""
        return self._head(self._hidden.index_select(0, index))
