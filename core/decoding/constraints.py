"""Grammar-constrained decoding (JSON mode, JSON schemas, forced tool calls) that keeps SpecExec exact.

A grammar (llguidance) says, after any prefix of the answer, which tokens may come next. The token at absolute
position t is drawn from the target's distribution with the disallowed tokens masked out, by the same keyed
draw as always (core/decoding/sampling.py), so plain decoding and SpecExec emit the same tokens under a grammar as
they do without one: both mask position t with the grammar's state after the same prefix.

- Plain decoding: one mask per step, for the state after the tokens emitted so far (`allowed`).
- SpecExec: every tree node gets the mask of the state after its own path (`tree_allowed`, a walk over the
  tree with rollback), and the verification walk samples each node's row under its node's mask. The draft is
  masked the same way while it searches (`child_allowed`), so it proposes only tokens the grammar allows and
  its budget is not spent on branches the target can never take.
- After each step or pass the emitted tokens advance the grammar (`advance`).

Cost: the host must know the tree to compute its masks, so a constrained SpecExec pass reads the tree once
and each draft forward's expanded nodes once (host syncs a plain request does not pay; docs/benchmarks.md).

The tokenizer bridge (llguidance's view of the model's vocabulary, ~1 s to build) is made once per tokenizer
and cached (`bridge_for`).
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import torch

from core.decoding.device_io import to_device
from core.decoding.thinking_budget import ThoughtState, llguidance_budget
from core.errors import GrammarError, InvalidSettingError
from core.text.reasoning import ThinkingFormat

GrammarKind = Literal["json_object", "json_schema", "lark"]

# JSON mode: any JSON object (what OpenAI's json_object promises), whitespace kept compact enough that a
# model cannot pad forever with newlines.
_ANY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object"}
_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

_BRIDGES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class GrammarSpec:
    """What an answer must match: kind "json_object" (any JSON object), "json_schema" (`source`: the schema as
    JSON text) or "lark" (`source`: an llguidance Lark grammar, e.g. a tool call in a model's own format)."""

    kind: GrammarKind
    source: str = ""

    def grammar(self) -> str:
        """The llguidance grammar text (raises InvalidSettingError for a schema that is not JSON)."""
        import llguidance

        if self.kind == "lark":
            return llguidance.LLMatcher.grammar_from_lark(self.source)
        try:
            schema = _ANY_OBJECT_SCHEMA if self.kind == "json_object" else json.loads(self.source)
            return llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=_JSON_OPTIONS)
        except ValueError as error:
            raise GrammarError(f"the JSON schema cannot be used: {error}") from error


# any answer: what a thinking budget without a grammar decodes under (after_thinking puts the thought before it)
FREE_TEXT = GrammarSpec("lark", "start: TEXT\nTEXT: /(?s:.)*/")


def after_thinking(
    spec: GrammarSpec, fmt: ThinkingFormat, open_token: int | None = None, close_token: int | None = None
) -> GrammarSpec:
    """`spec` for a thinking model's answer: its reasoning block first, free text that does not close it
    (mandatory when the prompt opened the block, optional when the model opens it, whitespace before the
    opening marker included), then whitespace, then what `spec` asks for. Without this the grammar would hold
    from the first token and a model whose prompt opened `<think>` would have to write its JSON (or call)
    inside the block, where it is not the answer; and a model that writes a newline before `<think>` (several
    fine-tunes do) would have that newline read as the answer's start, its `<think>` masked.

    `open_token` / `close_token`: a marker's token where llguidance reads it as a special token (Qwen3's and
    the R1 distills' `<think>` and `</think>`, added tokens of the form `<...>`), which text in the grammar
    never matches: the marker is then that token or its text."""
    if spec.kind == "lark":
        answer = re.sub(r"(?m)^start\s*:", "answer:", spec.source)
    else:
        schema = _ANY_OBJECT_SCHEMA if spec.kind == "json_object" else json.loads(spec.source)
        schema = dict(schema) if isinstance(schema, dict) else {"allOf": [schema]}
        answer = "answer: %json " + json.dumps({**schema, "x-guidance": _JSON_OPTIONS})
    # one lexeme from the thought to its closing marker (the lexer does not backtrack, so the marker cannot be
    # a lexeme of its own after free text): text ending with the marker, with no marker before the end
    close = re.escape(fmt.close).replace("/", "\\/")  # a Lark regex ends at an unescaped "/"
    rules = [f"THOUGHT: /(?s:.)*{close}/ & ~/(?s:.)*{close}(?s:.)+/", "GAP: /[ \\t\\r\\n]*/", answer]
    thought = "THOUGHT"
    if close_token is not None:  # or text without the marker (maybe none), then the marker's token
        thought = "thought"
        rules += [
            f"thought: THOUGHT | OPEN_THOUGHT? <[{close_token}]>",
            f"OPEN_THOUGHT: /(?s:.)+/ & ~/(?s:.)*{close}(?s:.)*/",
        ]
    if fmt.starts_inside:
        return GrammarSpec("lark", "\n".join([f"start: {thought} GAP answer", *rules]))
    # the whitespace before the opening marker is one lexeme with it: the thought's, not the answer's
    rules.append("OPEN: /[ \\t\\r\\n]*/ " + json.dumps(fmt.open))
    opening = "OPEN"
    if open_token is not None:
        opening = "opening"
        rules += [f"opening: OPEN | SPACE? <[{open_token}]>", "SPACE: /[ \\t\\r\\n]+/"]
    return GrammarSpec("lark", "\n".join([f"start: ({opening} {thought} GAP)? answer", *rules]))


def marker_tokens(tokenizer: Any, bridge: Any, fmt: ThinkingFormat) -> tuple[int | None, int | None]:
    """The tokens of `fmt`'s opening and closing markers that llguidance reads as special (None: a marker
    that is not one token, or one that llguidance reads as its text)."""
    vocab = tokenizer.get_vocab()

    def special(marker: str) -> int | None:
        token = vocab.get(marker)
        return token if token is not None and bridge.is_special_token(token) else None

    return special(fmt.open), special(fmt.close)


def bridge_for(tokenizer: Any, vocab_size: int, eos_token_ids: tuple[int, ...]) -> Any:
    """llguidance's tokenizer for a model, built once per tokenizer object (it takes about a second)."""
    cached = _BRIDGES.get(tokenizer)
    if cached is not None and cached[0] == (vocab_size, eos_token_ids):
        return cached[1]
    import llguidance.hf

    try:
        bridge = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=list(eos_token_ids))
    except Exception as error:  # noqa: BLE001 - a slow (Python) tokenizer, or one llguidance cannot read
        raise InvalidSettingError(
            f"structured output needs a fast tokenizer; this model's cannot be used ({type(error).__name__}: {error})"
        ) from error
    _BRIDGES[tokenizer] = ((vocab_size, eos_token_ids), bridge)
    return bridge


class GrammarConstraint:
    """The grammar state of one answer: masks for the next token, for a draft tree's nodes, and for the
    draft search's expanded nodes; `advance` with what was emitted. A thinking model's answer (`thinking`: its
    markers) thinks freely before `spec` holds (after_thinking); with a thinking budget (`thinking_budget`:
    tokens; core.decoding.thinking_budget) a thought that has spent it may only be closed, on every path alike."""

    def __init__(
        self,
        spec: GrammarSpec,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: tuple[int, ...],
        thinking: ThinkingFormat | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        import llguidance

        self.vocab_size = vocab_size
        self._eos = frozenset(eos_token_ids)
        bridge = bridge_for(tokenizer, vocab_size, eos_token_ids)
        self._budget = None
        if thinking is not None:
            markers = marker_tokens(tokenizer, bridge, thinking)
            spec = after_thinking(spec, thinking, *markers)
            if thinking_budget is not None:
                self._budget = llguidance_budget(thinking, thinking_budget, bridge, vocab_size, markers[1])
                self._thought = self._budget.start()
        # log_level 0: tried paths the grammar refuses are expected (padding rows), not worth a warning
        try:
            self._matcher = llguidance.LLMatcher(bridge, spec.grammar(), log_level=0)
        except ValueError as error:  # llguidance refuses the grammar (an unsupported schema feature, a bad rule)
            raise GrammarError(f"the grammar cannot be used: {error}") from error
        if self._matcher.is_error():
            raise GrammarError(f"the grammar cannot be used: {self._matcher.get_error()}")
        self._words = (vocab_size + 31) // 32
        self._bits = torch.tensor([1 << i for i in range(31)] + [-(1 << 31)], dtype=torch.int32)

    # -- masks ---------------------------------------------------------------------------------------------

    def _mask(self, thought: ThoughtState | None = None) -> torch.Tensor:
        """bool [V] on the host: the tokens allowed in the matcher's current state, where the thought stands
        at `thought` (the budget's say: only the closing marker once it is spent; kept out where the grammar
        allows none of it, e.g. after a token that ended inside a character, until the next one)."""
        words = torch.frombuffer(bytearray(self._matcher.compute_bitmask()), dtype=torch.int32)[: self._words]
        bits = (words[:, None] & self._bits) != 0
        mask = bits.reshape(-1)[: self.vocab_size]
        closing = None if thought is None else self._budget.closing(thought)
        if closing is not None and (mask & closing).any():
            mask = mask & closing
        return mask

    def _thought_after(self, path: list[int]) -> ThoughtState | None:
        """The thought's state after `path` below what was emitted (None: no budget)."""
        if self._budget is None:
            return None
        thought = self._thought
        for token in path:
            thought = self._budget.step(thought, token)
        return thought

    def allowed(self, device: torch.device | str) -> torch.Tensor:
        """bool [V] on `device`: the tokens allowed after what has been emitted so far."""
        return to_device(self._mask(self._thought_after([])), device, torch.bool)

    def _masks_along(self, paths: list[list[int]]) -> torch.Tensor:
        """bool [len(paths), V]: for each path of tokens after the current state, the mask at its end.

        A path the grammar refuses (a padding node's, or one past an end of sequence) can never be sampled
        into, so its row does not matter; it allows every token rather than none, so that no row of
        probabilities is 0/0."""
        rows = torch.ones((len(paths), self.vocab_size), dtype=torch.bool)
        for i, path in enumerate(paths):
            consumed = self._matcher.try_consume_tokens(path) if path else 0
            if consumed == len(path):
                mask = self._mask(self._thought_after(path))
                if mask.any():
                    rows[i] = mask
            if consumed:
                self._matcher.rollback(consumed)
        return rows

    def tree_allowed(self, tokens: torch.Tensor, parents: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """bool [N, V] on the tree's device: row i is the mask after node i's path (root excluded from the
        path: it is the last emitted token). One host read of the tree."""
        n = tokens.shape[0]
        values = torch.cat([tokens, parents, valid.long()]).tolist()  # host sync, deliberate: the tree's one read
        paths = _paths(values[:n], values[n : 2 * n], [bool(v) for v in values[2 * n :]], range(n))
        return to_device(self._masks_along(paths), tokens.device, torch.bool)

    def child_allowed(self, e_token: torch.Tensor, e_parent: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """bool [len(rows), V] on the device: the masks of the draft search's expanded nodes `rows` (E indices;
        E index 0 is the root), for the children the draft may propose. One host read per draft forward."""
        n = e_token.shape[0]
        values = torch.cat([e_token, e_parent, rows]).tolist()  # host sync, deliberate: one read per forward
        paths = _paths(values[:n], values[n : 2 * n], [True] * n, values[2 * n :])
        return to_device(self._masks_along(paths), e_token.device, torch.bool)

    # -- state ---------------------------------------------------------------------------------------------

    def advance(self, tokens: list[int]) -> None:
        """The emitted tokens join the grammar's state, up to and including an end of sequence (the answer
        ends there; a pass may have sampled past it)."""
        for token in tokens:
            if token in self._eos and self._matcher.is_stopped():
                return  # a complete grammar takes no more tokens, its end of sequence included
            if not self._matcher.consume_token(token):
                raise RuntimeError(f"the grammar refused a token it had allowed: {self._matcher.get_error()}")
            if self._budget is not None:
                self._thought = self._budget.step(self._thought, token)
            if token in self._eos:
                return


def _paths(tokens: list[int], parents: list[int], valid: list[bool], nodes) -> list[list[int]]:
    """For each node, the tokens on its path below the root (root's own token excluded); [] for the root."""
    out = []
    for node in nodes:
        path = []
        while node > 0 and valid[node]:
            path.append(tokens[node])
            node = parents[node]
        out.append(path[::-1])
    return out
