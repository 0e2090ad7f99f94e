"""The state a decoding method carries between passes: the token sequence and each model's KV cache.

Invariant: a cache holds exactly the first `cache.length` tokens of `tokens`; the rest are "pending" for
that model and go into its next forward. The last token of the sequence is never cached by the target:
it is the root of the next draft tree (or the input of the next sequential step).

A long run of pending tokens (a new prompt) is prefilled in chunks of `model.prefill_chunk` before the pass
that needs logits (`prefill_pending`), so no forward holds more than a chunk plus a tree: a 32k-token prompt
in one pass with its tree would need a 32k-square attention mask (3 GB in 16 bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from core.modeling.causal_lm import CausalLM
from core.decoding.device_io import to_device
from core.modeling.kv_cache import InPlaceKVCache


@dataclass
class DecodeState:
    """`answer_start`: where in `tokens` the answer being generated begins (the presence and frequency
    penalties count the tokens from there on; core.decoding.generation.stream_generate sets it)."""

    tokens: list[int]
    target_cache: InPlaceKVCache
    draft_cache: InPlaceKVCache | None = None
    prefill_tokens: dict[str, int] = field(default_factory=dict)
    answer_start: int = 0

    def answer_counts(self, vocab_size: int, device: torch.device | str) -> torch.Tensor:
        """float32 [V] on `device`: how often each token occurs in the answer so far."""
        from core.decoding.sampling import occurrence_counts

        return occurrence_counts(self.tokens[self.answer_start :], vocab_size, device)

    @classmethod
    def fresh(cls, prompt_ids: list[int], target: CausalLM, draft: CausalLM | None) -> "DecodeState":
        return cls(list(prompt_ids), target.new_cache(), draft.new_cache() if draft is not None else None)

    def prefill_pending(self, model: CausalLM, cache: InPlaceKVCache) -> torch.Tensor:
        """Run all but the last `model.prefill_chunk` (or fewer) pending tokens through `model` in causal
        chunks of that size, adding them to `cache`; return the tokens still pending (long [<= chunk]), on
        the model's device (copied without stalling the host: core.decoding.device_io.to_device).

        A token past `model`'s vocabulary reaches it as its last row. Only a draft meets one: a pair's
        tokenizers are the same, but a draft's embedding may have fewer (padding) rows than its target's, as
        Qwen2.5's 0.5B-3B models' 151,936 against 7B-72B's 152,064, and the target may draw from its extra
        rows. The draft's guesses after it are worse; the answer, the target's, is the same
        (core.decoding.generation.check_token_ids refuses such a token in the target's prompt)."""
        last = model.vocab_size - 1
        pending = to_device([min(token, last) for token in self.tokens[cache.length :]], model.device)
        while pending.shape[0] > model.prefill_chunk:
            model.extend(pending[: model.prefill_chunk], cache)
            pending = pending[model.prefill_chunk :]
        return pending

    def reset_tokens(self, tokens: list[int]) -> None:
        """Start from a new token sequence, keeping the cached rows of the longest shared prefix.

        At least the last token stays pending, so the next pass has a root to start from.
        """
        shared = 0
        for old, new in zip(self.tokens, tokens):
            if old != new:
                break
            shared += 1
        keep = min(shared, len(tokens) - 1)
        for cache in (self.target_cache, self.draft_cache):
            if cache is not None:
                cache.crop_to(min(cache.length, keep))
        self.tokens = list(tokens)

    def truncate(self, length: int) -> None:
        """Forget tokens past `length` (e.g. ones a stop string cut off) and their cached rows."""
        self.reset_tokens(self.tokens[:length])
