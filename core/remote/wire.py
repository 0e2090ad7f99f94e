"""What OpenAI-compatible servers send, read defensively (pure functions, no network).

A server is outside this program, so everything it sends is checked before it is used: the model list must
be a list of objects with a short printable `id` (at most MAX_MODELS of them), stream chunks must be JSON
objects whose text is a string, token counts must be non-negative integers. Servers differ in ways that are
not errors, and those are accepted: a top-level list instead of {"data": [...]}, the context window under
several names (vLLM's `max_model_len`, `context_length`, LM Studio's `max_context_length`, `context_window`,
`specexec serve`'s `specexec.max_context`) or none at all, text-completion chunks (`text`) as well as chat
chunks (`delta.content`), usage in the last chunk or nowhere, errors as OpenAI JSON, as FastAPI's
{"detail": ...}, as {"message": ...} or as plain text or HTML. A prompt's count comes from vLLM's
`POST /tokenize` ({"count": ..., "max_model_len": ...}), or from llama.cpp's
`POST /v1/chat/completions/input_tokens` ({"object": "response.input_tokens", "input_tokens": ...}, its window
from GET /props' `default_generation_settings.n_ctx`); `specexec serve` answers both. Other answers to those
addresses (llama.cpp's {"tokens": [...]} for a /tokenize without text, a page) are not counts.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

from core.errors import (
    RemoteAuthError,
    RemoteContextLengthError,
    RemoteError,
    RemoteNotOpenAIError,
    RemoteRejectedError,
)
from core.system import json_text

MAX_MODELS = 1000
MAX_MODEL_ID = 256
MAX_CONTEXT = 100_000_000
MAX_ERROR_TEXT = 300
CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window")
_CONTEXT_WORDS = re.compile(r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long", re.I)
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class RemoteModel:
    """One model a server offers; context_length None when the server does not say."""

    id: str
    context_length: int | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class StreamPiece:
    """What one stream chunk adds: text, the finish reason (on the last one), token counts (when reported), and
    a thinking model's reasoning (`delta.reasoning_content` as vLLM, llama.cpp and DeepSeek send it, or
    `delta.reasoning`)."""

    text: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    reasoning: str = ""


@dataclass(frozen=True)
class PromptCount:
    """A server's count of a prompt (POST /tokenize); context_length None when it does not say."""

    tokens: int
    context_length: int | None = None


def _count(value: object, limit: int = MAX_CONTEXT) -> int | None:
    """A whole, positive-or-zero number no larger than `limit`, else None."""
    if not json_text.is_whole(value) or not 0 <= value <= limit:
        return None
    return value


def _context_length(entry: dict[str, Any]) -> int | None:
    places = [entry] + [entry[k] for k in ("specexec", "meta") if isinstance(entry.get(k), dict)]
    for place in places:
        for key in CONTEXT_KEYS + ("max_context", "n_ctx"):
            found = _count(place.get(key))
            if found:
                return found
    return None


def parse_model_list(data: object, server: str) -> list[RemoteModel]:
    """The models of a GET /models answer (decoded JSON), in the server's order, without duplicates.

    Raises:
        RemoteNotOpenAIError: it is not a model list, or lists more than MAX_MODELS entries.
    """
    entries = data.get("data") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise RemoteNotOpenAIError(
            f"{server} answered /models with something that is not a model list",
            "check that the address is the server's OpenAI-compatible API (it usually ends in /v1)",
            _excerpt(json.dumps(data)[:MAX_ERROR_TEXT]),
        )
    if len(entries) > MAX_MODELS:
        raise RemoteNotOpenAIError(f"{server} lists {len(entries)} models; at most {MAX_MODELS} are read")
    models: dict[str, RemoteModel] = {}
    for entry in entries:
        model_id = entry.get("id") if isinstance(entry, dict) else None
        if (
            not isinstance(model_id, str)
            or not model_id.strip()
            or len(model_id) > MAX_MODEL_ID
            or _UNPRINTABLE.search(model_id)
        ):
            continue  # an entry we cannot name is left out, not trusted
        models.setdefault(model_id, RemoteModel(model_id, _context_length(entry)))
    return list(models.values())


def parse_prompt_count(data: object) -> PromptCount | None:
    """vLLM's answer to POST /tokenize (decoded JSON), or None where it is not one: a server that answers that
    address its own way (llama.cpp counts text, not messages, under `tokens`) does not count our prompts."""
    if not isinstance(data, dict):
        return None
    tokens = _count(data.get("count"))
    if tokens is None:
        return None
    return PromptCount(tokens, _count(data.get("max_model_len")) or None)


def parse_input_tokens(data: object) -> PromptCount | None:
    """An answer to POST /v1/chat/completions/input_tokens in OpenAI's input-token count shape (llama.cpp's,
    `specexec serve`'s), or None where it is not one. It says no window (see parse_served_context)."""
    if not isinstance(data, dict) or data.get("object", "response.input_tokens") != "response.input_tokens":
        return None
    tokens = _count(data.get("input_tokens"))
    return None if tokens is None else PromptCount(tokens)


def parse_served_context(data: object) -> int | None:
    """The context window each request gets on a llama.cpp server (GET /props:
    `default_generation_settings.n_ctx`, a slot's share of the whole), or None where the answer has none."""
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    return (_count(settings.get("n_ctx")) or None) if isinstance(settings, dict) else None


def parse_chunk(chunk: object) -> StreamPiece:
    """One streamed JSON chunk (chat or text completion); unknown fields are ignored.

    Raises:
        RemoteNotOpenAIError: the chunk is not an object, or its text is not a string.
        RemoteError: the chunk is an error object (servers that fail mid-stream send one).
    """
    if not isinstance(chunk, dict):
        raise RemoteNotOpenAIError(
            "the server's stream holds something that is not a completion chunk", details=_excerpt(json.dumps(chunk))
        )
    if "error" in chunk:
        raise error_from_body(chunk, 0, "the server")
    text, finish, reasoning = "", None, ""
    choices = chunk.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if content is not None and not isinstance(content, str):
            raise RemoteNotOpenAIError(
                "the server's stream sent text that is not a string", details=_excerpt(json.dumps(chunk))
            )
        text = content or ""
        if isinstance(delta, dict):
            thought = delta.get("reasoning_content", delta.get("reasoning"))
            reasoning = thought if isinstance(thought, str) else ""
        reason = choice.get("finish_reason")
        finish = reason if isinstance(reason, str) and reason else None
    usage = chunk.get("usage")
    counts = None
    if isinstance(usage, dict):
        prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        if prompt is not None and completion is not None:
            counts = Usage(prompt, completion)
    return StreamPiece(text, finish, counts, reasoning)


def _excerpt(text: str) -> str:
    """At most MAX_ERROR_TEXT printable characters of a server's text (HTML tags and entities removed)."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 1] + "…"


def error_message(body: object) -> tuple[str, str | None]:
    """The message and the parameter named in an error body (decoded JSON or raw text)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, str):
            return _excerpt(error), None
        if isinstance(error, dict):
            message = error.get("message", error.get("detail", error.get("msg")))
            if isinstance(message, list):  # FastAPI's validation errors: [{"loc": [...], "msg": ...}]
                message = "; ".join(
                    str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in message
                )
            param = error.get("param")
            return _excerpt(str(message) if message is not None else json.dumps(body)), param if isinstance(
                param, str
            ) else None
    if isinstance(body, str):
        return _excerpt(body), None
    return _excerpt(json.dumps(body)), None


def decode_body(raw: bytes) -> object:
    """The JSON in an error or model-list body, or its text when it is not JSON."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return json_text.loads(text)
    except ValueError:
        return text


def error_from_body(body: object, status: int, server: str, has_key: bool = False, route: str = "") -> RemoteError:
    """The plain-word error for an HTTP error answer, or (status 0) an error object inside a stream."""
    message, _param = error_message(body)
    said = f" (it said: {message})" if message else ""
    if status in (401, 403):
        if has_key:
            return RemoteAuthError(
                f"{server} refused the API key{said}",
                "check the key (model manager > Connections), or ask for a new one",
                f"HTTP {status}: {message}",
            )
        return RemoteAuthError(
            f"{server} needs an API key{said}",
            "enter the server's key in the model manager",
            f"HTTP {status}: {message}",
        )
    if status == 404 and (route == "models" or "model" not in message.lower()):
        return RemoteNotOpenAIError(
            f"{server} has no OpenAI API at this address (HTTP 404 for /{route or 'chat/completions'})",
            "check the address: OpenAI-compatible servers usually answer under /v1 (e.g. http://host:8000/v1)",
            f"HTTP 404: {message}",
        )
    if _CONTEXT_WORDS.search(message):
        return RemoteContextLengthError(
            f"the conversation is too long for the model on {server}{said}",
            "shorten it, or start a new conversation",
            f"HTTP {status}: {message}",
        )
    if status == 0:
        return RemoteError(f"{server} stopped the answer with an error{said}", "try again", f"in the stream: {message}")
    if 400 <= status < 500 and status != 429:
        return RemoteRejectedError(
            f"{server} refused the request (HTTP {status}){said}",
            "check the model and the conversation's settings",
            f"HTTP {status}: {message}",
        )
    if status == 429:
        return RemoteError(
            f"{server} is busy or limits how often it may be asked{said}",
            "wait a little, then try again",
            f"HTTP 429: {message}",
        )
    return RemoteError(
        f"{server} failed to answer (HTTP {status}){said}",
        "try again; if it keeps failing, look at the server's own log",
        f"HTTP {status}: {message}",
    )


def refused_field(body: object, fields: list[str]) -> str | None:
    """Which of the optional request `fields` an error answer (400/422) names, if any: servers that do not
    know a field say so by its name (in `param`, or in the message)."""
    message, param = error_message(body)
    if param in fields:
        return param
    for name in fields:
        if re.search(rf"(?<![a-z_]){re.escape(name)}(?![a-z_])", message):
            return name
    return None
