"""The OpenAI-compatible HTTP API as a Starlette (ASGI) app.

Routes: GET /v1/models, POST /v1/chat/completions, POST /v1/completions (both streaming with server-sent
events when the body says "stream": true), and GET /health (no key needed; says whether the engine is busy).

Every /v1 route needs `Authorization: Bearer <key>` unless the server was started without a key. When the
server listens on a loopback address only, requests must also be addressed to a loopback host name: a web
page cannot reach it through DNS rebinding. Errors use OpenAI's format, {"error": {"message", "type",
"param", "code"}}, with the matching HTTP status.

A streamed request waits for its first engine event before answering, so an error the engine finds before
generating (the prompt does not fit the context) is a plain 400, not an error inside a 200 stream. A client
that disconnects cancels its request (streaming: Starlette cancels the body; not streaming: a watcher task
sees the disconnect).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from core.engine import protocol as P
from core.server import schemas as S
from core.server.gateway import EngineGateway, Ticket
from core.server.keys import key_matches

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


def error_response(error: S.ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


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


async def _abandon_on_disconnect(request: Request, ticket: Ticket) -> None:
    """Wait for the client to disconnect, then abandon its ticket (runs while a request is answered)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            ticket.abandon()
            return


class OpenAIServer:
    """The routes and their state. `gateway`: the shared engine; `api_key` None: no key required;
    `loopback_only`: refuse requests addressed to a host name that is not this machine's loopback."""

    def __init__(self, gateway: EngineGateway, api_key: str | None, defaults: S.Defaults,
                 loopback_only: bool = True) -> None:
        self.gateway = gateway
        self.api_key = api_key
        self.defaults = defaults
        self.loopback_only = loopback_only
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
            raise S.ApiError(401, "no API key: send it as 'Authorization: Bearer <key>' (the key is shown by "
                             "`specexec serve` and in the app's settings)", code="missing_api_key")
        if not key_matches(given.strip(), self.api_key):
            raise S.ApiError(401, "incorrect API key", code="invalid_api_key")

    def model_id(self) -> str:
        info = self.gateway.model_info()
        return str(info.get("target") or "specexec")

    # -- routes --------------------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        self.check_host(request)
        info = self.gateway.model_info()
        return JSONResponse({"status": "ok" if info else "no_model", "model": info.get("target"),
                             **self.gateway.health()})

    async def models(self, request: Request) -> Response:
        self.check_host(request)
        self.check_key(request)
        return JSONResponse(S.model_list(self.model_id(), self.created, self.gateway.model_info()))

    async def chat_completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_chat_request)

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, S.parse_completion_request)

    async def _complete(self, request: Request, parse: Callable[[object, S.Defaults], S.CompletionRequest]) -> Response:
        self.check_host(request)
        self.check_key(request)
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError as error:
            raise S.ApiError(400, f"the request body is not valid JSON ({error})", code="invalid_json") from error
        parsed = parse(body, self.defaults)
        chat = parsed.kind == "chat"
        response_id = S.new_id("chatcmpl" if chat else "cmpl")
        ticket = self.gateway.open(parsed.to_generate(response_id))
        tally = S.RunTally(parsed.method)
        model = self.model_id()
        watcher = asyncio.create_task(_abandon_on_disconnect(request, ticket))
        try:
            first = await self._next_content_event(ticket, tally)
            if not parsed.stream:
                event = first
                while event is not None and not isinstance(event, P.Finished):
                    event = await ticket.next()
                    self._check(event, tally)
                build = S.chat_response if chat else S.text_response
                return JSONResponse(build(response_id, model, tally))
        except BaseException:
            ticket.abandon()
            raise
        finally:
            watcher.cancel()
        return EventStream(self._stream(ticket, tally, parsed, response_id, model, first), ticket.abandon)

    async def _next_content_event(self, ticket: Ticket, tally: S.RunTally) -> P.Event | None:
        """The first event that carries text or ends the request (an Error raises ApiError)."""
        while True:
            event = await ticket.next()
            self._check(event, tally)
            if event is None or isinstance(event, P.Finished) or (isinstance(event, P.TokenChunk) and event.text):
                return event

    @staticmethod
    def _check(event: P.Event | None, tally: S.RunTally) -> None:
        if isinstance(event, P.Error):
            raise S.engine_error(event)
        if event is not None:
            tally.add(event)

    async def _stream(self, ticket: Ticket, tally: S.RunTally, parsed: S.CompletionRequest, response_id: str,
                      model: str, first: P.Event | None) -> AsyncIterator[bytes]:
        chat = parsed.kind == "chat"
        if chat:
            yield _sse(S.chat_chunk(response_id, model, {"role": "assistant", "content": ""}))
        event = first
        while event is not None:
            if isinstance(event, P.TokenChunk) and event.text:
                piece = S.chat_chunk(response_id, model, {"content": event.text}) if chat else \
                    S.text_chunk(response_id, model, event.text)
                yield _sse(piece)
            elif isinstance(event, P.Finished):
                reason = S.finish_reason(event.reason)
                extra = tally.extra()
                yield _sse(S.chat_chunk(response_id, model, {}, reason, extra) if chat else
                           S.text_chunk(response_id, model, "", reason, extra))
                if parsed.include_usage:
                    build = S.chat_chunk if chat else S.text_chunk
                    yield _sse(build(response_id, model, {} if chat else "", usage=tally.usage(), choices=False))
                yield _sse("[DONE]")
                return
            try:
                event = await ticket.next()
                self._check(event, tally)
            except S.ApiError as error:  # headers are sent: the error goes into the stream
                yield _sse(error.body())
                return


def create_app(gateway: EngineGateway, api_key: str | None, defaults: S.Defaults | None = None,
               loopback_only: bool = True) -> Starlette:
    """The ASGI app serving `gateway`'s engine."""
    server = OpenAIServer(gateway, api_key, defaults or S.Defaults(), loopback_only)

    async def api_error(_request: Request, error: Exception) -> Response:
        assert isinstance(error, S.ApiError)
        return error_response(error)

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
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={S.ApiError: api_error, HTTPException: http_error,
                                                       Exception: server_error})
    app.state.server = server
    return app
