"""The OpenAI API's requests, checked by hand (plain dicts, no torch).

`parse_chat_request` / `parse_completion_request` turn a decoded JSON body into a `CompletionRequest` or raise
`ApiError` (400, with the offending `param`), so bad input never reaches the engine. The answers are built in
core.server.replies, the errors in core.server.api_errors.

Structured output (`response_format` json_object / json_schema, `tool_choice` required or a named function,
strict tool schemas) becomes a grammar the engine decodes under (core.decoding.constraints; the forced tool call's
grammar is built by core.server.tool_calls.forced_call_grammar once the model's format is known), and
`logprobs` / `top_logprobs` the engine's `top_logprobs`. A forced call's arguments always match the function's
schema (the grammar is built from it); with `tool_choice` auto the model may answer in prose or call, and its
calls are read as JSON, `strict` or not (agents send `strict` with every turn: refusing it would break them).
"""

from __future__ import annotations

import json
import math
import random
import reprlib
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from core.engine import protocol as P
from core.errors import InvalidSettingError
from core.server.api_errors import ApiError
from core.server.request_tools import call_arguments, parse_tool_choice, parse_tools
from core.server.schema_check import has_finite_instance
from core.system import json_text
from core.text.continuation import answer_to_continue
from core.text.template_kwargs import check_template_kwargs

METHODS: tuple[str, ...] = get_args(P.Method)  # the engine's own list, "auto" included
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
MAX_STOP_STRINGS = 16
# /v1/completions without max_tokens: 16 tokens, OpenAI's documented default for it (vLLM's too); chat and
# responses without one answer until the end of the context, as vLLM and llama.cpp do
LEGACY_COMPLETION_MAX_TOKENS = 16
MAX_JSON_DEPTH = json_text.MAX_DEPTH  # the cap on all JSON from outside: deeper than any real request is hostile
MAX_TOKENS_LIMIT = 2**31 - 1  # beyond any context: a larger max_tokens is a client's mistake (vLLM: 400 too)

# Fields some clients always send: harmless at these values, refused (not silently ignored) at others.
_NEUTRAL = {
    "n": (None, 1),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "logit_bias": (None, {}),
}


def check_grammar(kind: str, source: str, param: str) -> None:
    """A request's grammar (response_format's schema, a forced call's) checked before it is queued, so a
    schema the grammar engine cannot read is a 400 naming `param` at once (llguidance, no tokenizer needed)."""
    if kind == "json_object":
        return
    import llguidance

    try:
        if kind == "lark":
            grammar = llguidance.LLMatcher.grammar_from_lark(source)
        else:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json.loads(source))
        problem = llguidance.LLMatcher.validate_grammar(grammar)
    except ValueError as error:
        problem = str(error)
    if not problem and kind == "json_schema" and not has_finite_instance(json.loads(source)):
        problem = (
            "no finite JSON value matches it (a '$ref' leads back to itself through required properties "
            "or only to itself), so no answer could ever be complete: give the recursion a way to end"
        )
    if problem:
        what = "the tools' parameters" if param == "tools" else "the JSON schema"
        raise ApiError(
            400, f"{what} cannot be used for structured output: {problem.strip()}", param=param, code="invalid_schema"
        )


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
    max_tokens: int | None = None  # None: as many as the context holds (vLLM's and llama.cpp's default)
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    """One checked request. kind: chat (messages, chat template) or text (a plain prompt to continue).
    tools: the function definitions the model may call (empty with tool_choice "none"), in OpenAI's form."""

    kind: Literal["chat", "text"]
    model: str
    messages: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    parallel_tool_calls: bool = True
    prompt: str | None = None
    stream: bool = False
    include_usage: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int = 0
    max_tokens: int | None = None  # None: as many as the context holds
    stop: tuple[str, ...] = ()
    method: str = "specexec"
    grammar_kind: str | None = None  # P.GrammarKind: response_format's (or a forced tool call's) grammar
    grammar_source: str = ""
    top_logprobs: int | None = None  # None: no log-probabilities
    tool_choice: str = "auto"  # auto | required | named (with forced_tool); "none" drops the tools
    forced_tool: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    trim_context: bool = False  # drop the oldest turns that do not fit (the Responses API's truncation "auto")
    thinking_token_budget: int | None = None  # a thinking model's thought, at most (P.Generate's field)
    continue_final_message: bool = False  # the last message is an answer to go on with (P.Generate's field)

    def to_count(self, request_id: str) -> P.CountTokens:
        """The engine's count of the prompt an answer to this request would read, nothing left out (POST
        /tokenize and the input-token counts)."""
        return P.CountTokens(
            request_id=request_id,
            messages=self.messages,
            prompt=self.prompt,
            tools=self.tools,
            chat_template_kwargs=dict(self.chat_template_kwargs),
            max_new_tokens=self.max_tokens,
            trim_context=False,
        )

    @property
    def forces_tool_call(self) -> bool:
        return self.tool_choice in ("required", "named")

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(tool["function"]["name"] for tool in self.tools)

    def to_generate(self, request_id: str) -> P.Generate:
        """The engine request: the conversation cache's prefix of it is reused (an API conversation), and
        nothing is trimmed unless the request asked for it (`trim_context`)."""
        return P.Generate(
            request_id=request_id,
            messages=self.messages,
            prompt=self.prompt,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            repetition_penalty=self.repetition_penalty,
            seed=self.seed,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            method=self.method,
            max_new_tokens=self.max_tokens,
            stop=self.stop,
            trim_context=self.trim_context,
            tools=self.tools,
            cache_owner="api",
            grammar_kind=self.grammar_kind,
            grammar_source=self.grammar_source,
            top_logprobs=self.top_logprobs,
            chat_template_kwargs=dict(self.chat_template_kwargs),
            thinking_token_budget=self.thinking_token_budget,
            continue_final_message=self.continue_final_message,
        )


# ----------------------------------------------------------------------------------------------------------
# Parsing


def _number(body: dict, name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not json_text.is_number(value) or not _finite(value):
        raise ApiError(400, f"'{name}' must be a number, got {_short(value)}", param=name, code="invalid_type")
    if value > high or value < low or (low_open and value == low):
        bounds = f"{'above' if low_open else 'at least'} {low:g} and at most {high:g}"
        raise ApiError(400, f"'{name}' must be {bounds}, got {_short(value)}", param=name, code="invalid_value")
    return float(value)


def _finite(value: int | float) -> bool:
    """An int is finite however long (math.isfinite cannot even take one beyond a float's range)."""
    return isinstance(value, int) or math.isfinite(value)


def _short(value: object) -> str:
    """A client's value quoted in an error: a number of 4,000 digits is said in 40 characters."""
    return reprlib.repr(value)


def _integer(body: dict, name: str, default: int | None, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if not json_text.is_whole(value):
        raise ApiError(400, f"'{name}' must be a whole number, got {_short(value)}", param=name, code="invalid_type")
    if value < low or (high is not None and value > high):
        raise ApiError(
            400,
            f"'{name}' must be at least {low}"
            + (f" and at most {high}" if high is not None else "")
            + f", got {_short(value)}",
            param=name,
            code="invalid_value",
        )
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


# Why a field is refused, where there is more to say than "not supported".
_WHY_REFUSED = {
    "n": "one answer per request: the engine answers requests one at a time, so n answers would take n times "
    "as long as one while holding the queue; send n requests instead (with different seeds: they share the "
    "prompt's cached tokens)",
    "best_of": "one answer per request (see 'n')",
}


def _refuse_unsupported(body: dict) -> None:
    for name, neutral in _NEUTRAL.items():
        if name in body and body[name] not in neutral:
            why = _WHY_REFUSED.get(name, "leave it out")
            raise ApiError(
                400, f"'{name}' is not supported by this server: {why}", param=name, code="unsupported_parameter"
            )


def _response_format(body: dict) -> tuple[str, str] | None:
    """The checked response_format as a grammar (kind, source): None for plain text, ("json_object", "") or
    ("json_schema", the schema's JSON text; an absent schema allows any JSON value)."""
    value = body.get("response_format")
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return kind, ""
    if kind == "json_schema":
        spec = value.get("json_schema")
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("name"), str)
            or not isinstance(spec.get("schema", {}), dict)
        ):
            raise ApiError(
                400,
                "'response_format.json_schema' needs a 'name' and a 'schema' object",
                param="response_format.json_schema",
                code="invalid_value",
            )
        return kind, json.dumps(spec.get("schema", {}))
    raise ApiError(
        400,
        '\'response_format\' must be {"type": "text"}, {"type": "json_object"} or '
        '{"type": "json_schema", "json_schema": {...}}',
        param="response_format",
        code="invalid_value",
    )


def _logprobs(body: dict, chat: bool) -> int | None:
    """The checked log-probability request: None when not asked for, else how many alternatives per token."""
    value = body.get("logprobs")
    if chat:
        if value is not None and not isinstance(value, bool):
            raise ApiError(400, "'logprobs' must be true or false", param="logprobs", code="invalid_type")
        top = _integer(body, "top_logprobs", 0, 0, P.MAX_TOP_LOGPROBS)
        if top and not value:
            raise ApiError(400, "'top_logprobs' needs 'logprobs': true", param="top_logprobs", code="invalid_value")
        return top if value else None
    top = _integer(body, "logprobs", None, 0, 5)  # /v1/completions: an integer, the alternatives per token
    return top


def check_tree(body: object) -> None:
    """The decoded body walked once, without recursion: nested at most MAX_JSON_DEPTH deep (deeper would make
    the schema and template code recurse until Python's limit), and every string (and key) UTF-8 text: a lone
    surrogate ("\\ud800", which JSON's escapes allow and no tokenizer can read) is a 400 naming where it is."""
    stack: list[tuple[object, str, int]] = [(body, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ApiError(
                400, f"the request body is nested more than {MAX_JSON_DEPTH} levels deep", code="invalid_json"
            )
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                name = where or "the request body"
                raise ApiError(
                    400,
                    f"{name} holds a lone surrogate (\\u{ord(value[error.start]):04x} at character "
                    f"{error.start}), which is not text: send the character's whole pair, or leave it out",
                    param=where or None,
                    code="invalid_value",
                ) from error
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, where, depth + 1))
                stack.append((item, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value))


def _common(body: object, defaults: Defaults, chat: bool) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    check_tree(body)
    _refuse_unsupported(body)
    if not chat and ("tools" in body or "response_format" in body):
        name = "tools" if "tools" in body else "response_format"
        raise ApiError(400, f"'{name}' belongs to /v1/chat/completions", param=name, code="unsupported_parameter")
    grammar = _response_format(body)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be a string", param="model", code="invalid_type")
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise ApiError(400, "'stream' must be true or false", param="stream", code="invalid_type")
    options = body.get("stream_options")
    if options is not None and not stream:
        raise ApiError(
            400,
            "'stream_options' is only for streamed answers: send it with \"stream\": true, or leave it out",
            param="stream_options",
            code="invalid_value",
        )
    options = options or {}
    if not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options", code="invalid_type")
    method = body.get("method", defaults.method)
    if method not in METHODS:
        raise ApiError(
            400, f"'method' must be one of {', '.join(METHODS)}, got {method!r}", param="method", code="invalid_value"
        )
    max_tokens = _integer(body, "max_completion_tokens", None, 1, MAX_TOKENS_LIMIT)
    default = defaults.max_tokens if chat or defaults.max_tokens is not None else LEGACY_COMPLETION_MAX_TOKENS
    max_tokens = _integer(body, "max_tokens", max_tokens if max_tokens is not None else default, 1, MAX_TOKENS_LIMIT)
    seed = _integer(body, "seed", defaults.seed, -(2**63), 2**63 - 1)
    return dict(
        model=model,
        stream=bool(stream),
        include_usage=bool(options.get("include_usage", False)),
        temperature=_number(body, "temperature", defaults.temperature, 0.0, 2.0),
        top_p=_number(body, "top_p", defaults.top_p, 0.0, 1.0, low_open=True),
        top_k=_integer(body, "top_k", defaults.top_k, 0),
        repetition_penalty=_number(body, "repetition_penalty", defaults.repetition_penalty, 0.0, 10.0, low_open=True),
        presence_penalty=_number(body, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        seed=seed if seed is not None else random.randrange(2**31),
        max_tokens=max_tokens,
        stop=_stop(body, defaults.stop),
        method=method,
        grammar_kind=grammar[0] if grammar else None,
        grammar_source=grammar[1] if grammar else "",
        top_logprobs=_logprobs(body, chat),
        thinking_token_budget=_integer(body, "thinking_token_budget", None, 0),
    )


def _content(message: dict, index: int, optional: bool = False) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if content is None and optional:
        return ""
    if isinstance(content, list):  # content parts: text (files are text parts by now: core.server.file_parts)
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    raise ApiError(
                        400,
                        f"messages[{index}].content: a text part's 'text' must be a string",
                        param=f"messages[{index}].content",
                        code="invalid_type",
                    )
                raise ApiError(
                    400,
                    f"messages[{index}].content: only text and files can be read by a text model (got {kind!r})",
                    param=f"messages[{index}].content",
                    code="unsupported_content",
                )
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(
        400,
        f"messages[{index}].content must be a string or a list of text parts",
        param=f"messages[{index}].content",
        code="invalid_type",
    )


def _message(message: object, index: int, call_names: dict[str, str]) -> dict[str, Any]:
    """One checked message in the form chat templates read; `call_names` maps earlier call ids to names."""
    where = f"messages[{index}]"
    role = message.get("role") if isinstance(message, dict) else None
    if not isinstance(role, str) or role not in CHAT_ROLES:
        raise ApiError(
            400,
            f"{where}.role must be one of {', '.join(CHAT_ROLES)}, got {role!r}",
            param=f"{where}.role",
            code="invalid_value",
        )
    calls = message.get("tool_calls") if role == "assistant" else None
    if calls is not None and (not isinstance(calls, list) or not calls):
        raise ApiError(
            400, f"{where}.tool_calls must be a non-empty list", param=f"{where}.tool_calls", code="invalid_value"
        )
    checked: dict[str, Any] = {"role": CHAT_ROLES[role], "content": _content(message, index, optional=bool(calls))}
    if role == "assistant":  # its thinking, sent back as vLLM, llama.cpp and DeepSeek return it
        reasoning = message.get("reasoning_content", message.get("reasoning"))
        if reasoning is not None and not isinstance(reasoning, str):
            raise ApiError(
                400,
                f"{where}.reasoning_content must be a string",
                param=f"{where}.reasoning_content",
                code="invalid_type",
            )
        if reasoning:
            checked["reasoning_content"] = reasoning
    if calls:
        checked["tool_calls"] = []
        for number, call in enumerate(calls):
            call_id, name, arguments = call_arguments(call, f"{where}.tool_calls[{number}]")
            call_names[call_id] = name
            checked["tool_calls"].append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            raise ApiError(
                400,
                f"{where}.tool_call_id must name the call this is the result of",
                param=f"{where}.tool_call_id",
                code="invalid_value",
            )
        checked["tool_call_id"] = call_id
        if call_id in call_names:
            checked["name"] = call_names[call_id]
    return checked


def parse_chat_request(body: object, defaults: Defaults) -> CompletionRequest:
    """A /v1/chat/completions body; ApiError(400) naming the bad field otherwise."""
    common = _common(body, defaults, chat=True)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(
            400,
            "'messages' must be a non-empty list of {role, content} objects",
            param="messages",
            code="invalid_value",
        )
    call_names: dict[str, str] = {}
    checked = tuple(_message(message, index, call_names) for index, message in enumerate(messages))
    tools = parse_tools(body)
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise ApiError(
            400, "'parallel_tool_calls' must be true or false", param="parallel_tool_calls", code="invalid_type"
        )
    choice, forced = parse_tool_choice(body, tools)
    if choice == "none":
        tools = ()
    if choice in ("required", "named"):  # the answer is the call: response_format is for text (openai-agents
        common.update(grammar_kind=None, grammar_source="")  # sends both), the call's grammar holds instead
    try:
        template_kwargs = check_template_kwargs(body.get("chat_template_kwargs"))
    except InvalidSettingError as error:
        raise ApiError(400, str(error), param="chat_template_kwargs", code="invalid_value") from error
    return CompletionRequest(
        kind="chat",
        messages=checked,
        tools=tools,
        parallel_tool_calls=parallel,
        tool_choice=choice,
        forced_tool=forced,
        chat_template_kwargs=template_kwargs,
        continue_final_message=_continue_final(
            body, checked, common["grammar_kind"] is not None or choice in ("required", "named")
        ),
        **common,
    )


def _continue_final(body: dict, messages: tuple[dict[str, Any], ...], grammar: bool) -> bool:
    """vLLM's `continue_final_message` (the last message is an answer the model goes on with), checked, with
    its companion `add_generation_prompt`: false goes with it (vLLM asks for both), true contradicts it, and
    false alone (a prompt without the answer's header) is not something this server writes."""
    flags = {}
    for name, default in (("continue_final_message", False), ("add_generation_prompt", True)):
        value = body.get(name)
        if value is not None and not isinstance(value, bool):
            raise ApiError(400, f"'{name}' must be true or false", param=name, code="invalid_type")
        flags[name] = default if value is None else value
    if not flags["continue_final_message"]:
        if not flags["add_generation_prompt"]:
            raise ApiError(
                400,
                "'add_generation_prompt': false is only supported with \"continue_final_message\": true (a prompt "
                "always ends with the answer's header here)",
                param="add_generation_prompt",
                code="unsupported_parameter",
            )
        return False
    if "add_generation_prompt" in body and flags["add_generation_prompt"]:
        raise ApiError(
            400,
            "'continue_final_message' goes on with the last answer, 'add_generation_prompt' starts a new one: "
            'send "add_generation_prompt": false with it, or leave it out',
            param="add_generation_prompt",
            code="invalid_value",
        )
    if grammar:
        raise ApiError(
            400,
            "an answer cannot be continued under 'response_format' or a forced tool call (the format reads the "
            "answer from its start): leave one of them out",
            param="continue_final_message",
            code="invalid_value",
        )
    try:
        answer_to_continue(list(messages))
    except InvalidSettingError as error:
        raise ApiError(400, str(error), param="messages", code="invalid_value") from error
    return True


def parse_completion_request(body: object, defaults: Defaults) -> CompletionRequest:
    """A /v1/completions body (one text prompt); ApiError(400) naming the bad field otherwise."""
    common = _common(body, defaults, chat=False)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(
            400,
            "'prompt' must be one string (lists of prompts and token ids are not supported)",
            param="prompt",
            code="invalid_value",
        )
    if not prompt:
        raise ApiError(400, "'prompt' is empty", param="prompt", code="invalid_value")
    return CompletionRequest(kind="text", prompt=prompt, **common)


TOKENIZE_FIELDS = ("model", "messages", "prompt", "tools", "tool_choice", "chat_template_kwargs")


def parse_tokenize_request(body: object, defaults: Defaults) -> CompletionRequest:
    """A POST /tokenize body in vLLM's form: `messages` (with `tools` and `chat_template_kwargs`) or one
    `prompt`, read as a chat completion's or a completion's; the prompt is counted as an answer reads it,
    so vLLM's `add_generation_prompt` may only be true and `continue_final_message` only false. Other fields
    (sampling, vLLM's `add_special_tokens`) do not change the count and are not read."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_type")
    for name, counted in (("add_generation_prompt", True), ("continue_final_message", False)):
        if body.get(name, counted) is not counted:
            raise ApiError(
                400,
                f"'{name}' can only be {str(counted).lower()}: the count is of the prompt an answer to the "
                "messages reads",
                param=name,
                code="invalid_value",
            )
    read = {name: body[name] for name in TOKENIZE_FIELDS if name in body}
    if "messages" in read:
        if "prompt" in read:
            raise ApiError(400, "send 'messages' or 'prompt', not both", param="prompt", code="invalid_value")
        return parse_chat_request(read, defaults)
    if "prompt" in read:
        return parse_completion_request(read, defaults)
    raise ApiError(400, "send the 'messages' (or the 'prompt') to count", param="messages", code="invalid_value")
