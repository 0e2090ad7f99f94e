"""The OpenAI-compatible HTTP API as a Starlette (ASGI) app.

Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, POST /v1/completions, POST
/v1/responses (core.server.responses; all three streaming with server-sent events when the body says
"stream": true), and GET /health (no key needed; says whether the engine is busy). docs/api.md says what is
served and what is refused.

What a request must pass, in order (each refusal in OpenAI's error format, {"error": {"message", "type",
"param", "code"}}):
- its Host, when the server listens on loopback only, is a loopback name (a web page cannot reach it through
  DNS rebinding); an `Origin` header (a browser page) is one the user allowed (`allowed_origins`; none by
  default, so no web page can use the server), and those get CORS headers and preflight answers
  (core.server.gate);
- the API key, `Authorization: Bearer <key>`, unless the server was started without one;
- a POST says `Content-Type: application/json` (a page cannot send a "simple" text/plain request) and its
  body is at most `max_body_bytes` (413; derived from the model's context length, so a 300 MB body is
  refused before it is read whole), plus FILE_BODY_BYTES for the files a chat or Responses request may carry
  (their text is read then, core.server.file_parts: the rest of the body is held to `max_body_bytes`);
- the queue has room (at most `max_queue` requests waiting besides the one being answered; else 503 with
  Retry-After).

A streamed request waits for its first engine event before answering, so an error the engine finds when it
receives the request (the prompt does not fit the context) is a plain 400, not an error inside a 200 stream.
Once streaming, a comment line is sent whenever `keepalive_s` pass without data, saying where the request is
(": queued, 2 ahead", ": reading the prompt"), so clients with first-byte timeouts keep waiting for a big
model (the streams themselves are built in core.server.event_stream). A client that disconnects cancels its request (streaming: Starlette cancels the body; not
streaming: a watcher task sees the disconnect).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from core.engine import protocol as P
from core.server import api_errors as E
from core.server import replies as R
from core.server import requests as S
from core.server.event_stream import (
    EventStream,
    Progress,
    add_piece,
    completion_stream,
    responses_stream,
)
from core.server.file_parts import FileRoute, file_data_bytes, file_parts, read_file_parts
from core.server.gate import OriginGate, check_host, error_response
from core.server.gateway import EngineGateway, Ticket
from core.server.keys import key_matches
from core.server.responses import ResponseBuilder, parse_responses_request
from core.server.tool_calls import forced_call_grammar
from core.text.tool_calls import ToolCallStream, parse_answer

log = logging.getLogger(__name__)

KEEPALIVE_S = 5.0  # the longest a stream stays silent (default)
DEFAULT_MAX_QUEUE = 16
MIN_BODY_BYTES = 1 << 20
BODY_BYTES_PER_TOKEN = 64  # JSON-escaped text and tool schemas: far more than any real prompt needs per token
FILE_BODY_BYTES = 32 << 20  # the files of one request together, in base64 (OpenAI's own limit for file inputs)
DEFAULT_CONTEXT = 4096  # for the body cap while no model reports its context


def max_body_bytes(context_tokens: int) -> int:
    """The largest request body worth reading for a model with this context length."""
    return max(MIN_BODY_BYTES, BODY_BYTES_PER_TOKEN * context_tokens)


async def _abandon_on_disconnect(request: Request, ticket: Ticket) -> None:
    """Wait for the client to disconnect, then abandon its ticket (runs while a request is answered)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            ticket.abandon()
            return


class OpenAIServer:
    """The routes and their state. `gateway`: the shared engine; `api_key` None: no key required;
    `loopback_only`: refuse requests addressed to a host name that is not this machine's loopback;
    `max_queue`: requests that may wait besides the one being answered; `keepalive_s`: the longest a stream
    stays silent; `model_names`: the names the model is served under (none: the target's own name)."""

    def __init__(
        self,
        gateway: EngineGateway,
        api_key: str | None,
        defaults: S.Defaults,
        loopback_only: bool = True,
        max_queue: int = DEFAULT_MAX_QUEUE,
        keepalive_s: float = KEEPALIVE_S,
        model_names: tuple[str, ...] = (),
    ) -> None:
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
        if self.loopback_only:
            check_host(request)

    def check_key(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise E.missing_key_error()
        if not key_matches(given.strip(), self.api_key):
            raise E.wrong_key_error(given.strip())

    def model_ids(self) -> tuple[str, ...]:
        """The names the model answers to, the first one in responses."""
        return self.model_names or (str(self.gateway.model_info().get("target") or "specexec"),)

    def model_id(self) -> str:
        return self.model_ids()[0]

    def check_model(self, asked: str) -> None:
        """A request naming another model gets 404 model_not_found, as from vLLM and Ollama (none named: this
        one, as vLLM does)."""
        if asked and asked not in self.model_ids():
            raise E.ApiError(
                404,
                f"The model '{asked}' does not exist: this server runs "
                f"{' / '.join(repr(name) for name in self.model_ids())} (see GET /v1/models)",
                "not_found_error",
                param="model",
                code="model_not_found",
            )

    async def read_json(self, request: Request, files: FileRoute | None = None) -> object:
        """The body of a POST, checked for its type and size before and while it is read; with `files`, the
        route whose file parts it may hold, with each file read and in its place as text (only while the queue
        has room: a reading may take a child process a minute, which a request refused anyway should not cost;
        `prepare` checks the queue again, since it may have filled meanwhile)."""
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise E.ApiError(
                415,
                f"send the body as JSON with 'Content-Type: application/json' (got "
                f"{media_type or 'no content type'!r})",
                code="unsupported_media_type",
            )
        text_limit = max_body_bytes(int(self.gateway.model_info().get("max_context") or DEFAULT_CONTEXT))
        limit = text_limit + (FILE_BODY_BYTES if files else 0)
        too_big = E.ApiError(
            413,
            f"the request body is larger than {limit:,} bytes, far more than the model's context window "
            + (f"and {FILE_BODY_BYTES >> 20} MB of files can hold" if files else "can hold"),
            code="request_too_large",
        )
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_big
        body = bytearray()
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise too_big
        try:
            decoded = json.loads(body or b"null")
        except ValueError as error:
            raise E.ApiError(400, f"the request body is not valid JSON ({error})", code="invalid_json") from error
        except RecursionError as error:  # nested thousands deep: hostile, and nothing to log
            raise E.ApiError(
                400, f"the request body is nested more than {S.MAX_JSON_DEPTH} levels deep", code="invalid_json"
            ) from error
        S.check_tree(decoded)
        if files:
            parts = file_parts(decoded, files)
            if len(body) - file_data_bytes(parts) > text_limit:
                raise E.ApiError(
                    413,
                    f"the request body is larger than {text_limit:,} bytes besides its files, far more than the "
                    "model's context window can hold",
                    code="request_too_large",
                )
            if parts:
                self.check_queue()
            await read_file_parts(parts)
        return decoded

    def check_tools(self, parsed: S.CompletionRequest) -> str | None:
        """The model's tool-call format when the request uses tools (or tool messages); a clear 400 for a
        model whose chat template has none."""
        uses_tools = bool(parsed.tools) or any("tool_calls" in m or m["role"] == "tool" for m in parsed.messages)
        fmt = self.gateway.model_info().get("tool_call_format")
        if uses_tools and fmt is None:
            raise E.ApiError(
                400,
                f"the model {self.model_id()!r} has no tool support in its chat template: send the "
                "request without 'tools' and tool messages, or serve a model that has it (Qwen2.5, "
                "Llama 3.1)",
                param="tools",
                code="tools_not_supported",
            )
        return fmt if parsed.tools else None

    def check_queue(self) -> None:
        waiting = self.gateway.health()["requests"]
        if waiting > self.max_queue:
            raise E.QueueFull(waiting, self.gateway.retry_after())

    # -- routes --------------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """200 {"status": "ok"} (or "no_model") when the engine can answer; 503 with the engine's state
        ("loading", "restarting", "down") and a `message` saying what happened when it cannot."""
        self.check_host(request)
        info = self.gateway.model_info()
        engine = self.gateway.engine_health()
        if engine.state != "ready":
            return JSONResponse(
                {
                    "status": engine.state,
                    "message": engine.message,
                    "model": info.get("target"),
                    **self.gateway.health(),
                },
                status_code=503,
                headers={"Retry-After": "5"},
            )
        return JSONResponse(
            {"status": "ok" if info else "no_model", "model": info.get("target"), **self.gateway.health()}
        )

    async def models(self, request: Request) -> Response:
        self.check_host(request)
        self.check_key(request)
        return JSONResponse(R.model_list(self.model_ids(), self.created, self.gateway.model_info()))

    async def model(self, request: Request) -> Response:
        self.check_host(request)
        self.check_key(request)
        asked = request.path_params["model_id"]
        self.check_model(asked or "-")
        return JSONResponse(R.model_card(asked, self.created, self.gateway.model_info()))

    async def chat_completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_chat_request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_completion_request, None)

    def prepare(
        self, parsed: S.CompletionRequest, max_tokens_param: str = "max_tokens"
    ) -> tuple[S.CompletionRequest, str | None]:
        """The checks every answer passes before it is queued; the request with its grammar in place (a forced
        call's, built in the model's own format) and the model's tool-call format (None without tools)."""
        self.check_model(parsed.model)
        context = self.gateway.model_info().get("max_context")
        if parsed.max_tokens is not None and context and parsed.max_tokens > context:
            raise E.ApiError(
                400,
                f"'{max_tokens_param}' is {parsed.max_tokens}, more than the model's whole context "
                f"window of {context} tokens (prompt and answer together): ask for fewer, or leave it "
                "out to answer until the context is full",
                param=max_tokens_param,
                code="invalid_value",
            )
        tool_format = self.check_tools(parsed)
        if parsed.forces_tool_call:  # a grammar for one call in the model's own format
            parsed = dataclasses.replace(
                parsed,
                grammar_kind="lark",
                grammar_source=forced_call_grammar(tool_format, parsed.tools, parsed.forced_tool),
            )
        if parsed.grammar_kind is not None:
            S.check_grammar(
                parsed.grammar_kind, parsed.grammar_source, "tools" if parsed.forces_tool_call else "response_format"
            )
        self.check_queue()
        return parsed, tool_format

    async def _complete(
        self,
        request: Request,
        parse: Callable[[object, S.Defaults], S.CompletionRequest],
        files: FileRoute | None,
    ) -> Response:
        self.check_host(request)
        self.check_key(request)
        parsed, tool_format = self.prepare(parse(await self.read_json(request, files), self.defaults))
        chat = parsed.kind == "chat"
        response_id = R.new_id("chatcmpl" if chat else "cmpl")
        ticket = self.gateway.open(parsed.to_generate(response_id))
        tally = R.RunTally(parsed.method, "messages" if chat else "prompt")
        model = self.model_id()
        progress = Progress()
        watcher = asyncio.create_task(_abandon_on_disconnect(request, ticket))
        try:
            if not parsed.stream:
                await self._drain(ticket, tally, progress)
                if not chat:
                    return JSONResponse(R.text_response(response_id, model, tally))
                content, calls = parse_answer(tally.text, tool_format, parsed.tool_names, parsed.forces_tool_call)
                if not parsed.parallel_tool_calls:
                    calls = calls[:1]
                return JSONResponse(R.chat_response(response_id, model, tally, content, calls))
            first = await self._next_within_keepalive(ticket, tally, progress)
        except BaseException:
            ticket.abandon()
            raise
        finally:
            watcher.cancel()
        next_event = functools.partial(self._next_within_keepalive, ticket, tally, progress)
        return EventStream(
            completion_stream(next_event, tally, parsed, response_id, model, first, progress, tool_format),
            ticket.abandon,
        )

    async def tokenize(self, request: Request) -> Response:
        """POST /tokenize, vLLM's: the tokens the prompt of `messages` (or a plain `prompt`) makes with the
        model's chat template, as an answer reads it, and the context window, so that a client sees whether a
        request fits before it sends it (the app connected to this server counts the message being written
        this way). {"count", "max_model_len"}: no token ids, which are of no use to a client without the
        model's tokenizer."""
        self.check_host(request)
        self.check_key(request)
        parsed = S.parse_tokenize_request(await self.read_json(request, "chat"), self.defaults)
        count = await self._count(parsed, "messages" if parsed.kind == "chat" else "prompt")
        return JSONResponse({"count": count, "max_model_len": self.gateway.model_info().get("max_context") or 0})

    async def chat_input_tokens(self, request: Request) -> Response:
        """POST /v1/chat/completions/input_tokens, llama.cpp's: a whole chat completion body, checked as that
        route checks it, and the tokens its prompt makes, in the shape of OpenAI's input-token count."""
        self.check_host(request)
        self.check_key(request)
        parsed = S.parse_chat_request(await self.read_json(request, "chat"), self.defaults)
        return JSONResponse(R.input_tokens(await self._count(parsed, "messages")))

    async def responses_input_tokens(self, request: Request) -> Response:
        """POST /v1/responses/input_tokens, OpenAI's (the official client's `responses.input_tokens.count`): a
        Responses body, read as /v1/responses reads it, and the tokens its input makes."""
        self.check_host(request)
        self.check_key(request)
        asked = parse_responses_request(await self.read_json(request, "responses"), self.defaults)
        return JSONResponse(R.input_tokens(await self._count(asked.completion, "input")))

    async def _count(self, parsed: S.CompletionRequest, prompt_field: str) -> int:
        """The tokens the prompt of `parsed` makes, as an answer to it reads it (its tools and template
        options included). Answered beside the answer being written, never queued. `prompt_field`: the
        request's field a prompt that cannot fit is blamed on."""
        self.check_model(parsed.model)
        self.check_tools(parsed)
        event = await self.gateway.count(parsed.to_count(R.new_id("tokenize"))).next()
        if not isinstance(event, P.TokenCount):
            assert isinstance(event, P.Error), event  # a count's ticket is never abandoned: it ends with one
            raise E.engine_error(event, self.gateway.model_info().get("max_context"), prompt_field)
        return event.prompt_tokens

    async def responses(self, request: Request) -> Response:
        """POST /v1/responses (core.server.responses): the same engine request as a chat completion, answered
        as Responses output items, whole or as streaming events."""
        self.check_host(request)
        self.check_key(request)
        asked = parse_responses_request(await self.read_json(request, "responses"), self.defaults)
        parsed, tool_format = self.prepare(asked.completion, "max_output_tokens")
        response_id = R.new_id("resp")
        ticket = self.gateway.open(parsed.to_generate(response_id))
        tally = R.RunTally(parsed.method, "input")
        builder = ResponseBuilder(response_id, self.model_id(), asked.echo, R.now())
        progress = Progress()
        watcher = asyncio.create_task(_abandon_on_disconnect(request, ticket))
        try:
            if not parsed.stream:
                await self._drain(ticket, tally, progress)
                builder.reasoning(tally.reasoning)
                reader = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)
                for piece in reader.push(tally.text) + reader.finish():
                    add_piece(builder, piece, parsed)
                builder.finish(tally)
                return JSONResponse(builder.response())
            first = await self._next_within_keepalive(ticket, tally, progress)
        except BaseException:
            ticket.abandon()
            raise
        finally:
            watcher.cancel()
        next_event = functools.partial(self._next_within_keepalive, ticket, tally, progress)
        return EventStream(
            responses_stream(next_event, tally, parsed, builder, first, progress, tool_format), ticket.abandon
        )

    async def _next(self, ticket: Ticket, tally: R.RunTally, progress: Progress) -> P.Event | None:
        """The next event of the request, noted (an Error raises ApiError)."""
        event = await ticket.next()
        if isinstance(event, P.Error):
            raise E.engine_error(event, self.gateway.model_info().get("max_context"), tally.prompt_param)
        if event is not None:
            tally.add(event)
        progress.note(event)
        return event

    async def _drain(self, ticket: Ticket, tally: R.RunTally, progress: Progress) -> None:
        """Read the request's events into `tally` until it is finished (a non-streamed answer)."""
        event = await self._next(ticket, tally, progress)
        while event is not None and not isinstance(event, P.Finished):
            event = await self._next(ticket, tally, progress)

    async def _next_within_keepalive(
        self, ticket: Ticket, tally: R.RunTally, progress: Progress
    ) -> P.Event | None | bool:
        """The next event as `_next` reads it, or False if none came within keepalive_s (the engine is in a
        long pass). Before the stream's headers go out the first such event shows the engine took the request
        (queued behind others, reading the prompt, answering, or done; the stream starts anyway on False);
        once streaming, False is the moment for a keep-alive comment."""
        try:
            return await asyncio.wait_for(self._next(ticket, tally, progress), self.keepalive_s)
        except TimeoutError:
            return False


def create_app(
    gateway: EngineGateway,
    api_key: str | None,
    defaults: S.Defaults | None = None,
    loopback_only: bool = True,
    allowed_origins: tuple[str, ...] = (),
    max_queue: int = DEFAULT_MAX_QUEUE,
    keepalive_s: float = KEEPALIVE_S,
    model_names: tuple[str, ...] = (),
) -> Starlette:
    """The ASGI app serving `gateway`'s engine. allowed_origins: web page origins (e.g.
    "http://localhost:3000", or "*" for any) that may call it from a browser; none by default. model_names: the
    names requests may give the model (none: its own name)."""
    server = OpenAIServer(
        gateway, api_key, defaults or S.Defaults(), loopback_only, max_queue, keepalive_s, model_names
    )

    async def api_error(_request: Request, error: Exception) -> Response:
        assert isinstance(error, E.ApiError)
        headers = {"Retry-After": str(error.retry_after)} if isinstance(error, E.QueueFull) else None
        return error_response(error, headers)

    async def http_error(_request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        return error_response(
            E.ApiError(
                error.status_code,
                f"{error.detail}: {_request.method} {_request.url.path}",
                kind,
                code=str(error.status_code),
            )
        )

    async def server_error(_request: Request, error: Exception) -> Response:
        log.error("the API server failed on %s", _request.url.path, exc_info=error)
        return error_response(E.ApiError(500, f"the server failed: {error}", "server_error", code="internal"))

    routes = [
        Route("/health", server.health, methods=["GET"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", server.model, methods=["GET"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/responses", server.responses, methods=["POST"]),
        Route("/v1/responses/input_tokens", server.responses_input_tokens, methods=["POST"]),
        Route("/v1/chat/completions/input_tokens", server.chat_input_tokens, methods=["POST"]),  # llama.cpp's
        Route("/tokenize", server.tokenize, methods=["POST"]),  # vLLM's, at the root as vLLM serves it
    ]
    middleware = [
        Middleware(OriginGate, allowed_origins=tuple(allowed_origins)),
        Middleware(
            CORSMiddleware,
            allow_origins=list(allowed_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
            allow_private_network=True,
        ),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={E.ApiError: api_error, HTTPException: http_error, Exception: server_error},
    )
    app.state.server = server
    return app
