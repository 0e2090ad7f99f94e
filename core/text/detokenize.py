"""Incremental detokenisation for streaming.

Decoding each new token on its own breaks two things: a multi-byte UTF-8 character split over several
byte-level tokens decodes to U+FFFD, and SentencePiece drops the leading space of the first token it
decodes. So we decode a short window that starts a few tokens back (the "prefix") and emit only what the
new tokens add to it, and hold text back while it ends in an incomplete character.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

_CONTEXT_TOKENS = 6


class IncrementalDetokenizer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, context_ids: list[int]) -> None:
        """context_ids: tokens before the generated ones (the prompt's tail gives spacing context)."""
        self._tokenizer = tokenizer
        self._ids = list(context_ids[-_CONTEXT_TOKENS:])
        self._prefix_offset = 0
        self._read_offset = len(self._ids)

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes (possibly empty)."""
        self._ids.append(token_id)
        prefix_text = self._decode(self._ids[self._prefix_offset : self._read_offset])
        full_text = self._decode(self._ids[self._prefix_offset :])
        if len(full_text) <= len(prefix_text) or full_text.endswith("\ufffd"):
            return ""  # nothing new yet, or an incomplete multi-byte character
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._ids)
        return full_text[len(prefix_text) :]
