"""One MCP server, reached through the official `mcp` SDK, from plain threads.

The SDK is asyncio (anyio) code whose transports are context managers that must be entered and left by one
task. Each server therefore gets its own thread running its own event loop, where one task holds the
transport and the ClientSession open until `close`; calls are submitted to that loop from any thread
(`submit` gives a concurrent Future, which a Qt window can watch; `call` waits for it). A server cannot
block another, nor the caller: starting and every call have a timeout, and cancelling a call's Future (the
chat's Stop) cancels the request on the loop, which tells the server.

What a broken server does to it: a command that does not exist or exits at once, or a server that does not
finish the MCP handshake in time, raises ToolServerError with what it wrote to stderr; a call that does not
answer in time, or a server that dies mid-call or writes garbage, gives an error ToolResult in plain words
and the next call starts the server again; a result of megabytes is cut to MAX_RESULT_CHARS for the model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import tempfile
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from core.errors import ToolServerError
from core.tools.config import ServerConfig
from core.tools.server_secrets import resolve_secrets

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # starting a server and the MCP handshake (an npx or uvx server may install itself first)
CALL_TIMEOUT_S = 120.0
MAX_TOOLS = 128  # per server: more would not fit a prompt anyway
MAX_DESCRIPTION_CHARS = 1_024
MAX_SCHEMA_CHARS = 16_384
MAX_RESULT_CHARS = 20_000  # what one result may add to the conversation
STDERR_TAIL_CHARS = 2_000


@dataclass(frozen=True)
class ToolInfo:
    """A tool as its server lists it (description and schema capped, so a server cannot flood the prompt)."""

    server: str
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """What a call gave: its text for the model and the card, whether it is an error (the tool's own, or the
    call's: timeout, server gone), and how many characters were cut off."""

    text: str
    is_error: bool = False
    cut_chars: int = 0


def cap_text(text: str, limit: int = MAX_RESULT_CHARS) -> tuple[str, int]:
    """`text` cut to `limit` characters with a line saying so; (text, characters cut)."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return f"{text[:limit]}\n[... {cut:,} more characters cut: the tool's output was too long]", cut


def _block_text(block: Any) -> str:
    """One content block as text: text as it is, anything else described (images are not shown to a text model)."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind == "resource":
        resource = block.resource
        return getattr(resource, "text", None) or f"[resource {resource.uri} ({resource.mime_type or 'binary'})]"
    if kind == "resource_link":
        return f"[link: {block.uri}]"
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(block, 'mime_type', '') or 'binary'}, {len(getattr(block, 'data', '')) * 3 // 4:,} bytes]"
    return f"[{kind or 'unknown'} content]"


def result_from(result: Any) -> ToolResult:
    """A CallToolResult as a ToolResult: its content blocks joined, else its structured content as JSON."""
    parts = [_block_text(block) for block in (result.content or [])]
    if not parts and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    text, cut = cap_text("\n".join(parts))
    return ToolResult(text, bool(result.is_error), cut)


def tool_info(server: str, tool: Any) -> ToolInfo | None:
    """A listed tool, capped; None when its schema is too big or not an object schema."""
    parameters = tool.input_schema if isinstance(tool.input_schema, dict) else None
    if parameters is None or len(json.dumps(parameters)) > MAX_SCHEMA_CHARS:
        log.warning("MCP server %s: tool %r left out (its parameter schema is missing or too big)", server, tool.name)
        return None
    description = (tool.description or "")[:MAX_DESCRIPTION_CHARS]
    return ToolInfo(server, tool.name, description, parameters)


class ServerConnection:
    """A started MCP server (see the module docstring). Not started by the constructor: call `start`."""

    def __init__(
        self, config: ServerConfig, start_timeout: float = START_TIMEOUT_S, call_timeout: float = CALL_TIMEOUT_S
    ) -> None:
        self.config = config
        self._resolved = config  # with its secrets from the keyring (resolved by start)
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.tools: list[ToolInfo] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._stderr = None
        self._broken = False
        self._closing = False  # close() is ending the server: a call cut off says so
        self._retired = False  # closed by close(): a late call is refused, not a reason to start it again
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._session is not None and not self._broken

    # ------------------------------------------------------------------------------------------------------
    # Starting and stopping

    def start(self) -> list[ToolInfo]:
        """Start the server, finish the handshake and list its tools (blocking, at most start_timeout).

        Raises:
            ToolServerError: it could not be started or did not answer in time (the message says which).
        """
        with self._lock:
            self._close_locked()
            self._retired = False
            self._resolved = resolve_secrets(self.config)
            ready: concurrent.futures.Future = concurrent.futures.Future()
            self._broken = self._closing = False
            if self.config.transport == "stdio":
                self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - open while the server lives; closed by close()
            self._thread = threading.Thread(
                target=self._run, args=(ready,), daemon=True, name=f"mcp-{self.config.name}"
            )
            self._thread.start()
            try:
                self.tools = ready.result(timeout=self.start_timeout + 5)
            except concurrent.futures.TimeoutError:
                self._close_locked()
                raise ToolServerError(
                    f"MCP server {self.config.name!r} did not start within {self.start_timeout:.0f} s",
                    self._stderr_tail(),
                ) from None
            except ToolServerError:
                self._close_locked()
                raise
            return self.tools

    def close(self) -> None:
        """Stop the server (its process ends; an HTTP session is closed) and the loop thread."""
        with self._lock:
            self._retired = True
            self._close_locked()

    def _close_locked(self) -> None:
        loop, stop, thread = self._loop, self._stop, self._thread
        self._closing = True
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop ended meanwhile
                pass
        if thread is not None:
            thread.join(timeout=15)
        self._loop = self._stop = self._thread = self._session = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.flush()
            self._stderr.seek(0, 2)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - STDERR_TAIL_CHARS * 4))
            return self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
        except (OSError, ValueError):
            return ""

    def _run(self, ready: concurrent.futures.Future) -> None:
        try:
            asyncio.run(self._serve(ready))
        except BaseException as error:  # noqa: BLE001 - reported through `ready`, never a dead thread's traceback
            if not ready.done():
                ready.set_exception(self._start_error(error))
        finally:
            self._broken = True

    def _start_error(self, error: BaseException) -> ToolServerError:
        name, config = self.config.name, self.config
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        if isinstance(error, ToolServerError):
            return error
        if isinstance(error, FileNotFoundError) and config.transport == "stdio":
            message = (
                f"MCP server {name!r} could not be started: the program {config.command!r} was not found "
                "(install it, or give its full path)"
            )
        elif isinstance(error, (TimeoutError, asyncio.TimeoutError)):
            message = f"MCP server {name!r} did not finish starting within {self.start_timeout:.0f} s"
        elif config.transport == "http":
            message = f"MCP server {name!r} at {config.url} could not be reached or is not an MCP server ({error})"
        else:
            message = (
                f"MCP server {name!r} ({config.where}) stopped before it was ready ({type(error).__name__}: {error})"
            )
        return ToolServerError(message, self._stderr_tail())

    async def _open_transport(self, stack: AsyncExitStack) -> Any:
        """The transport's (read, write) streams, entered on `stack`."""
        config = self._resolved
        if config.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            parameters = StdioServerParameters(
                command=config.command, args=list(config.args), env=config.env, encoding_error_handler="replace"
            )
            return await stack.enter_async_context(stdio_client(parameters, errlog=self._stderr))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = await stack.enter_async_context(
            create_mcp_http_client(
                headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=self.call_timeout + 5)
            )
        )
        return await stack.enter_async_context(streamable_http_client(config.url, http_client=http))

    async def _serve(self, ready: concurrent.futures.Future) -> None:
        from mcp import ClientSession

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with AsyncExitStack() as stack:
            streams = await self._open_transport(stack)
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            tools = await asyncio.wait_for(self._handshake(session), self.start_timeout)
            self._session = session
            ready.set_result(tools)
            await self._stop.wait()

    async def _handshake(self, session: Any) -> list[ToolInfo]:
        from mcp.types import PaginatedRequestParams

        await session.initialize()
        found: list[ToolInfo] = []
        cursor = None
        while len(found) < MAX_TOOLS:
            listing = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            found += [info for tool in listing.tools if (info := tool_info(self.config.name, tool)) is not None]
            cursor = listing.next_cursor
            if not cursor:
                break
        return found[:MAX_TOOLS]

    # ------------------------------------------------------------------------------------------------------
    # Calls

    def submit(self, tool: str, arguments: dict[str, Any]) -> concurrent.futures.Future:
        """Start a call; the Future gives a ToolResult (never raises: failures are error results). Cancel the
        Future to stop the call. A server that died is started again first."""
        if self._retired:
            return self._done(self._closed_result(tool))
        if not self.alive:
            try:
                self.start()
            except ToolServerError as error:
                return self._done(ToolResult(str(error), is_error=True))
        return asyncio.run_coroutine_threadsafe(self._call(tool, arguments), self._loop)

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """A call, waited for (at most call_timeout, then an error result)."""
        return self.submit(tool, arguments).result()

    async def _call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        from mcp import MCPError

        name = self.config.name
        try:
            result = await asyncio.wait_for(self._session.call_tool(tool, arguments), self.call_timeout)
        except TimeoutError:
            return ToolResult(
                f"the tool {tool!r} on MCP server {name!r} gave no answer within {self.call_timeout:.0f} s",
                is_error=True,
            )
        except MCPError as error:
            if self._closing:
                return self._closed_result(tool)
            if error.code == -32000:  # CONNECTION_CLOSED: the server exited or the connection broke
                self._broken = True
                tail = self._stderr_tail()
                return ToolResult(
                    f"MCP server {name!r} stopped during the call ({error.message})"
                    + (f"; its last words: {tail[-300:]}" if tail else ""),
                    is_error=True,
                )
            return ToolResult(f"MCP server {name!r} refused the call: {error.message}", is_error=True)
        except asyncio.CancelledError:
            if self._closing:  # the loop is ending (close): answered in words, not a bare cancellation
                return self._closed_result(tool)
            raise
        except Exception as error:  # noqa: BLE001 - a malformed answer is the server's fault, reported as such
            if self._closing:
                return self._closed_result(tool)
            return ToolResult(
                f"MCP server {name!r} gave an answer that could not be read "
                f"({type(error).__name__}: {str(error)[:300]})",
                is_error=True,
            )
        return result_from(result)

    @staticmethod
    def _done(result: ToolResult) -> concurrent.futures.Future:
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(result)
        return done

    def _closed_result(self, tool: str) -> ToolResult:
        return ToolResult(
            f"the call of {tool!r} ended: MCP server {self.config.name!r} was stopped "
            "(it was removed or changed in Settings, or the app is closing)",
            is_error=True,
        )
