"""A thinking model's reasoning, read apart from its answer by the markers its own chat template uses.

Models that think (DeepSeek-R1 and its distills, QwQ, Qwen3) write `<think> ... </think>` before the answer.
Where the block opens differs, and only the rendered prompt tells:
- DeepSeek-R1 distills' templates end the prompt with `<think>\\n`: the answer starts inside the block;
- Qwen3's template leaves the opening to the model, and with `enable_thinking=False` pre-fills an empty
  block (`<think>\\n\\n</think>\\n\\n`) in the prompt: the answer starts after it.

`thinking_format` reads both from a tokenizer and a conversation (the generation prompt the template adds);
`ReasoningSplitter` then cuts the streamed answer text into reasoning and content as it arrives, holding back
only what may be the start of a marker. The markers themselves are in neither part, and neither is the
whitespace that only separates them from the text around them (nor whitespace before the answer's first
text). Only a block at the very start of the answer
is reasoning: a `<think>` later on (say, in code the answer quotes) is content.

Plain Python (no torch): the engine, the API server and the app all use it. Markers that a tokenizer marks
as special tokens would be dropped by the detokeniser before they reach the splitter; the models named above
keep them as ordinary added tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from core.text.chat_template import render_template
from core.text.template_kwargs import template_source

OPEN, CLOSE = "<think>", "</think>"
THINKING_SWITCH = "enable_thinking"  # the template variable Qwen3 reads (chat_template_kwargs)

ThinkingControl = Literal["always", "switchable"]


def thinking_control(tokenizer: Any) -> ThinkingControl | None:
    """Whether the model's template writes a thinking block: "switchable" when it reads `enable_thinking`
    (Qwen3: chat_template_kwargs can turn thinking off), "always" when it knows the markers but no switch
    (DeepSeek-R1 distills, QwQ), None when it has no thinking markers at all."""
    source = template_source(tokenizer)
    if OPEN not in source and CLOSE not in source:
        return None
    return "switchable" if THINKING_SWITCH in source else "always"


@dataclass(frozen=True)
class ThinkingFormat:
    """How one answer's reasoning is marked: `open`/`close`, and whether the prompt already opened the block
    (`starts_inside`: the answer's first text is reasoning) and holds reasoning already (`resumes`: an answer
    continued while it thought, core.text.continuation, whose first whitespace is part of the thought)."""

    open: str = OPEN
    close: str = CLOSE
    starts_inside: bool = False
    resumes: bool = False


def opens_inside(generation_prompt: str, fmt: ThinkingFormat = ThinkingFormat()) -> bool:
    """Whether text that a template appends for the answer (`generation_prompt`) leaves a block open."""
    return generation_prompt.rfind(fmt.open) > generation_prompt.rfind(fmt.close)


def generation_prompt(tokenizer: Any, messages: list[dict[str, Any]], **template_kwargs: Any) -> str:
    """What the chat template adds after the conversation to start the answer (e.g.
    "<|im_start|>assistant\\n<think>\\n"): the rendering with the generation prompt minus the one without.
    Empty when the two renderings do not line up (a template that changes earlier text for the answer)."""
    with_prompt = render_template(tokenizer, messages, **template_kwargs)
    without = render_template(tokenizer, messages, add_generation_prompt=False, **template_kwargs)
    return with_prompt[len(without) :] if with_prompt.startswith(without) else ""


def thinking_format(tokenizer: Any, messages: list[dict[str, Any]], **template_kwargs: Any) -> ThinkingFormat | None:
    """The reasoning markers of an answer to `messages` (None: the model's template has none), with where
    the answer starts read from the template's generation prompt."""
    if thinking_control(tokenizer) is None:
        return None
    return ThinkingFormat(starts_inside=opens_inside(generation_prompt(tokenizer, messages, **template_kwargs)))


@dataclass(frozen=True)
class Split:
    """A piece of answer text cut in two: the model's reasoning and the answer's content."""

    reasoning: str = ""
    content: str = ""

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content)


def _partial_tail(text: str, marker: str) -> int:
    """Where a possible start of `marker` begins at the end of `text` (len(text) when none)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return len(text) - size
    return len(text)


class ReasoningSplitter:
    """Cuts an answer, pushed piece by piece, into reasoning and content (see the module docstring).

    States: "start" (the answer's beginning: it may open a block), "thinking", "after" (the block just
    closed: whitespace before the content is dropped), "content" (everything else is the answer)."""

    def __init__(self, fmt: ThinkingFormat) -> None:
        self.fmt = fmt
        self.state = "thinking" if fmt.starts_inside else "start"
        self._buffer = ""
        self._reasoning_started = fmt.resumes  # leading whitespace of the reasoning is dropped
        self._held_space = ""  # whitespace at the end of the reasoning so far: kept only if text follows

    @property
    def thinking(self) -> bool:
        """Whether the text pushed so far ends inside the reasoning block."""
        return self.state == "thinking"

    def push(self, text: str) -> Split:
        """Add answer text; returns what can be shown now."""
        self._buffer += text
        return self._drain(final=False)

    def finish(self) -> Split:
        """The answer ended: everything held back (an unclosed block stays reasoning)."""
        return self._drain(final=True)

    def _drain(self, final: bool) -> Split:
        reasoning: list[str] = []
        content: list[str] = []
        while self._buffer:
            if self.state == "start":
                visible = self._buffer.lstrip()
                if visible.startswith(self.fmt.open):
                    self._buffer = visible[len(self.fmt.open) :]
                    self.state = "thinking"
                elif not final and (not visible or self.fmt.open.startswith(visible)):
                    break  # nothing but whitespace or a marker's beginning yet
                else:  # no block: the answer (after the whitespace a pre-filled empty block leaves)
                    self._buffer = visible
                    self.state = "content"
            elif self.state == "thinking":
                end = self._buffer.find(self.fmt.close)
                if end >= 0:
                    reasoning.append(self._reasoning(self._buffer[:end], closing=True))
                    self._buffer = self._buffer[end + len(self.fmt.close) :]
                    self.state = "after"
                    continue
                keep = len(self._buffer) if final else _partial_tail(self._buffer, self.fmt.close)
                reasoning.append(self._reasoning(self._buffer[:keep], closing=final))
                self._buffer = self._buffer[keep:]
                break
            elif self.state == "after":
                self._buffer = self._buffer.lstrip()
                if self._buffer:
                    self.state = "content"
            else:
                content.append(self._buffer)
                self._buffer = ""
        return Split("".join(reasoning), "".join(content))

    def _reasoning(self, text: str, closing: bool) -> str:
        """Reasoning text without the whitespace that only pads it inside the markers: leading whitespace is
        dropped, trailing whitespace held until more reasoning follows (dropped when the block closes)."""
        if not self._reasoning_started:
            text = text.lstrip()
            if not text:
                return ""
            self._reasoning_started = True
        body = text.rstrip()
        out = ""
        if body:
            out, self._held_space = self._held_space + body, ""
        self._held_space = "" if closing else self._held_space + text[len(body) :]
        return out


def split_text(text: str, fmt: ThinkingFormat) -> Split:
    """A whole answer cut in two (what streaming it through a ReasoningSplitter gives)."""
    splitter = ReasoningSplitter(fmt)
    first, last = splitter.push(text), splitter.finish()
    return Split(first.reasoning + last.reasoning, first.content + last.content)
