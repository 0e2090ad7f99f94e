"""The OpenAI-compatible HTTP API as a Starlette (ASGI) app.

Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, POST /v1/completions, POST
/v1/responses (core.server.responses; all three streaming with server-sent events when the body says
"stream": true), and GET /health (no key needed; says whether the engine is busy). docs/api.md says what is
served and what is refused.

What a request must pass, in order (each refusal in OpenAI's error format, {"error": {"message", "type",
"param", "code"}}):
- its Host, when the server listens on loopback only, is a loopback name (a web page cannot reach it through
  DNS rebinding); an `Origin` header (a browser page) is one the user allowed (`allowed_origins`; none by
  default, so no web page can use the server), and those get CORS headers and preflight answers;
- the API key, `Authorization: Bearer <key>`, unless the server was started without one;
- a POST says `Content-Type: application/json` (a page cannot send a "simple" text/plain request) and its
  body is at most `max_body_bytes` (413; derived from the model's context length, so a 300 MB body is
  refused before it is read whole);
- the queue has room (at most `max_queue` requests waiting besides the one being answered; else 503 with
  Retry-After).

A streamed request waits for its first engine event before answering, so an error the engine finds when it
receives the request (the prompt does not fit the context) is a plain 400, not an error inside a 200 stream.
Once streaming, a comment line is sent whenever `keepalive_s` pass without data, saying where the request is
(": queued, 2 ahead", ": reading the prompt"), so clients with first-byte timeouts keep waiting for a big
model. A client that disconnects cancels its request (streaming: Starlette cancels the body; not
streaming: a watcher task sees the disconnect).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from core.engine import protocol as P
from core.server import requests as S
from core.server.gateway import EngineGateway, Ticket
from core.server.keys import key_matches
from core.server.responses import ResponseBuilder, parse_responses_request, sse_event
from core.server.tool_calls import forced_call_grammar
from core.text.tool_calls import CallDelta, ToolCallStream, parse_answer

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
KEEPALIVE_S = 5.0  # the longest a stream stays silent (default)
DEFAULT_MAX_QUEUE = 16
MIN_BODY_BYTES = 1 << 20
BODY_BYTES_PER_TOKEN = 64  # JSON-escaped text and tool schemas: far more than any real prompt needs per token
DEFAULT_CONTEXT = 4096  # for the body cap while no model reports its context


def max_body_bytes(context_tokens: int) -> int:
    """The largest request body worth reading for a model with this context length."""
    return max(MIN_BODY_BYTES, BODY_BYTES_PER_TOKEN * context_tokens)


def error_response(error: S.ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    headers = dict(headers or {})
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(error.body(), status_code=error.status, headers=headers or None)


class QueueFull(S.ApiError):
    """503: too many requests waiting; `retry_after` seconds is when one is likely to have room."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(503, f"the server is busy: {waiting} requests are waiting for the model; try again in "
                         f"about {retry_after} s", "server_error", code="queue_full")
        self.retry_after = retry_after


def _sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


class EventStream(StreamingResponse):
    """A server-sent event stream that closes its body (and with it the engine request) however it ends:
    finished, failed, or cut off by the client."""

    def __init__(self, body: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._body = body
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()
            await self._body.aclose()  # type: ignore[attr-defined]


class OriginGate:
    """Refuses requests from web pages (an `Origin` header) whose origin the user did not allow; the allowed
    ones go on to the CORS middleware inside it."""

    def __init__(self, app: ASGIApp, allowed_origins: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = dict(scope["headers"]).get(b"origin")
            if origin is not None and "*" not in self.allowed and origin.decode("latin-1") not in self.allowed:
                error = S.ApiError(403, f"requests from web pages at {origin.decode('latin-1')!r} are not allowed: add "
                                   "the origin to the server's allowed origins (--allowed-origins, or the app's "
                                   "settings) to let that page use the model", "permission_error",
                                   code="origin_not_allowed")
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _abandon_on_disconnect(request: Request, ticket: Ticket) -> None:
    """Wait for the client to disconnect, then abandon its ticket (runs while a request is answered)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            ticket.abandon()
            return


class Progress:
    """Where a request is before its answer streams, for the keep-alive comments."""

    def __init__(self) -> None:
        self.ahead: int | None = None
        self.reading: int | None = None  # prompt tokens to read, once the engine started on it
        self.answering = False

    def note(self, event: P.Event | None) -> None:
        if isinstance(event, P.Queued):
            self.ahead = event.position
        elif isinstance(event, P.PromptStarted):
            self.ahead, self.reading = None, event.prompt_tokens - event.reused_tokens
        elif isinstance(event, P.TokenChunk):
            self.answering = True

    def comment(self) -> bytes:
        if self.answering:
            text = "answering"
        elif self.reading is not None:
            text = f"reading the prompt ({self.reading} new tokens)"
        elif self.ahead is not None:
            text = f"queued, {self.ahead} ahead"
        else:
            text = "waiting for the model"
        return f": {text}\n\n".encode()


class OpenAIServer:
    """The routes and their state. `gateway`: the shared engine; `api_key` None: no key required;
    `loopback_only`: refuse requests addressed to a host name that is not this machine's loopback;
    `max_queue`: requests that may wait besides the one being answered; `keepalive_s`: the longest a stream
    stays silent; `model_names`: the names the model is served under (none: the target's own name)."""

    def __init__(self, gateway: EngineGateway, api_key: str | None, defaults: S.Defaults,
                 loopback_only: bool = True, max_queue: int = DEFAULT_MAX_QUEUE,
                 keepalive_s: float = KEEPALIVE_S, model_names: tuple[str, ...] = ()) -> None:
        self.gateway = gateway
        self.model_names = tuple(model_names)
        self.api_key = api_key
        self.defaults = defaults
        self.loopback_only = loopback_only
        self.max_queue = max_queue
        self.keepalive_s = keepalive_s
        self.created = int(time.time())

    # -- checks --------------------------------------------------------------------------------------------

    def check_host(self, request: Request) -> None:
        if not self.loopback_only:
            return
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name.lower() not in LOOPBACK_HOSTS:
            raise S.ApiError(403, f"this server only answers requests addressed to localhost, not {host!r}",
                             "permission_error", code="host_not_allowed")

    def check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise S.missing_key_error()
        if not key_matches(given.strip(), self.api_key):
            raise S.wrong_key_error(given.strip())

    def model_ids(self) -> tuple[str, ...]:
        """The names the model answers to, the first one in responses."""
        return self.model_names or (str(self.gateway.model_info().get("target") or "specexec"),)

    def model_id(self) -> str:
        return self.model_ids()[0]

    def check_model(self, asked: str) -> None:
        """A request naming another model gets 404 model_not_found, as from vLLM and Ollama (none named: this
        one, as vLLM does)."""
        if asked and asked not in self.model_ids():
            raise S.ApiError(404, f"The model '{asked}' does not exist: this server runs "
                             f"{' / '.join(repr(name) for name in self.model_ids())} (see GET /v1/models)",
                             "not_found_error", param="model", code="model_not_found")

    async def read_json(self, request: Request) -> object:
        """The body of a POST, checked for its type and size before and while it is read."""
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise S.ApiError(415, f"send the body as JSON with 'Content-Type: application/json' (got "
                             f"{media_type or 'no content type'!r})", code="unsupported_media_type")
        limit = max_body_bytes(int(self.gateway.model_info().get("max_context") or DEFAULT_CONTEXT))
        too_big = S.ApiError(413, f"the request body is larger than {limit:,} bytes, far more than the model's "
                             "context window can hold", code="request_too_large")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_big
        body = bytearray()
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise too_big
        try:
            return json.loads(body or b"null")
        except ValueError as error:
            raise S.ApiError(400, f"the request body is not valid JSON ({error})", code="invalid_json") from error

    def check_tools(self, parsed: S.CompletionRequest) -> str | None:
        """The model's tool-call format when the request uses tools (or tool messages); a clear 400 for a
        model whose chat template has none."""
        uses_tools = bool(parsed.tools) or any("tool_calls" in m or m["role"] == "tool" for m in parsed.messages)
        fmt = self.gateway.model_info().get("tool_call_format")
        if uses_tools and fmt is None:
            raise S.ApiError(400, f"the model {self.model_id()!r} has no tool support in its chat template: send the "
                             "request without 'tools' and tool messages, or serve a model that has it (Qwen2.5, "
                             "Llama 3.1)", param="tools", code="tools_not_supported")
        return fmt if parsed.tools else None

    def check_queue(self) -> None:
        waiting = self.gateway.health()["requests"]
        if waiting > self.max_queue:
            raise QueueFull(waiting, self.gateway.retry_after())

    # -- routes --------------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        self.check_host(request)
        info = self.gateway.model_info()
        return JSONResponse({"status": "ok" if info else "no_model", "model": info.get("target"),
                             **self.gateway.health()})

    async def models(self, request: Request) -> Response:
        self.check_host(request)
        self.check_key(request)
        return JSONResponse(S.model_list(self.model_ids(), self.created, self.gateway.model_info()))

    async def model(self, request: Request) -> Response:
        self.check_host(request)
        self.check_key(request)
        asked = request.path_params["model_id"]
        self.check_model(asked or "-")
        return JSONResponse(S.model_card(asked, self.created, self.gateway.model_info()))

    async def chat_completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_chat_request)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_completion_request)

    def prepare(self, parsed: S.CompletionRequest) -> tuple[S.CompletionRequest, str | None]:
        """The checks every answer passes before it is queued; the request with its grammar in place (a forced
        call's, built in the model's own format) and the model's tool-call format (None without tools)."""
        self.check_model(parsed.model)
        tool_format = self.check_tools(parsed)
        if parsed.forces_tool_call:  # a grammar for one call in the model's own format
            parsed = dataclasses.replace(parsed, grammar_kind="lark",
                                         grammar_source=forced_call_grammar(tool_format, parsed.tools, parsed.forced_tool))
        if parsed.grammar_kind is not None:
            S.check_grammar(parsed.grammar_kind, parsed.grammar_source,
                            "tools" if parsed.forces_tool_call else "response_format")
        self.check_queue()
        return parsed, tool_format

    async def _complete(self, request: Request, parse: Callable[[object, S.Defaults], S.CompletionRequest]) -> Response:
        self.check_host(request)
        self.check_key(request)
        parsed, tool_format = self.prepare(parse(await self.read_json(request), self.defaults))
        chat = parsed.kind == "chat"
        response_id = S.new_id("chatcmpl" if chat else "cmpl")
        ticket = self.gateway.open(parsed.to_generate(response_id))
        tally = S.RunTally(parsed.method, "messages" if chat else "prompt")
        model = self.model_id()
        progress = Progress()
        watcher = asyncio.create_task(_abandon_on_disconnect(request, ticket))
        try:
            if not parsed.stream:
                await self._drain(ticket, tally, progress)
                if not chat:
                    return JSONResponse(S.text_response(response_id, model, tally))
                content, calls = parse_answer(tally.text, tool_format, parsed.tool_names, parsed.forces_tool_call)
                if not parsed.parallel_tool_calls:
                    calls = calls[:1]
                return JSONResponse(S.chat_response(response_id, model, tally, content, calls))
            first = await self._next_within_keepalive(ticket, tally, progress)
        except BaseException:
            ticket.abandon()
            raise
        finally:
            watcher.cancel()
        return EventStream(self._stream(ticket, tally, parsed, response_id, model, first, progress, tool_format),
                           ticket.abandon)

    async def responses(self, request: Request) -> Response:
        """POST /v1/responses (core.server.responses): the same engine request as a chat completion, answered
        as Responses output items, whole or as streaming events."""
        self.check_host(request)
        self.check_key(request)
        asked = parse_responses_request(await self.read_json(request), self.defaults)
        parsed, tool_format = self.prepare(asked.completion)
        response_id = S.new_id("resp")
        ticket = self.gateway.open(parsed.to_generate(response_id))
        tally = S.RunTally(parsed.method, "input")
        builder = ResponseBuilder(response_id, self.model_id(), asked.echo, S.now())
        progress = Progress()
        watcher = asyncio.create_task(_abandon_on_disconnect(request, ticket))
        try:
            if not parsed.stream:
                await self._drain(ticket, tally, progress)
                builder.reasoning(tally.reasoning)
                reader = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)
                for piece in reader.push(tally.text) + reader.finish():
                    self._build(builder, piece, parsed)
                builder.finish(tally)
                return JSONResponse(builder.response())
            first = await self._next_within_keepalive(ticket, tally, progress)
        except BaseException:
            ticket.abandon()
            raise
        finally:
            watcher.cancel()
        return EventStream(self._stream_response(ticket, tally, parsed, builder, first, progress, tool_format),
                           ticket.abandon)

    @staticmethod
    def _build(builder: ResponseBuilder, piece: str | CallDelta, parsed: S.CompletionRequest) -> list[dict]:
        """Add one piece of the answer (content or a piece of a call) to a Responses answer; its events."""
        if isinstance(piece, CallDelta):
            if piece.index and not parsed.parallel_tool_calls:
                return []
            return builder.call(piece)
        return builder.text(piece)

    async def _stream_response(self, ticket: Ticket, tally: S.RunTally, parsed: S.CompletionRequest,
                               builder: ResponseBuilder, first: P.Event | None | bool, progress: Progress,
                               tool_format: str | None) -> AsyncIterator[bytes]:
        reader = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)
        for out in builder.start():
            yield sse_event(out)
        event = first
        while True:
            events: list[dict] = []
            if isinstance(event, P.TokenChunk):
                events += builder.reasoning(event.reasoning)
                for piece in reader.push(event.text) if event.text else ():
                    events += self._build(builder, piece, parsed)
            elif isinstance(event, P.Finished):
                for piece in reader.finish():
                    events += self._build(builder, piece, parsed)
                events += builder.finish(tally)
            elif event is None:  # abandoned: the client is gone
                return
            for out in events:
                yield sse_event(out)
            if isinstance(event, P.Finished):
                return
            try:
                event = await self._next_within_keepalive(ticket, tally, progress)
            except S.ApiError as error:  # headers are sent: the error goes into the stream
                yield sse_event(builder.error(error))
                return
            if event is False:
                yield progress.comment()

    async def _next(self, ticket: Ticket, tally: S.RunTally, progress: Progress) -> P.Event | None:
        """The next event of the request, noted (an Error raises ApiError)."""
        event = await ticket.next()
        if isinstance(event, P.Error):
            raise S.engine_error(event, self.gateway.model_info().get("max_context"), tally.prompt_param)
        if event is not None:
            tally.add(event)
        progress.note(event)
        return event

    async def _drain(self, ticket: Ticket, tally: S.RunTally, progress: Progress) -> None:
        """Read the request's events into `tally` until it is finished (a non-streamed answer)."""
        event = await self._next(ticket, tally, progress)
        while event is not None and not isinstance(event, P.Finished):
            event = await self._next(ticket, tally, progress)

    async def _next_within_keepalive(self, ticket: Ticket, tally: S.RunTally,
                                     progress: Progress) -> P.Event | None | bool:
        """The next event as `_next` reads it, or False if none came within keepalive_s (the engine is in a
        long pass). Before the stream's headers go out the first such event shows the engine took the request
        (queued behind others, reading the prompt, answering, or done; the stream starts anyway on False);
        once streaming, False is the moment for a keep-alive comment."""
        try:
            return await asyncio.wait_for(self._next(ticket, tally, progress), self.keepalive_s)
        except TimeoutError:
            return False

    async def _stream(self, ticket: Ticket, tally: S.RunTally, parsed: S.CompletionRequest, response_id: str,
                      model: str, first: P.Event | None | bool, progress: Progress,
                      tool_format: str | None) -> AsyncIterator[bytes]:
        chat = parsed.kind == "chat"
        tools = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)  # no format: all content
        calls = 0
        call_ids: dict[int, str] = {}
        logprobs: list[dict] = []  # the tokens' entries not sent yet: they ride on the next piece of text
        if chat:
            yield _sse(S.chat_chunk(response_id, model, {"role": "assistant", "content": ""}))

        def take_logprobs() -> list[dict] | None:
            taken = list(logprobs) if logprobs else None
            logprobs.clear()
            return taken

        def pieces(text: str, final: bool) -> list[bytes]:
            nonlocal calls
            if not chat:
                return [_sse(S.text_chunk(response_id, model, text, logprobs=take_logprobs()))] if text else []
            found = tools.push(text) + (tools.finish() if final else [])
            out = []
            for piece in found:
                if isinstance(piece, CallDelta):
                    if piece.index and not parsed.parallel_tool_calls:
                        continue
                    if piece.name is not None:
                        calls += 1
                        call_ids[piece.index] = S.new_id("call")
                    delta = {"tool_calls": [S.tool_call_delta(piece, call_ids[piece.index])]}
                else:
                    delta = {"content": piece}
                out.append(_sse(S.chat_chunk(response_id, model, delta, logprobs=take_logprobs())))
            return out

        event = first  # False: nothing yet (the engine is in a long pass)
        while True:
            if isinstance(event, P.TokenChunk):
                logprobs.extend(event.logprobs or ())
                if event.reasoning and chat:  # a thinking model's thinking: never inside `content`
                    yield _sse(S.chat_chunk(response_id, model, {"reasoning_content": event.reasoning},
                                            logprobs=take_logprobs()))
                for piece in pieces(event.text, final=False) if event.text else ():
                    yield piece
            elif isinstance(event, P.Finished):
                for piece in pieces("", final=True):
                    yield piece
                reason = S.choice_finish_reason(tally.finish_reason, bool(calls))
                extra = tally.extra()
                yield _sse(S.chat_chunk(response_id, model, {}, reason, extra, logprobs=take_logprobs()) if chat else
                           S.text_chunk(response_id, model, "", reason, extra, logprobs=take_logprobs()))
                if parsed.include_usage:
                    build = S.chat_chunk if chat else S.text_chunk
                    yield _sse(build(response_id, model, {} if chat else "", usage=tally.usage(), choices=False))
                yield _sse("[DONE]")
                return
            elif event is None:  # abandoned: the client is gone
                return
            try:
                event = await self._next_within_keepalive(ticket, tally, progress)
            except S.ApiError as error:  # headers are sent: the error goes into the stream
                yield _sse(error.body())
                return
            if event is False:
                yield progress.comment()


def create_app(gateway: EngineGateway, api_key: str | None, defaults: S.Defaults | None = None,
               loopback_only: bool = True, allowed_origins: tuple[str, ...] = (),
               max_queue: int = DEFAULT_MAX_QUEUE, keepalive_s: float = KEEPALIVE_S,
               model_names: tuple[str, ...] = ()) -> Starlette:
    """The ASGI app serving `gateway`'s engine. allowed_origins: web page origins (e.g.
    "http://localhost:3000", or "*" for any) that may call it from a browser; none by default. model_names: the
    names requests may give the model (none: its own name)."""
    server = OpenAIServer(gateway, api_key, defaults or S.Defaults(), loopback_only, max_queue, keepalive_s,
                          model_names)

    async def api_error(_request: Request, error: Exception) -> Response:
        assert isinstance(error, S.ApiError)
        headers = {"Retry-After": str(error.retry_after)} if isinstance(error, QueueFull) else None
        return error_response(error, headers)

    async def http_error(_request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return error_response(S.ApiError(error.status_code, f"{error.detail}: {_request.method} {_request.url.path}",
                                         kind, code=str(error.status_code)))

    async def server_error(_request: Request, error: Exception) -> Response:
        log.error("the API server failed on %s", _request.url.path, exc_info=error)
        return error_response(S.ApiError(500, f"the server failed: {error}", "server_error", code="internal"))

    routes = [
        Route("/health", server.health, methods=["GET"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", server.model, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/responses", server.responses, methods=["POST"]),
    ]
    middleware = [
        Middleware(OriginGate, allowed_origins=tuple(allowed_origins)),
        Middleware(CORSMiddleware, allow_origins=list(allowed_origins), allow_methods=["GET", "POST"],
                   allow_headers=["Authorization", "Content-Type"], allow_private_network=True),
    ]
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={S.ApiError: api_error, HTTPException: http_error, Exception: server_error})
    app.state.server = server
    return app
