"""Reading tool calls out of a model's answer, in the format its chat template asked for (pure functions).

Two formats (core.engine.protocol names them; core.prompts finds a model's):
- HERMES (Qwen2.5, Hermes): each call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; text
  outside the tags is the answer's content. The tags make a call unambiguous.
- LLAMA3_JSON (Llama 3.1 / 3.2): the whole answer is one JSON object `{"name": ..., "parameters": {...}}`
  (or several separated by ";"), after `<|python_tag|>` at times. A bare JSON answer is ambiguous (the user
  may have asked for JSON), so it is a call only when every object names one of the request's tools.

`parse_answer` reads a finished answer; `ToolCallStream` reads one as it streams and says what may be sent
at once: content as it comes (minus a possible start of a tag, and whitespace that only separates calls),
each call when it is complete. A block that is not valid JSON stays content: nothing is lost or invented.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from core.engine.protocol import HERMES, LLAMA3_JSON

OPEN, CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"


@dataclass(frozen=True)
class ToolCall:
    """One call: the function's name and its arguments as JSON text (what OpenAI's API sends)."""

    name: str
    arguments: str


def _call_from(obj: object, names: frozenset[str] | None) -> ToolCall | None:
    """A ToolCall from a decoded {"name", "arguments" | "parameters"} object; None when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    if names is not None and obj["name"] not in names:
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
        except ValueError:
            return None
        return ToolCall(obj["name"], arguments)
    if not isinstance(arguments, dict):
        return None
    return ToolCall(obj["name"], json.dumps(arguments, ensure_ascii=False))


def _hermes_block(body: str) -> ToolCall | None:
    try:
        return _call_from(json.loads(body), None)
    except ValueError:
        return None


def _llama_calls(text: str, names: frozenset[str]) -> list[ToolCall] | None:
    """The calls when `text` is nothing but ;-separated call objects naming declared tools; else None."""
    rest = text.strip().removeprefix(PYTHON_TAG).strip()
    if not rest.startswith("{"):
        return None
    decoder = json.JSONDecoder()
    calls = []
    while rest:
        try:
            obj, end = decoder.raw_decode(rest)
        except ValueError:
            return None
        call = _call_from(obj, names)
        if call is None:
            return None
        calls.append(call)
        rest = rest[end:].strip().removeprefix(";").strip()
    return calls


def parse_answer(text: str, fmt: str | None, names: frozenset[str]) -> tuple[str, list[ToolCall]]:
    """(content, calls) of a finished answer. `names`: the tools the request declared."""
    stream = ToolCallStream(fmt, names)
    pieces = stream.push(text) + stream.finish()
    content = "".join(p for p in pieces if isinstance(p, str))
    return content, [p for p in pieces if isinstance(p, ToolCall)]


def _tag_start(text: str, tag: str) -> int:
    """Where a possible (partial) `tag` begins at the end of `text`: text[i:] is a prefix of tag."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return len(text) - size
    return len(text)


@dataclass
class ToolCallStream:
    """Reads an answer piece by piece; `push` and `finish` return what may be sent now, in order: content
    (str) and complete calls (ToolCall)."""

    fmt: str | None  # None: the model has no tool format, everything is content
    names: frozenset[str]
    buffer: str = ""
    in_call: bool = False
    held_space: str = ""  # whitespace after the last content: sent only if more content follows
    calls: int = 0
    decided: bool = False  # LLAMA3_JSON: whether the answer's first visible text has been seen
    bare_json: bool = False  # LLAMA3_JSON: the answer began with "{": held whole until the end
    out: list[str | ToolCall] = field(default_factory=list)

    def push(self, text: str) -> list[str | ToolCall]:
        self.buffer += text
        if self.fmt == HERMES:
            self._hermes(final=False)
        elif self.fmt == LLAMA3_JSON:
            self._llama(final=False)
        else:
            self._content(self.buffer)
            self.buffer = ""
        return self._take()

    def finish(self) -> list[str | ToolCall]:
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

    def _take(self) -> list[str | ToolCall]:
        out, self.out = self.out, []
        return out

    def _content(self, text: str) -> None:
        if not text:
            return
        visible = text.rstrip()
        if visible:
            self.out.append(self.held_space + visible)
            self.held_space = ""
        self.held_space += text[len(visible):]

    def _call(self, call: ToolCall) -> None:
        self.held_space = ""  # whitespace before or between calls is not content
        self.calls += 1
        self.out.append(call)

    def _hermes(self, final: bool) -> None:
        while True:
            if not self.in_call:
                start = self.buffer.find(OPEN)
                if start < 0:
                    keep = len(self.buffer) if final else _tag_start(self.buffer, OPEN)
                    self._content(self.buffer[:keep])
                    self.buffer = self.buffer[keep:]
                    return
                self._content(self.buffer[:start])
                self.buffer = self.buffer[start + len(OPEN):]
                self.in_call = True
            end = self.buffer.find(CLOSE)
            if end < 0 and not final:
                return
            body = self.buffer if end < 0 else self.buffer[:end]  # an unclosed call at the end: try it whole
            call = _hermes_block(body.strip())
            if call is not None:
                self._call(call)
            else:
                self._content(OPEN + body + ("" if end < 0 else CLOSE))
            self.buffer = "" if end < 0 else self.buffer[end + len(CLOSE):]
            self.in_call = False
            if end < 0:
                return

    def _llama(self, final: bool) -> None:
        if not self.decided:
            visible = self.buffer.lstrip().removeprefix(PYTHON_TAG).lstrip()
            if not visible and not final:
                return
            if not visible and final:
                self.decided = True
            elif PYTHON_TAG.startswith(self.buffer.lstrip()) and not final:
                return  # the tag itself may still be arriving
            else:
                self.decided, self.bare_json = True, visible.startswith("{")
        if self.bare_json and not final:
            return
        if self.bare_json:
            calls = _llama_calls(self.buffer, self.names)
            if calls is not None:
                for call in calls:
                    self._call(call)
                self.buffer = ""
                return
        self._content(self.buffer)
        self.buffer = ""


# JSON inside a forced call is written compactly, as the chat templates show it, never padded with newlines
_COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def forced_call_grammar(fmt: str, tools: tuple[dict, ...], name: str | None = None) -> str:
    """An llguidance Lark grammar for exactly one call, in the model's own format `fmt`, to the function
    `name` (None: any of `tools`), its arguments matching the function's JSON schema: what `tool_choice`
    "required" or a named function asks for (core.constraints decodes under it)."""
    key = "arguments" if fmt == HERMES else "parameters"
    options = [
        {"type": "object", "properties": {"name": {"const": f["name"]}, key: f.get("parameters") or {"type": "object"}},
         "required": ["name", key], "additionalProperties": False}
        for f in (tool["function"] for tool in tools) if name is None or f["name"] == name
    ]
    schema = dict(options[0]) if len(options) == 1 else {"anyOf": options}
    schema["x-guidance"] = _COMPACT_JSON
    call = "call: %json " + json.dumps(schema)
    if fmt == HERMES:
        return f'start: "{OPEN}\\n" call "\\n{CLOSE}"\n{call}'
    return f"start: call\n{call}"

