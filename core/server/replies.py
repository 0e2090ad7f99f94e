"""The OpenAI API's response bodies, built by hand (plain dicts, no torch): `chat_response` and `text_response`
for a whole answer, `chat_chunk` and `text_chunk` for a streamed piece (one chunk shape for both), `model_card` and
`model_list` for GET /v1/models. `RunTally` adds up the engine's events of one request (text, passes, finish,
token counts).

Every response carries a `specexec` object besides the OpenAI fields (clients keep unknown fields): method,
target_passes, tokens_per_pass and budget of the run.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from core.engine import protocol as P
from core.text.tool_calls import CallDelta, ToolCall


def finish_reason(engine_reason: str) -> str:
    """OpenAI's finish_reason for the engine's: an end-of-sequence token or a stop string is "stop"."""
    return "length" if engine_reason == "length" else "stop"


@dataclass
class RunTally:
    """The events of one request added up."""

    method: str
    prompt_param: str = "messages"  # the request field holding the prompt (a context-length error names it)
    pieces: list[str] = field(default_factory=list)
    reasoning_pieces: list[str] = field(default_factory=list)
    passes: int = 0
    pass_tokens: int = 0
    budget: int = 0
    choice: P.AutoChoice | None = None  # the tuner's latest choice, when the method or budget is "auto"
    finished: P.Finished | None = None
    logprobs: list[dict[str, Any]] | None = None  # the engine's per-token entries, when the request asked

    def add(self, event: P.Event) -> str:
        """Take one event; returns the text it adds (empty for other events)."""
        if isinstance(event, P.TokenChunk):
            self.pieces.append(event.text)
            self.reasoning_pieces.append(event.reasoning)
            if event.logprobs is not None:
                self.logprobs = (self.logprobs or []) + list(event.logprobs)
            return event.text
        if isinstance(event, P.PassStats):
            self.passes += 1
            self.pass_tokens += event.tokens
            self.budget = event.budget
        elif isinstance(event, P.AutoChoice):
            self.choice = event
        elif isinstance(event, P.Finished):
            self.finished = event
        return ""

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def reasoning(self) -> str:
        """A thinking model's thinking (TokenChunk.reasoning), apart from the answer's text."""
        return "".join(self.reasoning_pieces)

    @property
    def finish_reason(self) -> str:
        return finish_reason(self.finished.reason if self.finished else "length")

    def usage(self) -> dict[str, Any]:
        """OpenAI's usage, with the prompt tokens read from the engine's conversation cache as cached_tokens."""
        done = self.finished
        prompt = done.prompt_tokens if done else 0
        completion = done.generated_tokens if done else self.pass_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": done.reused_prefix_tokens if done else 0},
        }

    def extra(self) -> dict[str, Any]:
        """The `specexec` object: how the answer was decoded (with "auto", also what the engine chose and why)."""
        extra: dict[str, Any] = {
            "method": self.method,
            "target_passes": self.passes,
            "tokens_per_pass": round(self.pass_tokens / self.passes, 3) if self.passes else 0.0,
            "budget": self.budget,
        }
        if self.choice is not None:
            extra["chosen"] = {"method": self.choice.method, "budget": self.choice.budget, "reason": self.choice.reason}
        return extra


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def tool_call_json(call: ToolCall) -> dict[str, Any]:
    """One call as OpenAI sends it in a message."""
    return {"id": new_id("call"), "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def tool_call_delta(piece: CallDelta, call_id: str) -> dict[str, Any]:
    """A streamed piece of a call as OpenAI sends it: the first carries its id, type and name, the next ones
    more of its arguments."""
    if piece.name is None:
        return {"index": piece.index, "function": {"arguments": piece.arguments}}
    return {
        "index": piece.index,
        "id": call_id,
        "type": "function",
        "function": {"name": piece.name, "arguments": piece.arguments},
    }


def choice_finish_reason(reason: str, called: bool) -> str:
    """A choice's finish_reason: "tool_calls" when the answer called a tool, unless max_tokens cut it
    ("length", as OpenAI says, with the call's arguments as far as they were written)."""
    return "tool_calls" if called and reason != "length" else reason


def _token_logprob(entry: dict[str, Any]) -> dict[str, Any]:
    return {"token": entry["token"], "logprob": entry["logprob"], "bytes": list(entry["token"].encode())}


def chat_logprobs(entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """A chat choice's `logprobs` from the engine's entries ({"token", "logprob", "top": [...]})."""
    if entries is None:
        return None
    return {"content": [{**_token_logprob(e), "top_logprobs": [_token_logprob(t) for t in e["top"]]} for e in entries]}


def text_logprobs(entries: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """A text completion choice's (legacy) `logprobs`: parallel lists and offsets into the choice's text."""
    if entries is None:
        return None
    offsets, at = [], 0
    for entry in entries:
        offsets.append(at)
        at += len(entry["token"])
    return {
        "tokens": [e["token"] for e in entries],
        "token_logprobs": [e["logprob"] for e in entries],
        "top_logprobs": [{t["token"]: t["logprob"] for t in e["top"]} for e in entries],
        "text_offset": offsets,
    }


def chat_response(
    response_id: str, model: str, tally: RunTally, content: str, calls: list[ToolCall] = ()
) -> dict[str, Any]:
    """A chat completion: `content` (None when the answer is only tool calls) and the calls it made."""
    message: dict[str, Any] = {"role": "assistant", "content": content if content or not calls else None}
    if tally.reasoning:
        message["reasoning_content"] = tally.reasoning
    if calls:
        message["tool_calls"] = [tool_call_json(call) for call in calls]
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": chat_logprobs(tally.logprobs),
                "finish_reason": choice_finish_reason(tally.finish_reason, bool(calls)),
            }
        ],
        "usage": tally.usage(),
        "specexec": tally.extra(),
    }


def _chunk(
    kind: str,
    response_id: str,
    model: str,
    choice: dict[str, Any],
    finish: str | None,
    extra: dict[str, Any] | None,
    usage: dict[str, Any] | None,
    choices: bool,
) -> dict[str, Any]:
    """The one streamed chunk shape of both APIs: one choice (its delta or text, logprobs, finish_reason), or
    none for the closing usage chunk; `usage` and the `specexec` object when given."""
    chunk: dict[str, Any] = {
        "id": response_id,
        "object": kind,
        "created": now(),
        "model": model,
        "choices": [{"index": 0, **choice, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        chunk["usage"] = usage
    if extra is not None:
        chunk["specexec"] = extra
    return chunk


def chat_chunk(
    response_id: str,
    model: str,
    delta: dict[str, Any],
    finish: str | None = None,
    extra: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    logprobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat stream's chunk: `delta` is the message's new part (content, reasoning_content or tool_calls)."""
    return _chunk(
        "chat.completion.chunk",
        response_id,
        model,
        {"delta": delta, "logprobs": chat_logprobs(logprobs)},
        finish,
        extra,
        usage,
        choices,
    )


def text_response(response_id: str, model: str, tally: RunTally) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "text_completion",
        "created": now(),
        "model": model,
        "choices": [
            {
                "index": 0,
                "text": tally.text,
                "logprobs": text_logprobs(tally.logprobs),
                "finish_reason": tally.finish_reason,
            }
        ],
        "usage": tally.usage(),
        "specexec": tally.extra(),
    }


def text_chunk(
    response_id: str,
    model: str,
    text: str,
    finish: str | None = None,
    extra: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    logprobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A text completion stream's chunk: `text` is the answer's new part."""
    return _chunk(
        "text_completion",
        response_id,
        model,
        {"text": text, "logprobs": text_logprobs(logprobs)},
        finish,
        extra,
        usage,
        choices,
    )


def model_card(model_id: str, created: int, info: dict[str, Any]) -> dict[str, Any]:
    """The one model this server runs (with its draft, context window and tool support), as OpenAI's Model."""
    keys = ("draft", "device", "dtype", "max_context", "budget", "tool_call_format", "thinking")
    return {
        "id": model_id,
        "object": "model",
        "created": created,
        "owned_by": "specexec",
        "specexec": {k: info.get(k) for k in keys},
    }


def model_list(model_ids: tuple[str, ...], created: int, info: dict[str, Any]) -> dict[str, Any]:
    """GET /v1/models: the model under each name it is served as."""
    return {"object": "list", "data": [model_card(model_id, created, info) for model_id in model_ids]}


def input_tokens(count: int) -> dict[str, Any]:
    """A count of a request's input, in the shape of OpenAI's POST /v1/responses/input_tokens (llama.cpp
    answers its /v1/chat/completions/input_tokens the same way)."""
    return {"object": "response.input_tokens", "input_tokens": count}
