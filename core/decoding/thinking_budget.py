"""A thinking budget: the most tokens a thinking model may spend inside its `<think>` block before the block is
closed for it (vLLM's `thinking_token_budget`, llama.cpp's reasoning budget).

Why: under a grammar that forces an answer after the thought (structured output, a forced tool call), a thought
that never closes by itself would take every token the answer may have, and the forced answer would never
come. Once the budget is spent, only tokens that write the rest of the closing marker are allowed; the grammar
then holds the answer as always.

The state of one path of tokens (`ThoughtState`) is read from the tokens' bytes, so the same rule masks the
emitted answer, every node of a SpecExec tree and the draft's proposals (core.decoding.constraints):
- "before": the model may still open the block (Qwen3's template leaves that to it); whitespace and a part of
  the opening marker keep it here, anything else is the answer (no thought at all);
- "thinking": tokens after the opening marker (or from the start, when the prompt opened the block) count
  against the budget; `tail` keeps the last bytes, which may be the start of the closing marker;
- "answer": the block is closed; the budget has no more say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Literal

import torch

from core.text.reasoning import ThinkingFormat

Phase = Literal["before", "thinking", "answer"]
_WHITESPACE = b" \t\r\n"


@dataclass(frozen=True)
class ThoughtState:
    """Where a path of answer tokens stands: its phase, the thought's tokens so far (`spent`), and the bytes
    that may be the start of a marker (`tail`: before the block, all bytes so far; inside, the last ones)."""

    phase: Phase
    spent: int = 0
    tail: bytes = b""


class ThinkingBudget:
    """At most `limit` tokens of thought, then the closing marker: `step` moves a ThoughtState by one token,
    `closing` says which tokens may come next once the budget is spent (None: no restriction)."""

    def __init__(
        self,
        fmt: ThinkingFormat,
        limit: int,
        token_bytes: Callable[[int], bytes],
        marker_mask: Callable[[bytes], torch.Tensor],
    ) -> None:
        """`token_bytes`: a token's bytes; `marker_mask(text)`: bool [V], the tokens that can begin writing
        `text` (a rest of the closing marker)."""
        if limit < 0:
            raise ValueError("a thinking budget cannot be negative")
        self.limit = limit
        self._open = fmt.open.encode()
        self._close = fmt.close.encode()
        self._start = ThoughtState("thinking") if fmt.starts_inside else ThoughtState("before")
        self._token_bytes = token_bytes
        self._marker_mask = marker_mask
        self._masks: dict[bytes, torch.Tensor] = {}

    def start(self) -> ThoughtState:
        """The state before the answer's first token."""
        return self._start

    def step(self, state: ThoughtState, token: int) -> ThoughtState:
        """The state after `token`."""
        if state.phase == "answer":
            return state
        data = state.tail + self._token_bytes(token)
        if state.phase == "before":
            text = data.lstrip(_WHITESPACE)
            if len(text) < len(self._open) and self._open.startswith(text):  # whitespace, or a part of the marker
                return ThoughtState("before", 0, data)
            if not text.startswith(self._open):
                return ThoughtState("answer")  # the answer began without a thought
            return self._thinking(0, text[len(self._open) :])
        return self._thinking(state.spent + 1, data)

    def _thinking(self, spent: int, data: bytes) -> ThoughtState:
        if self._close in data:
            return ThoughtState("answer")
        keep = len(self._close) - 1
        return ThoughtState("thinking", spent, data[-keep:] if keep else b"")

    def closing(self, state: ThoughtState) -> torch.Tensor | None:
        """bool [V]: once the thought has spent the budget, the tokens that write (the rest of) the closing
        marker; None while it may go on, or outside the block."""
        if state.phase != "thinking" or state.spent < self.limit:
            return None
        begun = next((n for n in range(len(self._close) - 1, 0, -1) if state.tail.endswith(self._close[:n])), 0)
        rest = self._close[begun:]
        if rest not in self._masks:
            self._masks[rest] = self._marker_mask(rest)
        return self._masks[rest]


def llguidance_budget(
    fmt: ThinkingFormat, limit: int, bridge: Any, vocab_size: int, close_token: int | None = None
) -> ThinkingBudget:
    """A ThinkingBudget over llguidance's view of the vocabulary (`bridge`, core.decoding.constraints.bridge_for):
    a token's bytes from it, and the tokens that begin a marker's rest from a one-string grammar's mask
    (`close_token`: the closing marker's special token, which writes the whole marker)."""
    import llguidance

    def marker_mask(rest: bytes) -> torch.Tensor:
        whole = close_token is not None and rest == fmt.close.encode()
        source = json.dumps(rest.decode()) + (f" | <[{close_token}]>" if whole else "")
        grammar = llguidance.LLMatcher.grammar_from_lark(f"start: {source}")
        matcher = llguidance.LLMatcher(bridge, grammar, log_level=0)
        words = torch.frombuffer(bytearray(matcher.compute_bitmask()), dtype=torch.int32)
        bits = (words[:, None] >> torch.arange(32, dtype=torch.int32)) & 1
        return bits.reshape(-1)[:vocab_size].bool()

    return ThinkingBudget(fmt, limit, lambda token: bridge.decode_bytes([token]), marker_mask)
