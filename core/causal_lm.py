"""A decoder-only model as the engine sees it: token ids + positions + mask + cache -> logits.

We run the decoder loop ourselves (embed, each decoder layer, final norm, lm_head) instead of calling the
HF model's forward, for three reasons: logits are computed only for the rows a caller needs (a 2,000-token
prefill must not materialise 2,000 x 128k logits), an offloaded target can stream each layer's weights
inside the same loop, and we never depend on how a model class slices its layer list.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from core.errors import UnsupportedArchitectureError
from core.kv_cache import InPlaceKVCache

# Architectures whose decoder stack is embed_tokens -> layers(hidden, mask, rope) -> norm -> lm_head.
SUPPORTED_MODEL_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe"})


def check_architecture(model_type: str) -> None:
    """Raises UnsupportedArchitectureError for model types the decoder loop was not written for."""
    if model_type not in SUPPORTED_MODEL_TYPES:
        supported = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
        raise UnsupportedArchitectureError(
            f"model type '{model_type}' is not supported; supported types are: {supported}"
        )


@dataclass
class CausalLM:
    """A loaded HF causal LM plus what the engine needs to know about it.

    max_tree_tokens: the most draft tokens one forward of this model may score (None: no limit). An
    offloaded target sets it when free VRAM cannot hold the activations of the requested tree; generation
    then caps its tree budget to it.
    """

    model: nn.Module
    name: str
    eos_token_ids: tuple[int, ...]
    max_context: int
    max_tree_tokens: int | None = None

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

    def new_cache(self) -> InPlaceKVCache:
        return InPlaceKVCache(len(self.decoder_layers))

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
        Returns float logits [rows, V].
        """
        inner = self.model.model
        # hidden: [1, n, hidden]
        hidden = inner.embed_tokens(input_ids.to(self.device)[None])
        positions = position_ids.to(self.device)[None]
        rope = inner.rotary_emb(hidden, position_ids=positions)
        mask = mask.to(device=self.device, dtype=hidden.dtype)
        layers = self.layers_to_run()
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
            layers.close()  # after an error an offloaded model drops its prefetch state at once
        rows = hidden[0] if logit_rows is None else hidden[0, logit_rows]
        return self.model.lm_head(inner.norm(rows))
