"""The messages between the engine process and its clients: typed, versioned, torch-free.

Everything here is a frozen dataclass of plain Python values (str, int, float, bool, None, tuples, lists and
dicts of those), so it pickles through multiprocessing queues and the Qt app can import this module without
pulling in torch. Every message carries `version`; the engine answers a message of another version, of an
unknown type, with missing fields or with wrongly typed fields with an `Error` event (kind "protocol") and
goes on serving.

Requests (client -> engine): Load, Generate, CountTokens, Cancel, Unload, Status, Shutdown.
Events (engine -> client): EngineStarted, LoadProgress, StatusReport, Queued, PromptStarted, TokenChunk, PassStats,
AutoChoice, ContextTrimmed, BudgetReduced, Finished, TokenCount, Error.

A Generate request ends with exactly one Finished or one Error carrying its request_id (or, if the engine
process dies, with the client's Error of kind "engine_died", which ends every request in flight). Generate
requests are answered one at a time in the order they arrived; Load and Unload wait their turn in the same
queue; Cancel, Status, CountTokens and Shutdown take effect at once (between two target passes while generating).
A CountTokens request ends with one TokenCount or one Error carrying its request_id.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from core.system import json_text

PROTOCOL_VERSION = 1

EngineState = Literal["idle", "loading", "ready", "generating"]
FinishReason = Literal["eos", "stop", "length", "cancelled"]
Method = Literal["specexec", "specinfer", "sequential", "auto"]
CacheOwner = Literal["chat", "api"]
# What an answer must match (core.decoding.constraints): any JSON object, a JSON schema, or an llguidance Lark grammar
GrammarKind = Literal["json_object", "json_schema", "lark"]
MAX_TOP_LOGPROBS = 20  # alternatives per token, at most (OpenAI's limit)


# Error kinds the engine and client report (Error.kind).
ERROR_KINDS = (
    "protocol",  # unknown / malformed message or wrong protocol version
    "not_loaded",  # Generate before a successful Load
    "busy",  # a request id that is already queued or running
    "invalid_setting",  # bad sampling / tree / method settings
    "context_length",  # the prompt alone does not fit in the context window
    "model_not_found",
    "model_format",
    "unsupported_architecture",
    "tokenizer_mismatch",
    "insufficient_memory",  # the models do not fit (checked while loading)
    "out_of_memory",  # out of memory even at the smallest tree budget
    "numerical",  # the target's scores came out as NaN or infinity (an overflow, or damaged weights)
    "disk_write",  # a file the engine writes for itself could not be: the drive is full, or the folder locked
    "internal",  # an unexpected exception inside the engine (it lives on)
    "engine_died",  # reported by the client: the engine process is gone
    "engine_died_loading",  # reported by the client: the engine process died while it loaded the models
    "engine_start",  # reported by the client: the engine did not start in time
    # a remote OpenAI-compatible server (core.remote.engine; the matching errors are in core.errors)
    "remote_unreachable",  # nothing answered at its address
    "remote_auth",  # the API key was refused, or one is needed
    "remote_not_openai",  # what answered is not an OpenAI-compatible server
    "remote_tls",  # the secure connection failed
    "remote_rejected",  # the server refused the request (unknown model, a setting it does not take)
    "remote_server",  # the server failed to answer (5xx, rate limits)
)


class ProtocolError(ValueError):
    """A message that is not a valid request or event of this protocol version."""


@dataclass(frozen=True, kw_only=True)
class _Message:
    version: int = PROTOCOL_VERSION


# ----------------------------------------------------------------------------------------------------------
# Requests


@dataclass(frozen=True)
class Request(_Message):
    """Base class of everything a client sends."""


@dataclass(frozen=True)
class Load(Request):
    """Load a target (and a draft unless None). Replaces the models already loaded.

    offload (auto|on|off), vram_budget_gb (None: free VRAM minus the draft, caches, activations and a margin)
    and resident_layers ('auto' or a count) place an offloaded target (core.loading.offload_policy); budget also sizes
    the activations it reserves. StatusReport.models["budget"] is the tree budget in force: lower than
    `budget` when the GPU cannot hold the activations of the requested tree. context_length: the tokens of
    conversation both KV caches are preallocated for (None: 4,096, or the models' limit if lower);
    StatusReport.models["max_context"] reports it, and longer conversations drop their oldest turns;
    models["model_context"] is the longest both models keep (what a context_length can go up to), and
    models["context_bytes_per_token"] the memory each token of it sets aside in their KV caches.
    fit_context True takes a context_length longer than the models keep down to their limit (the app's
    setting: a preference kept from one model to the next); False refuses it (an invalid_setting Error).
    budget "auto" (the default): chosen per pass for this machine (core/decoding/autotune), up to the largest budget
    it may pick (the caches and the activation reserve are sized for that one).
    """

    target: str = "builtin"
    draft: str | None = "builtin-draft"
    dtype: str = "auto"
    device: str = "auto"
    offload: str = "auto"
    vram_budget_gb: float | None = None
    resident_layers: str = "auto"
    budget: int | Literal["auto"] = "auto"
    max_depth: int = 32
    expand: int = 32
    draft_top_p: bool = False
    context_length: int | None = None
    fit_context: bool = False


@dataclass(frozen=True)
class Generate(Request):
    """Answer a conversation. `messages`: [{"role": ..., "content": ...}, ...] ending with the user's turn (or
    a tool's result); an assistant message may carry `tool_calls` and a tool message `tool_call_id`, in the
    form the model's chat template reads (arguments as objects). `tools`: OpenAI-style function definitions the
    chat template renders into the prompt (a template without tool support answers an invalid_setting Error).

    method "auto" (the default): plain decoding or SpecExec, whichever is faster on this machine, chosen per
    pass (AutoChoice events say what and why). budget None means the budget of the Load (capped by any
    reduction after an out-of-memory error); "auto" lets the engine choose it.
    reuse_cache False reads no cached rows (benchmarks: a cold run to compare with); the conversations the
    engine keeps are not lost by it. cache_owner: whose conversation this is, for the engine's conversation
    cache (core.engine.conversation_cache): the app's chat ("chat") or the API server ("api"), whose
    conversations are evicted first.
    prompt: plain text to continue without the chat template (the API's /v1/completions); `messages` is then
    empty. trim_context False answers a conversation that does not fit with a context_length Error instead
    of leaving out its oldest messages (an API client must see what the model saw).
    grammar_kind / grammar_source: a grammar the answer must match (core.decoding.constraints.GrammarSpec; the source is
    the schema's JSON text or the Lark grammar; None: free text); a grammar the engine cannot use answers an
    invalid_setting Error. top_logprobs: report each token's log-probability and this many alternatives in
    TokenChunk.logprobs (None: none). Both work with SpecExec and plain decoding, not SpecInfer.
    chat_template_kwargs: variables for the model's chat template (e.g. {"enable_thinking": False} for Qwen3;
    checked by core.text.prompts.check_template_kwargs; names the template does not read are left out).
    An assistant message may carry `reasoning_content` (its thinking, for templates that render it).
    thinking_token_budget: the most tokens a thinking model may think before its block is closed for it
    (core.decoding.thinking_budget; vLLM's field of that name). None: no bound, except under a grammar, where
    it is half the tokens the answer may have, so that the forced answer comes after the thought.
    continue_final_message: `messages` end with an assistant's answer cut off (its `content`, and its thinking
    as `reasoning_content`), and the model goes on with it from its last word (core.text.continuation; vLLM's
    field of that name): the new tokens are streamed and counted alone. Not with a grammar, which would read
    the answer from its start.
    """

    request_id: str
    messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int = 0
    presence_penalty: float = 0.0  # OpenAI's (core.decoding.sampling.apply_occurrence_penalties)
    frequency_penalty: float = 0.0
    method: Method = "auto"
    max_new_tokens: int | None = 256  # None: as many as the context window holds
    stop: tuple[str, ...] | list[str] = ()
    budget: int | Literal["auto"] | None = None
    reuse_cache: bool = True
    prompt: str | None = None
    trim_context: bool = True
    tools: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()
    cache_owner: CacheOwner = "chat"
    grammar_kind: GrammarKind | None = None
    grammar_source: str = ""
    top_logprobs: int | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    thinking_token_budget: int | None = None
    continue_final_message: bool = False


@dataclass(frozen=True)
class CountTokens(Request):
    """How long the prompt of `messages` would be, answered at once with a TokenCount (also while an answer is
    written): the app shows what a message being typed takes of the context before it is sent. The fields
    that shape the prompt are Generate's, and the count is what a Generate with them would be given: after
    the oldest messages were left out to keep `max_new_tokens` of room (None: a quarter of the context, at
    most 1,024 tokens, as for a Generate), unless `trim_context` is False (the API's count of a whole
    prompt); `prompt`: plain text counted without the chat template, with `messages` empty."""

    request_id: str
    messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]
    tools: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    max_new_tokens: int | None = 256
    trim_context: bool = True
    prompt: str | None = None


@dataclass(frozen=True)
class Cancel(Request):
    """Stop a running answer (within one target pass; tokens already streamed stay) or drop a queued one."""

    request_id: str


@dataclass(frozen=True)
class Unload(Request):
    """Free the models (and the KV caches)."""


@dataclass(frozen=True)
class Status(Request):
    """Ask for a StatusReport (answered at once, also while generating)."""


@dataclass(frozen=True)
class Shutdown(Request):
    """Cancel everything and exit the engine process."""


# ----------------------------------------------------------------------------------------------------------
# Events


@dataclass(frozen=True)
class Event(_Message):
    """Base class of everything the engine (or the client, for engine_died) reports."""


@dataclass(frozen=True)
class EngineStarted(Event):
    pid: int
    protocol_version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class LoadProgress(Event):
    """stage: human-readable step. bytes_*: weight bytes read so far / in all, by the models' file sizes (0 when
    unknown, e.g. built-in models). fraction: 0..1; it moves with every percent of an offloaded target's
    weights (they are read tensor by tensor) and per model otherwise. None when unknown."""

    stage: str
    bytes_done: int = 0
    bytes_total: int = 0
    fraction: float | None = None


@dataclass(frozen=True)
class StatusReport(Event):
    """state: idle (no models) | loading | ready | generating. models: what is loaded (empty when idle);
    models["thinking"] says whether the target writes its thinking apart (core.text.reasoning.thinking_control):
    "switchable" (chat_template_kwargs {"enable_thinking": false} turns it off), "always", or None."""

    state: EngineState
    models: dict[str, Any] = field(default_factory=dict)
    queued: int = 0


@dataclass(frozen=True)
class Queued(Event):
    """A Generate waits behind others: `position` answers are ahead of it (the running one included). Sent
    when it is accepted behind another and again whenever the queue moves, so a client can say so (the API
    server puts it in its keep-alive comments)."""

    request_id: str
    position: int


@dataclass(frozen=True)
class TokenChunk(Event):
    """What one target pass added. text may be empty (held back: incomplete character, possible stop string).
    reasoning: a thinking model's thinking that the pass added (the `<think>` block of its answer, markers
    left out; core.text.reasoning), shown apart from the answer; `text` is then the answer proper, and either may
    be empty. Models without thinking markers always send reasoning "".
    sent_at: time.monotonic() in the engine when the chunk was queued (for latency measurements).
    logprobs: per new token, {"token": text, "logprob", "top": [{"token", "logprob"}, ...]}: the model's own
    log-probabilities (after a grammar's mask; before penalties, temperature, top-k and top-p, as vLLM and
    llama.cpp report them); None when not asked for. The end-of-sequence token that ends an answer has none
    (it is not part of the answer, and Finished.generated_tokens does not count it either)."""

    request_id: str
    text: str
    token_ids: tuple[int, ...] | list[int]
    sent_at: float = 0.0
    logprobs: tuple[dict[str, Any], ...] | None = None
    reasoning: str = ""


@dataclass(frozen=True)
class PromptStarted(Event):
    """The engine starts reading the prompt (before the first pass): prompt_tokens in all, reused_tokens of
    them already in the KV cache from the previous turn. A long paste takes a while to prefill; this lets a
    client say so instead of showing nothing."""

    request_id: str
    prompt_tokens: int
    reused_tokens: int = 0


@dataclass(frozen=True)
class PassStats(Event):
    """One target pass: tokens accepted, draft tokens scored by the target, timings."""

    request_id: str
    tokens: int
    tree_size: int
    draft_ms: float
    target_ms: float
    tokens_per_s: float
    budget: int = 0


@dataclass(frozen=True)
class AutoChoice(Event):
    """What an automatic method or budget chose for the next passes, and why, in one line for people
    (`reason`). Sent before the first pass's TokenChunk of a tuned answer and whenever the choice changes.
    method: sequential | specexec; budget and expand: the tree's (0 for sequential); tokens_per_pass and
    pass_seconds: what the choice is expected to deliver."""

    request_id: str
    method: str
    budget: int
    expand: int
    reason: str
    tokens_per_pass: float = 0.0
    pass_seconds: float = 0.0


@dataclass(frozen=True)
class ContextTrimmed(Event):
    """The conversation did not fit: the `dropped_messages` oldest non-system messages were left out (a
    client that drops them from its own history keeps the KV cache reusable on the next turn)."""

    request_id: str
    dropped_messages: int


@dataclass(frozen=True)
class BudgetReduced(Event):
    """Out of GPU memory during a pass: the tree budget was halved and the pass retried. The reduced budget
    stays the engine's cap until the next Load."""

    request_id: str
    old_budget: int
    new_budget: int
    reason: str = "out_of_memory"


@dataclass(frozen=True)
class Finished(Event):
    """generated_tokens: the answer's tokens (its closing end-of-sequence token not counted);
    reused_prefix_tokens: prompt tokens whose target KV rows were reused from the previous turn (so the
    target prefilled prompt_tokens - reused_prefix_tokens); draft_reused_prefix_tokens: the same for the draft."""

    request_id: str
    reason: FinishReason
    prompt_tokens: int = 0
    reused_prefix_tokens: int = 0
    generated_tokens: int = 0
    draft_reused_prefix_tokens: int = 0


@dataclass(frozen=True)
class TokenCount(Event):
    """The answer to CountTokens: `prompt_tokens`, the prompt a Generate would read with the chat template,
    after the `dropped_messages` oldest ones were left out to fit. fits False: even with every message left out
    that may be, the prompt fills the context (a Generate would end with a context_length Error);
    prompt_tokens is then that shortest prompt's length."""

    request_id: str
    prompt_tokens: int
    dropped_messages: int = 0
    fits: bool = True


@dataclass(frozen=True)
class Error(Event):
    """kind: one of ERROR_KINDS. request_id: the request it ends, or None for engine-wide problems.
    prompt_tokens: for a context_length Error, the prompt's tokens (0: not known), so that a client can load
    the models with a context that holds it (StatusReport.models["model_context"] says how long they go)."""

    request_id: str | None
    kind: str
    message: str
    hint: str = ""
    prompt_tokens: int = 0


REQUEST_TYPES: dict[str, type[Request]] = {
    cls.__name__: cls for cls in (Load, Generate, CountTokens, Cancel, Unload, Status, Shutdown)
}
EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        EngineStarted,
        LoadProgress,
        StatusReport,
        Queued,
        PromptStarted,
        TokenChunk,
        PassStats,
        AutoChoice,
        ContextTrimmed,
        BudgetReduced,
        Finished,
        TokenCount,
        Error,
    )
}


# ----------------------------------------------------------------------------------------------------------
# Validation


def _type_ok(value: object, hint: object) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if origin in (Union, types.UnionType):
        return any(_type_ok(value, option) for option in typing.get_args(hint))
    if origin is Literal:
        return value in typing.get_args(hint)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return json_text.is_whole(value)
    if hint is float:
        return json_text.is_number(value)
    if hint is str:
        return isinstance(value, str)
    if origin is tuple:
        args = typing.get_args(hint)
        return isinstance(value, tuple) and all(_type_ok(v, args[0]) for v in value)
    if origin is list:
        (arg,) = typing.get_args(hint)
        return isinstance(value, list) and all(_type_ok(v, arg) for v in value)
    if origin is dict:
        key, val = typing.get_args(hint)
        return isinstance(value, dict) and all(_type_ok(k, key) and _type_ok(v, val) for k, v in value.items())
    if isinstance(hint, type):
        return isinstance(value, hint)
    return False


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _check_messages(messages: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> None:
    for item in messages:
        if not {"role", "content"} <= set(item):
            raise ProtocolError("each message needs 'role' and 'content' fields")


def validate(message: object, allowed: dict[str, type] | None = None) -> _Message:
    """Return `message` if it is a well-formed message of this version (a Request by default), else raise
    ProtocolError with a sentence saying what is wrong."""
    allowed = REQUEST_TYPES if allowed is None else allowed
    cls = type(message)
    if allowed.get(cls.__name__) is not cls:
        raise ProtocolError(f"unknown message type {cls.__name__!r}; expected one of {', '.join(allowed)}")
    version = getattr(message, "version", None)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"{cls.__name__} has protocol version {version!r}, this engine speaks version {PROTOCOL_VERSION}"
        )
    for name, hint in _hints(cls).items():
        if not hasattr(message, name):
            raise ProtocolError(f"{cls.__name__} is missing the field {name!r}")
        value = getattr(message, name)
        if not _type_ok(value, hint):
            raise ProtocolError(f"{cls.__name__}.{name} has the wrong type or value: {value!r}")
    if isinstance(message, CountTokens):
        if not message.messages and message.prompt is None:
            raise ProtocolError("CountTokens.messages is empty: send at least the message to count (or a prompt)")
        if message.messages and message.prompt is not None:
            raise ProtocolError("CountTokens has both messages and a prompt: send one of them")
        _check_messages(message.messages)
        if not message.request_id:
            raise ProtocolError("CountTokens.request_id is empty")
    if isinstance(message, Generate):
        if not message.messages and message.prompt is None:
            raise ProtocolError("Generate.messages is empty: send at least the user's message (or a prompt)")
        if message.messages and message.prompt is not None:
            raise ProtocolError("Generate has both messages and a prompt: send one of them")
        _check_messages(message.messages)
        if not message.request_id:
            raise ProtocolError("Generate.request_id is empty")
        if message.grammar_kind not in (None, *typing.get_args(GrammarKind)):
            raise ProtocolError(
                f"Generate.grammar_kind must be one of {', '.join(typing.get_args(GrammarKind))} or null"
            )
        if message.top_logprobs is not None and not 0 <= message.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ProtocolError(f"Generate.top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}")
        if message.thinking_token_budget is not None and message.thinking_token_budget < 0:
            raise ProtocolError("Generate.thinking_token_budget cannot be negative")
    return message


def from_dict(data: object, allowed: dict[str, type] | None = None) -> _Message:
    """Build and validate a message from a dict {"type": "Generate", ...fields} (JSON-friendly form)."""
    allowed = REQUEST_TYPES if allowed is None else allowed
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ProtocolError(
            f"not a message: expected a message object or a dict with a 'type', got {type(data).__name__}"
        )
    cls = allowed.get(data["type"])
    if cls is None:
        raise ProtocolError(f"unknown message type {data['type']!r}; expected one of {', '.join(allowed)}")
    fields = {k: v for k, v in data.items() if k != "type"}
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ProtocolError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    for key in ("messages", "stop", "token_ids", "tools", "logprobs"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    try:
        message = cls(**fields)
    except TypeError as error:
        raise ProtocolError(f"{cls.__name__}: {error}") from error
    return validate(message, allowed)


def to_dict(message: _Message) -> dict[str, Any]:
    """The JSON-friendly form of a message (inverse of from_dict)."""
    data = {"type": type(message).__name__}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        data[f.name] = list(value) if isinstance(value, tuple) else value
    return data


def decode_request(message: object) -> Request:
    """A request object (or its dict form) checked against this protocol version; ProtocolError otherwise."""
    if isinstance(message, dict):
        return from_dict(message, REQUEST_TYPES)  # type: ignore[return-value]
    return validate(message, REQUEST_TYPES)  # type: ignore[return-value]
