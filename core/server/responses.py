"""OpenAI's Responses API (`POST /v1/responses`, what openai-agents calls by default): requests read into the
same checked CompletionRequest a chat completion becomes, and answers written as Responses output items and
streaming events (plain dicts; the official client's types read them).

Stateless: the server keeps no responses, so `previous_response_id` (and `conversation`, item references,
background runs) are refused in words; clients send the whole conversation in `input`, as openai-agents does
by default, and the engine's conversation cache still reuses the prefix a follow-up shares with the turn
before. `store` is accepted and nothing is stored.

Read from a request: `input` (a string, or items: messages with text parts, `function_call`,
`function_call_output`, `reasoning`), `instructions`, function `tools`, `tool_choice`,
`parallel_tool_calls`, `text.format` (text, json_object, json_schema), `max_output_tokens`, `temperature`,
`top_p`, `truncation` ("auto" drops the oldest turns that do not fit), `reasoning.effort` "none" (asks a
model whose template can to skip thinking), `stream`, and this server's own sampling fields (`top_k`,
`seed`, `method`, ...). Written: `reasoning` items (a thinking model's thinking), a `message` with
`output_text`, `function_call` items (arguments streamed as they are generated), usage, and status
"incomplete" with reason max_output_tokens when the answer was cut.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from core.server import api_errors as E
from core.server import replies as R
from core.server import requests as S
from core.text.tool_calls import CallDelta

# Fields that ask for state this server does not keep, and what to send instead.
_STATEFUL = {
    "previous_response_id": "this server keeps no responses (it is stateless): send the whole conversation in "
    "'input' (the earlier turns' items); the engine still reuses what it has cached of it",
    "conversation": "this server keeps no conversations: send the whole conversation in 'input'",
    "background": "background responses need stored responses, which this server does not keep",
    "prompt": "stored prompt templates are not kept by this server: send 'instructions' and 'input'",
}
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
_PARAM_NAMES = {
    "max_tokens": "max_output_tokens",
    "response_format": "text.format",
    "response_format.json_schema": "text.format",
}


@dataclass(frozen=True)
class ResponsesRequest:
    """A checked Responses request: the chat request it runs as, and what the response echoes back."""

    completion: S.CompletionRequest
    echo: dict[str, Any] = field(default_factory=dict)


def _text_of(content: object, where: str) -> str:
    """The text of an item's content: a string, or a list of text parts (a file is one by now, read by
    core.server.file_parts; a picture is refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for index, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "refusal" and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
            elif kind in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise E.ApiError(
                    400,
                    f"{where}.content[{index}]: only text and files can be read by a text model (got {kind!r})",
                    param=f"{where}.content",
                    code="unsupported_content",
                )
        return "".join(texts)
    raise E.ApiError(
        400, f"{where}.content must be a string or a list of text parts", param=f"{where}.content", code="invalid_type"
    )


def _messages(body: dict) -> list[dict[str, Any]]:
    """The conversation in chat-completion form: instructions first, then `input`'s items in order (function
    calls join the assistant message before them; a reasoning item goes with the assistant turn after it)."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise E.ApiError(400, "'instructions' must be a string", param="instructions", code="invalid_type")
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        return messages + [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise E.ApiError(
            400, "'input' must be a string or a non-empty list of items", param="input", code="invalid_value"
        )
    thought: str | None = None  # a reasoning item's text, for the next assistant turn
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise E.ApiError(400, f"{where} must be an object", param=where, code="invalid_type")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            message = {"role": role, "content": _text_of(item.get("content"), where)}
            if role == "assistant" and thought is not None:
                message["reasoning_content"], thought = thought, None
            messages.append(message)
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if not isinstance(call["id"], str) or not isinstance(item.get("arguments"), str):
                raise E.ApiError(
                    400,
                    f"{where}: a function_call needs 'call_id', 'name' and 'arguments' (a JSON string)",
                    param=where,
                    code="invalid_value",
                )
            if messages and messages[-1]["role"] == "assistant":  # the same turn: its text, then its calls
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
                if thought is not None:
                    message["reasoning_content"], thought = thought, None
                messages.append(message)
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output if isinstance(output, str) else _text_of(output, where),
                }
            )
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            thought = (thought or "") + _text_of(parts, where)
        else:
            why = (
                "items are not stored here: send the item itself"
                if kind == "item_reference"
                else "this server reads messages, function calls, their outputs and reasoning"
            )
            raise E.ApiError(
                400, f"{where}: items of type {kind!r} are not supported ({why})", param=where, code="unsupported_value"
            )
    return messages


def _tools(body: dict) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise E.ApiError(400, "'tools' must be a list", param="tools", code="invalid_type")
    converted = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise E.ApiError(
                400,
                f"tools[{index}]: only function tools are served (got {kind!r}: hosted tools such "
                "as web or file search run on OpenAI's servers, not on a local model)",
                param=f"tools[{index}].type",
                code="unsupported_value",
            )
        converted.append(
            {"type": "function", "function": {k: tool[k] for k in ("name", "description", "parameters") if k in tool}}
        )
    return converted


def _tool_choice(body: dict) -> object:
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function" and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


def _response_format(body: dict) -> object:
    text = body.get("text")
    if text is None:
        return None
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None if isinstance(text, dict) else {"type": "invalid"}
    if fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}
    return {"type": fmt.get("type")}


def parse_responses_request(body: object, defaults: S.Defaults) -> ResponsesRequest:
    """A /v1/responses body; ApiError(400) naming the bad field otherwise."""
    if not isinstance(body, dict):
        raise E.ApiError(400, "the request body must be a JSON object", code="invalid_json")
    for name, why in _STATEFUL.items():
        if body.get(name) not in (None, False):
            raise E.ApiError(400, f"'{name}' is not supported: {why}", param=name, code="unsupported_parameter")
    chat_body: dict[str, Any] = {
        k: body[k]
        for k in (
            "model",
            "stream",
            "temperature",
            "top_p",
            "top_k",
            "repetition_penalty",
            "presence_penalty",
            "frequency_penalty",
            "seed",
            "method",
            "stop",
            "parallel_tool_calls",
        )
        if k in body
    }
    chat_body["messages"] = _messages(body)
    if body.get("max_output_tokens") is not None:
        chat_body["max_tokens"] = body["max_output_tokens"]
    for key, value in (
        ("tools", _tools(body)),
        ("tool_choice", _tool_choice(body)),
        ("response_format", _response_format(body)),
    ):
        if value is not None:
            chat_body[key] = value
    reasoning = body.get("reasoning")
    if not isinstance(reasoning, (dict, type(None))):
        raise E.ApiError(
            400, '\'reasoning\' must be an object such as {"effort": "low"}', param="reasoning", code="invalid_type"
        )
    if not isinstance((reasoning or {}).get("effort"), (str, type(None))):
        raise E.ApiError(
            400, "'reasoning.effort' must be a string such as \"low\"", param="reasoning.effort", code="invalid_type"
        )
    template_kwargs = body.get("chat_template_kwargs")  # checked with the chat request
    if (
        isinstance(reasoning, dict)
        and reasoning.get("effort") == "none"
        and isinstance(template_kwargs, (dict, type(None)))
    ):
        template_kwargs = {"enable_thinking": False, **(template_kwargs or {})}
    if template_kwargs is not None:
        chat_body["chat_template_kwargs"] = template_kwargs
    truncation = body.get("truncation", "disabled")
    if truncation not in (None, "disabled", "auto"):
        raise E.ApiError(400, "'truncation' must be 'auto' or 'disabled'", param="truncation", code="invalid_value")
    try:
        completion = S.parse_chat_request(chat_body, defaults)
    except E.ApiError as error:
        param = error.param or ""
        renamed = _PARAM_NAMES.get(param, "input" if param.startswith("messages") else param) or None
        raise E.ApiError(
            error.status, error.message.replace("'max_tokens'", "'max_output_tokens'"), error.type, renamed, error.code
        ) from error
    completion = dataclasses.replace(completion, trim_context=truncation == "auto")
    echo = {
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": completion.parallel_tool_calls,
        "temperature": completion.temperature,
        "top_p": completion.top_p,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "text": body.get("text") or {"format": {"type": "text"}},
        "truncation": truncation or "disabled",
        "reasoning": {"effort": (reasoning or {}).get("effort"), "summary": None},
        "store": False,
        "previous_response_id": None,
        "user": body.get("user"),
    }
    return ResponsesRequest(completion, echo)


# ----------------------------------------------------------------------------------------------------------
# Answers


class ResponseBuilder:
    """Turns an answer's pieces (reasoning, text, CallDelta) into output items and the streaming events
    that build them, in order: an item opens (output_item.added, content_part.added), grows (deltas), and is
    done when the next one opens or the answer ends. `response()` is the Response object at any time."""

    def __init__(self, response_id: str, model: str, echo: dict[str, Any], created: int) -> None:
        self.response_id = response_id
        self.model = model
        self.echo = echo
        self.created = created
        self.items: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.sequence = 0
        self.status = "in_progress"
        self.usage: dict[str, Any] | None = None
        self.incomplete: dict[str, Any] | None = None
        self.call_items: dict[int, dict[str, Any]] = {}

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def response(self) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created,
            "status": self.status,
            "model": self.model,
            "output": [json.loads(json.dumps(item)) for item in self.items],
            "usage": self.usage,
            "incomplete_details": self.incomplete,
            "error": None,
            **self.echo,
        }

    def start(self) -> list[dict[str, Any]]:
        return [
            self._event("response.created", response=self.response()),
            self._event("response.in_progress", response=self.response()),
        ]

    def _index(self) -> int:
        return len(self.items) - 1

    def _close(self) -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if item is None:
            return []
        item["status"] = "completed"
        out = []
        if item["type"] == "reasoning":
            text = item["content"][0]["text"]
            out.append(
                self._event(
                    "response.reasoning_text.done",
                    item_id=item["id"],
                    output_index=self._index(),
                    content_index=0,
                    text=text,
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=self._index(),
                    content_index=0,
                    part={"type": "reasoning_text", "text": text},
                )
            )
            del item["status"]
        elif item["type"] == "message":
            part = item["content"][0]
            out.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=self._index(),
                    content_index=0,
                    text=part["text"],
                    logprobs=[],
                )
            )
            out.append(
                self._event(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=self._index(),
                    content_index=0,
                    part=part,
                )
            )
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=self._index(),
                    arguments=item["arguments"],
                    name=item["name"],
                )
            )
        out.append(self._event("response.output_item.done", output_index=self._index(), item=item))
        return out

    def _begin(self, item: dict[str, Any], part: dict[str, Any] | None) -> list[dict[str, Any]]:
        out = self._close()
        self.items.append(item)
        self.open = item
        out.append(
            self._event("response.output_item.added", output_index=self._index(), item=json.loads(json.dumps(item)))
        )
        if part is not None:
            item["content"].append(part)
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=self._index(),
                    content_index=0,
                    part=dict(part),
                )
            )
        return out

    def reasoning(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        out = []
        if self.open is None or self.open["type"] != "reasoning":
            out += self._begin(
                {"type": "reasoning", "id": R.new_id("rs"), "summary": [], "content": [], "status": "in_progress"},
                {"type": "reasoning_text", "text": ""},
            )
        self.open["content"][0]["text"] += text
        out.append(
            self._event(
                "response.reasoning_text.delta",
                item_id=self.open["id"],
                output_index=self._index(),
                content_index=0,
                delta=text,
            )
        )
        return out

    def text(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        out = []
        if self.open is None or self.open["type"] != "message":
            out += self._begin(
                {"type": "message", "id": R.new_id("msg"), "status": "in_progress", "role": "assistant", "content": []},
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            )
        self.open["content"][0]["text"] += text
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=self.open["id"],
                output_index=self._index(),
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return out

    def call(self, piece: CallDelta) -> list[dict[str, Any]]:
        out = []
        if piece.name is not None:
            item = {
                "type": "function_call",
                "id": R.new_id("fc"),
                "call_id": R.new_id("call"),
                "name": piece.name,
                "arguments": "",
                "status": "in_progress",
            }
            self.call_items[piece.index] = item
            out += self._begin(item, None)
        item = self.call_items[piece.index]
        if piece.arguments:
            item["arguments"] += piece.arguments
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=self._index(),
                    delta=piece.arguments,
                )
            )
        return out

    def error(self, error: E.ApiError) -> dict[str, Any]:
        """The event for an error after the stream began (the engine failed, the server is stopping)."""
        return self._event("error", code=error.code, message=error.message, param=error.param)

    def finish(self, tally: R.RunTally) -> list[dict[str, Any]]:
        """Close the last item and the response: completed, or incomplete when max_output_tokens cut it."""
        out = self._close()
        usage = tally.usage()
        self.usage = {
            "input_tokens": usage["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]},
            "output_tokens": usage["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage["total_tokens"],
        }
        if tally.finish_reason == "length":
            self.status, self.incomplete = "incomplete", {"reason": "max_output_tokens"}
            out.append(self._event("response.incomplete", response=self.response()))
        else:
            self.status = "completed"
            out.append(self._event("response.completed", response=self.response()))
        return out


def sse_event(event: dict[str, Any]) -> bytes:
    """One Responses streaming event, named as OpenAI names them (`event:` then `data:`)."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
