"""The API's server-sent event streams: the response that closes its engine request however it ends, the
keep-alive comments that say where a request is, and the two streams built from a request's engine events (chat
and text completions as OpenAI chunks; the Responses API as its named events).

Each stream takes `next_event`, which awaits the request's next engine event (None: abandoned; False: none came
within the keep-alive time; an engine error raises ApiError, which goes into the stream because its headers are
already sent).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from core.engine import protocol as P
from core.server import replies as R
from core.server.api_errors import ApiError
from core.server.requests import CompletionRequest
from core.server.responses import ResponseBuilder, sse_event
from core.text.tool_calls import CallDelta, ToolCallStream

NextEvent = Callable[[], Awaitable[P.Event | None | bool]]


def sse(data: dict[str, Any] | str) -> bytes:
    """One `data:` line of a chat or text completion stream (a chunk, an error body, or "[DONE]")."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


class EventStream(StreamingResponse):
    """A server-sent event stream that closes its body (and with it the engine request) however it ends:
    finished, failed, or cut off by the client."""

    def __init__(self, body: AsyncIterator[bytes], on_close: Callable[[], None]) -> None:
        super().__init__(
            body, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        self._body = body
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()
            await self._body.aclose()  # type: ignore[attr-defined]


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


async def completion_stream(
    next_event: NextEvent,
    tally: R.RunTally,
    parsed: CompletionRequest,
    response_id: str,
    model: str,
    first: P.Event | None | bool,
    progress: Progress,
    tool_format: str | None,
) -> AsyncIterator[bytes]:
    """A chat or text completion's chunks, from the request's first event (False: none yet) to `[DONE]`."""
    chat = parsed.kind == "chat"
    tools = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)  # no format: all content
    calls = 0
    call_ids: dict[int, str] = {}
    logprobs: list[dict] = []  # the tokens' entries not sent yet: they ride on the next piece of text

    def take_logprobs() -> list[dict] | None:
        taken = list(logprobs) if logprobs else None
        logprobs.clear()
        return taken

    def chunk(part: dict[str, Any] | str, finish: str | None = None, extra: dict[str, Any] | None = None) -> bytes:
        build = R.chat_chunk if chat else R.text_chunk
        return sse(build(response_id, model, part, finish, extra, logprobs=take_logprobs()))

    def pieces(text: str, final: bool) -> list[bytes]:
        nonlocal calls
        if not chat:
            return [chunk(text)] if text else []
        out = []
        for piece in tools.push(text) + (tools.finish() if final else []):
            if isinstance(piece, CallDelta):
                if piece.index and not parsed.parallel_tool_calls:
                    continue
                if piece.name is not None:
                    calls += 1
                    call_ids[piece.index] = R.new_id("call")
                out.append(chunk({"tool_calls": [R.tool_call_delta(piece, call_ids[piece.index])]}))
            else:
                out.append(chunk({"content": piece}))
        return out

    if chat:
        yield chunk({"role": "assistant", "content": ""})
    event = first
    while True:
        if isinstance(event, P.TokenChunk):
            logprobs.extend(event.logprobs or ())
            if event.reasoning and chat:  # a thinking model's thinking: never inside `content`
                yield chunk({"reasoning_content": event.reasoning})
            for piece in pieces(event.text, final=False) if event.text else ():
                yield piece
        elif isinstance(event, P.Finished):
            for piece in pieces("", final=True):
                yield piece
            yield chunk({} if chat else "", R.choice_finish_reason(tally.finish_reason, bool(calls)), tally.extra())
            if parsed.include_usage:
                build = R.chat_chunk if chat else R.text_chunk
                yield sse(build(response_id, model, {} if chat else "", usage=tally.usage(), choices=False))
            yield sse("[DONE]")
            return
        elif event is None:  # abandoned: the client is gone
            return
        try:
            event = await next_event()
        except ApiError as error:  # headers are sent: the error goes into the stream
            yield sse(error.body())
            return
        if event is False:
            yield progress.comment()


def add_piece(builder: ResponseBuilder, piece: str | CallDelta, parsed: CompletionRequest) -> list[dict]:
    """Add one piece of the answer (content or a piece of a call) to a Responses answer; its events."""
    if isinstance(piece, CallDelta):
        if piece.index and not parsed.parallel_tool_calls:
            return []
        return builder.call(piece)
    return builder.text(piece)


async def responses_stream(
    next_event: NextEvent,
    tally: R.RunTally,
    parsed: CompletionRequest,
    builder: ResponseBuilder,
    first: P.Event | None | bool,
    progress: Progress,
    tool_format: str | None,
) -> AsyncIterator[bytes]:
    """A Responses answer's named events, from `response.created` to `response.completed` (or the error)."""
    reader = ToolCallStream(tool_format, parsed.tool_names, parsed.forces_tool_call)
    for out in builder.start():
        yield sse_event(out)
    event = first
    while True:
        events: list[dict] = []
        if isinstance(event, P.TokenChunk):
            events += builder.reasoning(event.reasoning)
            for piece in reader.push(event.text) if event.text else ():
                events += add_piece(builder, piece, parsed)
        elif isinstance(event, P.Finished):
            for piece in reader.finish():
                events += add_piece(builder, piece, parsed)
            events += builder.finish(tally)
        elif event is None:  # abandoned: the client is gone
            return
        for out in events:
            yield sse_event(out)
        if isinstance(event, P.Finished):
            return
        try:
            event = await next_event()
        except ApiError as error:  # headers are sent: the error goes into the stream
            yield sse_event(builder.error(error))
            return
        if event is False:
            yield progress.comment()
