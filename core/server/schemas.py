"""The OpenAI API's request and response shapes, checked and built by hand (plain dicts, no torch).

Requests: `parse_chat_request` / `parse_completion_request` turn a decoded JSON body into a
`CompletionRequest` or raise `ApiError` (400, with the offending `param`), so bad input never reaches the
engine. Responses: `chat_response`, `chat_chunk`, `text_response`, `text_chunk` build the bodies the official
clients parse; `RunTally` adds up the engine's events of one request (text, passes, finish, token counts).

Every response carries a `specexec` object besides the OpenAI fields (clients keep unknown fields):
method, target_passes, tokens_per_pass and budget of the run.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from core.engine import protocol as P

METHODS: tuple[str, ...] = get_args(P.Method)  # the engine's own list, "auto" included
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
MAX_STOP_STRINGS = 16

# Fields some clients always send: harmless at these values, refused (not silently ignored) at others.
_NEUTRAL = {
    "n": (None, 1),
    "best_of": (None, 1),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "suffix": (None, ""),
    "tools": (None, []),
    "functions": (None, []),
    "tool_choice": (None, "none", "auto"),
    "logit_bias": (None, {}),
}


class ApiError(Exception):
    """An error answered in the OpenAI format: {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# How engine error kinds reach API clients: (HTTP status, error type, code).
_ENGINE_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "context_length": (400, "invalid_request_error", "context_length_exceeded"),
    "invalid_setting": (400, "invalid_request_error", "invalid_value"),
    "protocol": (400, "invalid_request_error", "invalid_value"),
    "not_loaded": (503, "server_error", "model_not_loaded"),
    "engine_died": (503, "server_error", "engine_unavailable"),
    "engine_start": (503, "server_error", "engine_unavailable"),
    "out_of_memory": (507, "server_error", "out_of_memory"),
    "busy": (409, "invalid_request_error", "request_id_in_use"),
    "server_stopping": (503, "server_error", "server_stopping"),
}


def engine_error(event: P.Error) -> ApiError:
    """The API error for an engine Error event ending a request."""
    status, kind, code = _ENGINE_ERRORS.get(event.kind, (500, "server_error", event.kind))
    message = event.message + (f" ({event.hint})" if event.hint else "")
    return ApiError(status, message, kind, "messages" if event.kind == "context_length" else None, code)


@dataclass(frozen=True)
class Defaults:
    """What a request that leaves a setting out gets (the `specexec serve` flags, or the app's settings).
    seed None: a new random seed for each request that sends none, as the OpenAI API does."""

    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int | None = None
    method: str = "specexec"
    max_tokens: int = 256
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    """One checked request. kind: chat (messages, chat template) or text (a plain prompt to continue)."""

    kind: Literal["chat", "text"]
    model: str
    messages: tuple[dict[str, str], ...] = ()
    prompt: str | None = None
    stream: bool = False
    include_usage: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int = 0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    method: str = "specexec"

    def to_generate(self, request_id: str) -> P.Generate:
        """The engine request: fresh KV caches (requests are independent) and no silent trimming."""
        return P.Generate(
            request_id=request_id, messages=self.messages, prompt=self.prompt, temperature=self.temperature,
            top_p=self.top_p, top_k=self.top_k, repetition_penalty=self.repetition_penalty, seed=self.seed,
            method=self.method, max_new_tokens=self.max_tokens, stop=self.stop, reuse_cache=False,
            trim_context=False,
        )


# ----------------------------------------------------------------------------------------------------------
# Parsing


def _number(body: dict, name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(400, f"'{name}' must be a number, got {value!r}", param=name, code="invalid_type")
    if value > high or value < low or (low_open and value == low):
        bounds = f"{'above' if low_open else 'at least'} {low:g} and at most {high:g}"
        raise ApiError(400, f"'{name}' must be {bounds}, got {value!r}", param=name, code="invalid_value")
    return float(value)


def _integer(body: dict, name: str, default: int | None, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be a whole number, got {value!r}", param=name, code="invalid_type")
    if value < low or (high is not None and value > high):
        raise ApiError(400, f"'{name}' must be at least {low}" + (f" and at most {high}" if high is not None else "")
                       + f", got {value}", param=name, code="invalid_value")
    return value


def _stop(body: dict, default: tuple[str, ...]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return default
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise ApiError(400, "'stop' must be a string or a list of strings", param="stop", code="invalid_type")
    if any(s == "" for s in items):
        raise ApiError(400, "'stop' strings must not be empty", param="stop", code="invalid_value")
    if len(items) > MAX_STOP_STRINGS:
        raise ApiError(400, f"'stop' takes at most {MAX_STOP_STRINGS} strings", param="stop", code="invalid_value")
    return tuple(items)


def _refuse_unsupported(body: dict) -> None:
    for name, neutral in _NEUTRAL.items():
        if name in body and body[name] not in neutral:
            raise ApiError(400, f"'{name}' is not supported by this server (leave it out)", param=name,
                           code="unsupported_parameter")


def _common(body: object, defaults: Defaults) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    _refuse_unsupported(body)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", param="model", code="invalid_type")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise ApiError(400, "'stream' must be true or false", param="stream", code="invalid_type")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options", code="invalid_type")
    method = body.get("method", defaults.method)
    if method not in METHODS:
        raise ApiError(400, f"'method' must be one of {', '.join(METHODS)}, got {method!r}", param="method",
                       code="invalid_value")
    max_tokens = _integer(body, "max_completion_tokens", None, 1)
    max_tokens = _integer(body, "max_tokens", max_tokens if max_tokens is not None else defaults.max_tokens, 1)
    seed = _integer(body, "seed", defaults.seed, -(2**63), 2**63 - 1)
    return dict(
        model=model,
        stream=bool(stream),
        include_usage=bool(options.get("include_usage", False)),
        temperature=_number(body, "temperature", defaults.temperature, 0.0, 2.0),
        top_p=_number(body, "top_p", defaults.top_p, 0.0, 1.0, low_open=True),
        top_k=_integer(body, "top_k", defaults.top_k, 0),
        repetition_penalty=_number(body, "repetition_penalty", defaults.repetition_penalty, 0.0, 10.0, low_open=True),
        seed=seed if seed is not None else random.randrange(2**31),
        max_tokens=max_tokens,
        stop=_stop(body, defaults.stop),
        method=method,
    )


def _content(message: dict, index: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: only text parts can be read by a text model
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"messages[{index}].content: only text parts are supported",
                               param=f"messages[{index}].content", code="unsupported_content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(400, f"messages[{index}].content must be a string or a list of text parts",
                   param=f"messages[{index}].content", code="invalid_type")


def parse_chat_request(body: object, defaults: Defaults) -> CompletionRequest:
    """A /v1/chat/completions body; ApiError(400) naming the bad field otherwise."""
    common = _common(body, defaults)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list of {role, content} objects", param="messages",
                       code="invalid_value")
    checked = []
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in CHAT_ROLES:
            raise ApiError(400, f"messages[{index}].role must be one of {', '.join(CHAT_ROLES)}, got {role!r}",
                           param=f"messages[{index}].role", code="invalid_value")
        checked.append({"role": CHAT_ROLES[role], "content": _content(message, index)})
    return CompletionRequest(kind="chat", messages=tuple(checked), **common)


def parse_completion_request(body: object, defaults: Defaults) -> CompletionRequest:
    """A /v1/completions body (one text prompt); ApiError(400) naming the bad field otherwise."""
    common = _common(body, defaults)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be one string (lists of prompts and token ids are not supported)",
                       param="prompt", code="invalid_value")
    if not prompt:
        raise ApiError(400, "'prompt' is empty", param="prompt", code="invalid_value")
    return CompletionRequest(kind="text", prompt=prompt, **common)


# ----------------------------------------------------------------------------------------------------------
# Responses


def finish_reason(engine_reason: str) -> str:
    """OpenAI's finish_reason for the engine's: an end-of-sequence token or a stop string is "stop"."""
    return "length" if engine_reason == "length" else "stop"


@dataclass
class RunTally:
    """The events of one request added up."""

    method: str
    pieces: list[str] = field(default_factory=list)
    passes: int = 0
    pass_tokens: int = 0
    budget: int = 0
    choice: P.AutoChoice | None = None  # the tuner's latest choice, when the method or budget is "auto"
    finished: P.Finished | None = None

    def add(self, event: P.Event) -> str:
        """Take one event; returns the text it adds (empty for other events)."""
        if isinstance(event, P.TokenChunk):
            self.pieces.append(event.text)
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

    def usage(self) -> dict[str, int]:
        done = self.finished
        prompt = done.prompt_tokens if done else 0
        completion = done.generated_tokens if done else self.pass_tokens
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def extra(self) -> dict[str, Any]:
        """The `specexec` object: how the answer was decoded (with "auto", also what the engine chose and why)."""
        extra: dict[str, Any] = {
            "method": self.method,
            "target_passes": self.passes,
            "tokens_per_pass": round(self.pass_tokens / self.passes, 3) if self.passes else 0.0,
            "budget": self.budget,
        }
        if self.choice is not None:
            extra["chosen"] = {"method": self.choice.method, "budget": self.choice.budget,
                               "reason": self.choice.reason}
        return extra


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def chat_response(response_id: str, model: str, tally: RunTally) -> dict[str, Any]:
    reason = tally.finished.reason if tally.finished else "length"
    return {
        "id": response_id, "object": "chat.completion", "created": now(), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": tally.text},
                     "logprobs": None, "finish_reason": finish_reason(reason)}],
        "usage": tally.usage(), "specexec": tally.extra(),
    }


def chat_chunk(response_id: str, model: str, delta: dict[str, Any], finish: str | None = None,
               extra: dict[str, Any] | None = None, usage: dict[str, int] | None = None,
               choices: bool = True) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": response_id, "object": "chat.completion.chunk", "created": now(), "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        chunk["usage"] = usage
    if extra is not None:
        chunk["specexec"] = extra
    return chunk


def text_response(response_id: str, model: str, tally: RunTally) -> dict[str, Any]:
    reason = tally.finished.reason if tally.finished else "length"
    return {
        "id": response_id, "object": "text_completion", "created": now(), "model": model,
        "choices": [{"index": 0, "text": tally.text, "logprobs": None, "finish_reason": finish_reason(reason)}],
        "usage": tally.usage(), "specexec": tally.extra(),
    }


def text_chunk(response_id: str, model: str, text: str, finish: str | None = None,
               extra: dict[str, Any] | None = None, usage: dict[str, int] | None = None,
               choices: bool = True) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": response_id, "object": "text_completion", "created": now(), "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        chunk["usage"] = usage
    if extra is not None:
        chunk["specexec"] = extra
    return chunk


def model_list(model_id: str, created: int, info: dict[str, Any]) -> dict[str, Any]:
    """GET /v1/models: the one model this server runs (with its draft and context window)."""
    return {"object": "list", "data": [{
        "id": model_id, "object": "model", "created": created, "owned_by": "specexec",
        "specexec": {k: info.get(k) for k in ("draft", "device", "dtype", "max_context", "budget")},
    }]}
