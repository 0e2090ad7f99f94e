"""Reading tool calls out of a model's answer, in the format its chat template asked for (pure functions).

Torch-free and engine-free: the API server (core.server) and the chat's tool loop (core.tools, the app and
`specexec chat`) read calls with this one parser.

Two formats (core.text.tool_format names them; core.text.prompts finds a model's):
- HERMES (Qwen2.5, Qwen3, Hermes, the built-in pair): each call is
  `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; text outside the tags is the answer's content.
- LLAMA3_JSON (Llama 3.1 / 3.2): the answer is a JSON object `{"name": ..., "parameters": {...}}` (or several
  separated by ";"), after `<|python_tag|>` at times. A bare JSON answer is ambiguous (the user may have asked
  for JSON), so an object is a call only when it names one of the request's tools.

`ToolCallStream` reads an answer as it streams and says what may be sent at once: content as it comes (minus
a possible start of a tag, and whitespace that only separates calls) and each call in pieces (`CallDelta`):
its name as soon as `{"name": "...", "arguments": ` has been read, then its arguments' JSON text as the model
writes it, so a client sees the arguments grow (OpenAI's streamed tool calls). A call written another way
(arguments before the name, arguments as a JSON string) is sent whole once complete. Text that does not
become a call stays content: nothing is invented; with `forced` (a grammar made the answer a call, so
whatever the model wrote is one) an unfinished call cut off by max_tokens is dropped, never shown as text.
`parse_answer` reads a finished answer the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from core.system import json_text
from core.text.tool_format import HERMES, LLAMA3_JSON

OPEN, CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"


@dataclass(frozen=True)
class ToolCall:
    """One call: the function's name and its arguments as JSON text (what OpenAI's API sends)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class CallDelta:
    """A piece of the answer's `index`-th call: its name (on the first piece only) and/or more of its
    arguments' JSON text."""

    index: int
    name: str | None = None
    arguments: str = ""


def _call_from(obj: object, names: frozenset[str] | None) -> ToolCall | None:
    """A ToolCall from a decoded {"name", "arguments" | "parameters"} object; None when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    if names is not None and obj["name"] not in names:
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            json_text.loads(arguments)
        except ValueError:
            return None
        return ToolCall(obj["name"], arguments)
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], json.dumps(arguments, ensure_ascii=False))


def parse_answer(text: str, fmt: str | None, names: frozenset[str], forced: bool = False) -> tuple[str, list[ToolCall]]:
    """(content, calls) of a finished answer. `names`: the tools the request declared; `forced`: see the
    module docstring."""
    stream = ToolCallStream(fmt, names, forced)
    pieces = stream.push(text) + stream.finish()
    return "".join(p for p in pieces if isinstance(p, str)), collect_calls(pieces)


def collect_calls(pieces: list) -> list[ToolCall]:
    """The calls that a stream's CallDelta pieces add up to, in order."""
    names: dict[int, str] = {}
    arguments: dict[int, list[str]] = {}
    for piece in pieces:
        if isinstance(piece, CallDelta):
            if piece.name is not None:
                names[piece.index] = piece.name
            arguments.setdefault(piece.index, []).append(piece.arguments)
    return [ToolCall(names[i], "".join(arguments[i])) for i in sorted(names)]


def _tag_start(text: str, tag: str) -> int:
    """Where a possible (partial) `tag` begins at the end of `text`: text[i:] is a prefix of tag."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return len(text) - size
    return len(text)


_WS = re.compile(r"\s*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_ARGUMENT_KEYS = ('"arguments"', '"parameters"')


def _read_header(text: str) -> tuple[str, str | None, int]:
    """Match `{"name": "<name>", "arguments": ` (or "parameters") at the start of `text`:
    ("done", name, end), ("wait", None, 0) while `text` may still become it, or ("other", None, 0)."""
    at = _WS.match(text).end()
    steps: list[str | None] = ["{", '"name"', ":", None, ",", "key", ":"]
    name = None
    for step in steps:
        at = _WS.match(text, at).end()
        rest = text[at:]
        if not rest:
            return "wait", None, 0
        if step is None:  # the name: a complete JSON string
            match = _STRING.match(text, at)
            if match is None:
                return ("wait", None, 0) if rest.startswith('"') else ("other", None, 0)
            try:
                name = json.loads(match.group())
            except ValueError:
                return "other", None, 0
            at = match.end()
            continue
        options = _ARGUMENT_KEYS if step == "key" else (step,)
        hit = next((o for o in options if rest.startswith(o)), None)
        if hit is None:
            return ("wait", None, 0) if any(o.startswith(rest) for o in options) else ("other", None, 0)
        at += len(hit)
    return "done", name, at


class _JsonValueEnd:
    """Finds where one JSON object or array ends in text fed piece by piece (strings and escapes aware)."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def feed(self, text: str) -> int | None:
        """The index in `text` just past the value's end, or None if it goes on."""
        for i, char in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
            elif char in "{[":
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return i + 1
        return None


@dataclass
class _CallReader:
    """One call's JSON object, fed as it streams. States: "header" (until the name and the arguments' key
    are read), "value" (before the arguments' first character), "arguments" (an object or array: streamed as
    it comes), "string" (arguments as a JSON string: sent decoded once complete), "tail" (the object's last
    brace), "whole" (another shape: kept whole, read at the end), "done"."""

    names: frozenset[str] | None
    index: int
    state: str = "header"
    buffer: str = ""
    tail: str = ""  # text after the call's object
    named: bool = False
    value: _JsonValueEnd = field(default_factory=_JsonValueEnd)

    def feed(self, text: str) -> list[CallDelta]:
        out: list[CallDelta] = []
        if self.state == "header":
            self.buffer += text
            verdict, name, end = _read_header(self.buffer)
            if verdict == "wait":
                return out
            if verdict == "other" or (self.names is not None and name not in self.names):
                self.state = "whole"
                return out
            out.append(CallDelta(self.index, name=name))
            self.named = True
            self.state, text, self.buffer = "value", self.buffer[end:], ""
        if self.state == "value":
            text = text.lstrip()
            if not text:
                return out
            self.state = "arguments" if text[0] in "{[" else "string"
        if self.state == "string":
            self.buffer += text
            match = _STRING.match(self.buffer)
            if match is None:
                return out
            try:
                decoded = json.loads(match.group())
            except ValueError:
                decoded = ""
            out.append(CallDelta(self.index, arguments=decoded if isinstance(decoded, str) else ""))
            self.state, text, self.buffer = "tail", self.buffer[match.end() :], ""
        if self.state == "arguments":
            stop = self.value.feed(text)
            piece = text if stop is None else text[:stop]
            if piece:
                out.append(CallDelta(self.index, arguments=piece))
            if stop is not None:
                self.state, text = "tail", text[stop:]
            else:
                return out
        if self.state == "tail":
            self.tail += text
            closing = self.tail.lstrip()
            if closing.startswith("}"):
                self.state, self.tail = "done", closing[1:]
        elif self.state in ("whole", "done"):
            if self.state == "whole":
                self.buffer += text
            else:
                self.tail += text
        return out

    def finish(self) -> tuple[list[CallDelta], bool]:
        """At the call's end: (the pieces still to send, whether the text was a call). A call whose header
        was read is one even if cut short; "whole" text is a call only if it parses as one."""
        if self.named:
            return [], True
        if self.state == "whole":
            call = _whole_call(self.buffer, self.names)
            if call is not None:
                return [CallDelta(self.index, call.name, call.arguments)], True
        return [], False


def _whole_call(text: str, names: frozenset[str] | None) -> ToolCall | None:
    try:
        return _call_from(json_text.loads(text), names)
    except ValueError:
        return None


@dataclass
class ToolCallStream:
    """Reads an answer piece by piece; `push` and `finish` return what may be sent now, in order: content
    (str) and pieces of calls (CallDelta)."""

    fmt: str | None  # None: the model has no tool format, everything is content
    names: frozenset[str]
    forced: bool = False  # a grammar forced the answer to be a call (module docstring)
    buffer: str = ""
    reader: _CallReader | None = None  # the call being read
    raw: str = ""  # HERMES: the current call's text as written, in case it turns out not to be one
    held_space: str = ""  # whitespace after the last content: sent only if more content follows
    calls: int = 0
    prose: bool = False  # LLAMA3_JSON: the rest of the answer is content
    out: list[str | CallDelta] = field(default_factory=list)

    def push(self, text: str) -> list[str | CallDelta]:
        self.buffer += text
        if self.fmt == HERMES:
            self._hermes(final=False)
        elif self.fmt == LLAMA3_JSON:
            self._llama(final=False)
        else:
            self._content(self.buffer)
            self.buffer = ""
        return self._take()

    def finish(self) -> list[str | CallDelta]:
        if self.fmt == HERMES:
            self._hermes(final=True)
        elif self.fmt == LLAMA3_JSON:
            self._llama(final=True)
        else:
            self._content(self.buffer)
            self.buffer = ""
        if not self.calls and self.held_space:
            self.out.append(self.held_space)
        self.held_space = ""
        return self._take()

    def _take(self) -> list[str | CallDelta]:
        out, self.out = self.out, []
        return out

    def _content(self, text: str) -> None:
        if not text or self.forced:  # a forced answer is all call: the rest is the template's own text
            return
        visible = text.rstrip()
        if visible:
            self.out.append(self.held_space + visible)
            self.held_space = ""
        self.held_space += text[len(visible) :]

    def _emit(self, deltas: list[CallDelta]) -> None:
        if deltas and deltas[0].name is not None:
            self.held_space = ""  # whitespace before or between calls is not content
            self.calls += 1
        self.out.extend(deltas)

    def _end_call(self, raw: str) -> bool:
        """The current call's text is over: send what is left of it, or the text as content if it was none
        (returned: whether it was a call)."""
        deltas, was_call = self.reader.finish()
        self._emit(deltas)
        if not was_call:
            self._content(raw)
        self.reader, self.raw = None, ""
        return was_call

    def _hermes(self, final: bool) -> None:
        while True:
            if self.reader is None:
                start = self.buffer.find(OPEN)
                if start < 0:
                    keep = len(self.buffer) if final else _tag_start(self.buffer, OPEN)
                    self._content(self.buffer[:keep])
                    self.buffer = self.buffer[keep:]
                    return
                self._content(self.buffer[:start])
                self.buffer = self.buffer[start + len(OPEN) :]
                self.reader = _CallReader(None, self.calls)
                self.raw = OPEN
            end = self.buffer.find(CLOSE)
            if end < 0:  # the call goes on: read all but a possible start of the closing tag
                keep = len(self.buffer) if final else _tag_start(self.buffer, CLOSE)
                self.raw += self.buffer[:keep]
                self._emit(self.reader.feed(self.buffer[:keep]))
                self.buffer = self.buffer[keep:]
                if final:
                    self._end_call(self.raw)
                return
            self.raw += self.buffer[:end] + CLOSE
            self._emit(self.reader.feed(self.buffer[:end]))
            self.buffer = self.buffer[end + len(CLOSE) :]
            self._end_call(self.raw)

    def _llama(self, final: bool) -> None:
        """Calls are JSON objects naming a declared tool: the first after an optional python tag, the next
        ones after a ";". An answer that starts otherwise is content, and so is whatever follows the calls."""
        while True:
            if self.reader is None:
                if self.prose:
                    self._content(self.buffer)
                    self.buffer = ""
                    return
                stripped = self.buffer.lstrip()
                if not final and (not stripped or (not self.calls and PYTHON_TAG.startswith(stripped))):
                    return  # nothing to decide on yet
                lead = PYTHON_TAG if not self.calls else ";"
                body = stripped.removeprefix(lead).lstrip()
                if not final and not body:
                    return
                if not body.startswith("{"):
                    self.prose = True
                    continue
                self.raw, self.buffer = self.buffer[: len(self.buffer) - len(body)], body
                self.reader = _CallReader(self.names, self.calls)
            text, self.buffer = self.buffer, ""
            self.raw += text
            self._emit(self.reader.feed(text))
            if self.reader.state == "whole":  # read whole: it ends where its JSON object does
                end = _JsonValueEnd().feed(self.reader.buffer)
                if end is None and not final:
                    return
                if end is not None:
                    self.buffer, self.reader.buffer = self.reader.buffer[end:], self.reader.buffer[:end]
            elif self.reader.state == "done":
                self.buffer, self.reader.tail = self.reader.tail, ""
            elif not final:
                return
            self.raw = self.raw[: len(self.raw) - len(self.buffer)]
            if not self._end_call(self.raw):
                self.prose = True  # not a call: the rest is content
            if not self.buffer:
                return
