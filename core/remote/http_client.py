"""An OpenAI-compatible HTTP client (httpx2, asyncio): the model list, streamed chat answers, and a prompt's
count where the server offers one (COUNT_ROUTES: vLLM's `POST /tokenize` at the server's root, beside /v1;
llama.cpp's `POST /v1/chat/completions/input_tokens`, with the window from its `GET /props`).

Every way a server can fail becomes one of core.errors' Remote* errors, in plain words: nothing answered
(unreachable), the key was refused, what answered is not an OpenAI-compatible server, the secure connection
failed (TLS), the request was refused, the connection was lost mid-answer. The technical reason stays in the
error's `details`.

Streams are read as server-sent events: comment lines (`: keep-alive`, which `specexec serve` sends while a
request is queued) are skipped and keep the connection counted as alive; the answer ends at `data: [DONE]`,
or, for servers that leave [DONE] out, when the connection closes after a chunk with a finish_reason (or
FINISH_GRACE_S after it, for servers that leave the connection open). A connection that closes before either
is a lost connection, not an answer. Servers that ignore "stream": true and answer with one JSON completion
are read too.

Optional request fields (seed, top_k, repetition_penalty, stream_options) are sent where set; a server that
refuses one by name (a 400 or 422 naming it) is asked again without it, and the field is left out of every
later request to that server (`refused`).

Cancelling the task that reads a stream (Stop) closes its connection, which tells the server to stop.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from core.errors import (
    RemoteDroppedError,
    RemoteError,
    RemoteNotOpenAIError,
    RemoteTLSError,
    RemoteUnreachableError,
)
from core.remote.endpoint import Endpoint
from core.remote.wire import (
    PromptCount,
    RemoteModel,
    StreamPiece,
    decode_body,
    error_from_body,
    parse_chunk,
    parse_input_tokens,
    parse_model_list,
    parse_prompt_count,
    parse_served_context,
    refused_field,
)
from core.system import json_text

CONNECT_TIMEOUT_S = 10.0
# No byte for this long while waiting for an answer: the connection counts as lost. A busy server reading a
# long prompt can be silent for minutes (specexec serve sends keep-alive comments, most servers do not).
IDLE_TIMEOUT_S = 300.0
FINISH_GRACE_S = 2.0
COUNT_TIMEOUT_S = 10.0  # a count is asked while someone types: one that takes longer is of no use
MAX_ERROR_BODY = 64 * 1024
MAX_LIST_BODY = 16 * 1024 * 1024  # a model list, or a count with its token ids (vLLM lists them)
# The ways a server counts a prompt, in the order they are tried: vLLM's, then llama.cpp's.
TOKENIZE, INPUT_TOKENS = "tokenize", "chat/completions/input_tokens"
COUNT_ROUTES = (TOKENIZE, INPUT_TOKENS)
NO_ROUTE = (404, 405)  # what a server answers at an address it does not serve
OPTIONAL_FIELDS = ("stream_options", "seed", "top_k", "repetition_penalty")
USER_AGENT = "SpecExec-Desktop"


def _tls_failure(error: BaseException) -> ssl.SSLError | None:
    """The ssl error somewhere in an exception's chain of causes, if any."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 10:
        if isinstance(current, ssl.SSLError):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def transport_error(error: httpx2.TransportError, endpoint: Endpoint, answering: bool) -> RemoteError:
    """The plain-word error for a failed connection. answering: the server had begun to answer."""
    server, details = endpoint.label, f"{type(error).__name__}: {error}"
    tls = _tls_failure(error)
    if tls is not None:
        reason = getattr(tls, "reason", None) or str(tls)
        if "CERTIFICATE_VERIFY_FAILED" in str(tls) or "certificate" in str(reason).lower():
            return RemoteTLSError(
                f"the secure connection to {server} failed: its certificate is not trusted ({reason})",
                "use a certificate this computer trusts (or set SSL_CERT_FILE to the server's CA file), "
                "or use http:// on a private network",
                details,
            )
        return RemoteTLSError(
            f"the secure connection to {server} failed ({reason})",
            "if the server speaks plain http, write http:// instead of https://",
            details,
        )
    if isinstance(error, (httpx2.ConnectError, httpx2.ConnectTimeout)):
        text = str(error).lower()
        if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
            what = f"the name {endpoint.host!r} is not known on this network"
        elif isinstance(error, httpx2.ConnectTimeout):
            what = f"nothing answered within {CONNECT_TIMEOUT_S:.0f} s"
        else:
            what = "nothing is listening at that address"
        return RemoteUnreachableError(
            f"cannot reach {server} ({endpoint.base_url}): {what}",
            "check that the server is running, the address and port, and the network "
            "or firewall between the two computers",
            details,
        )
    if isinstance(error, httpx2.TimeoutException):
        return RemoteDroppedError(f"{server} sent nothing for {IDLE_TIMEOUT_S:.0f} s", "try again", details)
    if not answering and isinstance(error, (httpx2.RemoteProtocolError, httpx2.ReadError)):
        return RemoteNotOpenAIError(
            f"{server} closed the connection without an HTTP answer",
            "if the server uses https, write https:// (and check the port)",
            details,
        )
    return RemoteDroppedError(f"the connection to {server} was lost", "try again when the server is back", details)


class OpenAICompatibleClient:
    """One server. Use from one asyncio loop; close with `aclose()`."""

    def __init__(
        self, endpoint: Endpoint, connect_timeout: float = CONNECT_TIMEOUT_S, idle_timeout: float = IDLE_TIMEOUT_S
    ) -> None:
        self.endpoint = endpoint
        self.refused: set[str] = set()
        headers = {"User-Agent": USER_AGENT}
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
        self._http = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(idle_timeout, connect=connect_timeout),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _url(self, route: str) -> str:
        return f"{self.endpoint.base_url}/{route}"

    def _root_url(self, route: str) -> str:
        """A route beside the API's /v1 (vLLM serves /tokenize at its root); a base without /v1 takes it as is."""
        return f"{self.endpoint.base_url.removesuffix('/v1')}/{route}"

    async def _read_capped(self, response: httpx2.Response, what: str) -> bytes:
        """The whole body, refused past MAX_LIST_BODY (grown in place: up to 16 MB in many small parts)."""
        raw = bytearray()
        async for part in response.aiter_bytes():
            raw += part
            if len(raw) > MAX_LIST_BODY:
                raise RemoteNotOpenAIError(f"{self.endpoint.label} sent {what} over {MAX_LIST_BODY >> 20} MB")
        return bytes(raw)

    async def _error(self, response: httpx2.Response, route: str) -> tuple[RemoteError, object]:
        """The error for a non-200 answer, and the answer's body (decoded JSON, or text)."""
        raw = b""
        async for part in response.aiter_bytes():
            raw += part
            if len(raw) >= MAX_ERROR_BODY:
                break
        status = response.status_code
        if 300 <= status < 400:
            target = response.headers.get("location", "another address")
            return RemoteNotOpenAIError(
                f"{self.endpoint.label} redirects to {target[:200]}",
                "use the address it redirects to",
                f"HTTP {status}",
            ), ""
        body = decode_body(raw)
        return error_from_body(body, status, self.endpoint.label, bool(self.endpoint.api_key), route), body

    async def list_models(self) -> list[RemoteModel]:
        """GET /models: the models the server offers (RemoteError when it cannot be asked)."""
        raw = await self._small_answer("GET", self._url("models"), "models", "a model list")
        body = decode_body(raw)
        if isinstance(body, str):
            raise RemoteNotOpenAIError(
                f"{self.endpoint.label} answered /models with a page, not the OpenAI API's JSON",
                "check the address: OpenAI-compatible servers usually answer under /v1",
                body[:300],
            )
        return parse_model_list(body, self.endpoint.label)

    async def count_prompt(
        self, model: str, messages: list[dict[str, Any]], options: dict[str, Any], route: str = TOKENIZE
    ) -> PromptCount | None:
        """The prompt `messages` make with the server's chat template, counted by the server on `route` (one of
        COUNT_ROUTES; each counts the prompt with its generation prompt, as an answer reads it); None where
        the server has no such count (no route there, or an answer of another shape). `options`: tools,
        chat_template_kwargs.

        Raises:
            RemoteError: the server could not be asked, or refused the request (a key, a template error).
        """
        if route == TOKENIZE:
            url, parse = self._root_url(TOKENIZE), parse_prompt_count
            body = {"model": model, "messages": messages, "add_generation_prompt": True, **options}
        else:
            url, parse = self._url(INPUT_TOKENS), parse_input_tokens
            body = {"model": model, "messages": messages, **options}
        raw = await self._small_answer("POST", url, route, "a count", body=body, quick=True, absent=NO_ROUTE)
        return None if raw is None else parse(decode_body(raw))

    async def served_context(self) -> int | None:
        """The context window a request gets, where the server says it apart from its model list (llama.cpp's
        GET /props); None where it does not (no such route, or another answer).

        Raises:
            RemoteError: the server could not be asked, or refused the request.
        """
        raw = await self._small_answer(
            "GET", self._root_url("props"), "props", "its properties", quick=True, absent=NO_ROUTE
        )
        return None if raw is None else parse_served_context(decode_body(raw))

    async def _small_answer(
        self,
        method: str,
        url: str,
        route: str,
        what: str,
        *,
        body: dict[str, Any] | None = None,
        quick: bool = False,
        absent: tuple[int, ...] = (),
    ) -> bytes | None:
        """The whole body of a short JSON answer (a model list, a count, properties; at most MAX_LIST_BODY),
        or None where the status is one of `absent` (no such route on this server). `quick`: given
        COUNT_TIMEOUT_S, as anything asked while someone types.

        Raises:
            RemoteError: any other status than 200 (in the words of `route`'s error), or no connection.
        """
        timeout = (
            httpx2.Timeout(COUNT_TIMEOUT_S, connect=self._http.timeout.connect) if quick else httpx2.USE_CLIENT_DEFAULT
        )
        try:
            async with self._http.stream(
                method,
                url,
                json=body,
                headers={"Accept": "application/json"},
                timeout=timeout,
            ) as response:
                if response.status_code in absent:
                    return None
                if response.status_code != 200:
                    raise (await self._error(response, route))[0]
                return await self._read_capped(response, what)
        except httpx2.TransportError as error:
            raise transport_error(error, self.endpoint, answering=False) from error

    async def stream_chat(
        self, model: str, messages: list[dict[str, Any]], options: dict[str, Any]
    ) -> AsyncIterator[StreamPiece]:
        """Stream an answer: StreamPiece items, the last with a finish_reason (and usage when the server
        counts). `options`: OpenAI request fields (temperature, top_p, max_tokens, seed, stop, ...)."""
        body = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **options,
        }
        while True:
            sent = {k: v for k, v in body.items() if k not in self.refused}
            try:
                async with self._http.stream(
                    "POST", self._url("chat/completions"), json=sent, headers={"Accept": "text/event-stream"}
                ) as response:
                    if response.status_code != 200:
                        error, answer = await self._error(response, "chat/completions")
                        if response.status_code in (400, 422):
                            field = refused_field(answer, [k for k in OPTIONAL_FIELDS if k in sent])
                            if field is not None:
                                self.refused.add(field)
                                continue
                        raise error
                    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if kind == "application/json":
                        yield await self._whole_answer(response)
                    elif kind == "text/event-stream":
                        async for piece in self._events(response):
                            yield piece
                    else:
                        raise RemoteNotOpenAIError(
                            f"{self.endpoint.label} answered with {kind or 'an unnamed type'}, not a stream of "
                            "completion chunks",
                            "check that the address is the server's OpenAI-compatible API",
                        )
                    return
            except httpx2.TransportError as error:
                raise transport_error(error, self.endpoint, answering=False) from error

    async def _whole_answer(self, response: httpx2.Response) -> StreamPiece:
        body = decode_body(await response.aread())
        if not isinstance(body, dict):
            raise RemoteNotOpenAIError(f"{self.endpoint.label} answered with something that is not a completion")
        choices = body.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        message = choice.get("message")
        as_chunk = {
            "choices": [
                {
                    "delta": message if isinstance(message, dict) else {},
                    "finish_reason": choice.get("finish_reason") or "stop",
                }
            ],
            "usage": body.get("usage"),
        }
        return parse_chunk(as_chunk)

    async def _events(self, response: httpx2.Response) -> AsyncIterator[StreamPiece]:
        events = httpx2.EventSource(response).__aiter__()
        finished = False
        try:
            while True:
                try:
                    if finished:  # the answer is complete: wait briefly for usage, [DONE] or the end
                        event = await asyncio.wait_for(events.__anext__(), FINISH_GRACE_S)
                    else:
                        event = await events.__anext__()
                except (StopAsyncIteration, asyncio.TimeoutError):
                    break
                data = event.data.strip()
                if data == "[DONE]":
                    return
                if not data:
                    continue
                try:
                    chunk = json_text.loads(data)
                except ValueError:
                    raise RemoteNotOpenAIError(
                        f"{self.endpoint.label} sent a stream line that is not JSON", details=data[:300]
                    ) from None
                piece = parse_chunk(chunk)
                finished = finished or piece.finish_reason is not None
                if piece.text or piece.finish_reason or piece.usage:
                    yield piece
        except httpx2.SSEError as error:
            raise RemoteNotOpenAIError(
                f"{self.endpoint.label} sent a stream event over 1 MB", details=str(error)
            ) from error
        except httpx2.TransportError as error:
            if not finished:
                raise transport_error(error, self.endpoint, answering=True) from error
        finally:
            await events.aclose()
        if not finished:
            raise RemoteDroppedError(
                f"the connection to {self.endpoint.label} closed before the answer was complete",
                "try again when the server is back",
                "the stream ended without [DONE] or a finish_reason",
            )
