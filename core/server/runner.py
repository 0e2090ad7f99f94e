"""Running the ASGI app with uvicorn: in the calling thread (`specexec serve`) or in a background thread (the
desktop app, whose main thread runs Qt).

The socket is bound before uvicorn starts, so a port in use or a foreign address is a clear ServerError at
once (not a log line from inside uvicorn) and port 0 picks a free port whose number `url` then shows. It is
not inheritable: a child process the program starts later (a download, the engine) must not keep the port
open after the server closed it. Binding an address other than loopback needs `allow_remote=True`: the
caller has asked the user for it.

When the server stops (Ctrl-C, SIGTERM, `stop()`), `on_stopping` runs first: the caller ends its open
requests there (the gateway sends them a server_stopping error), so open streams end with that error event
instead of being cut off when the graceful-shutdown time runs out.
uvicorn's own logging setup is skipped (log_config=None): its loggers propagate to whatever the program
configured, so the app's log file is left alone.

A connection must finish sending a request's headers within `header_timeout_s` of opening (or of its previous
answer): uvicorn's h11 protocol waits for them forever (its keep-alive timer stops at the first byte), so a
client that sends headers a byte at a time, or never, would hold a connection open for good.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Callable

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from core.errors import ServerError

GRACEFUL_SHUTDOWN_S = 2.0
BACKLOG = 2048  # uvicorn's default
START_TIMEOUT_S = 10.0
HEADER_TIMEOUT_S = 20.0  # for a request's headers (curl and the OpenAI clients send them in one write)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int, allow_remote: bool = False) -> socket.socket:
    """A bound TCP socket on (host, port), not listening yet.

    Raises:
        ServerError: a non-loopback host without allow_remote, a port in use, an address not on this machine.
    """
    if not is_loopback(host) and not allow_remote:
        raise ServerError(
            f"{host} is not a loopback address: anyone on your network could use the model. "
            "Add --allow-remote if that is what you want (and keep the API key on)"
        )
    if not 0 <= port <= 65535:
        raise ServerError(f"port {port} is not a valid port number (0-65535)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        if error.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise ServerError(
                f"port {port} on {host} is already in use (by another program, or another copy "
                "of this server): pick another port"
            ) from error
        raise ServerError(f"cannot listen on {host}:{port} ({error.strerror or error})") from error
    sock.set_inheritable(False)  # the default in Python; said here because it matters (see the module docstring)
    return sock


def header_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers are not complete `seconds` after it
    opened or after its previous answer (a timer that data does not reset: only complete headers stop it)."""

    class HeaderTimeoutProtocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:  # the request's headers are in
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(seconds, self._headers_too_slow)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol


class _Server(uvicorn.Server):
    """uvicorn's server, telling the app that it stops before it waits for open connections."""

    def __init__(self, config: uvicorn.Config, on_stopping: Callable[[], None] | None) -> None:
        super().__init__(config)
        self.on_stopping = on_stopping

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_stopping is not None:
            self.on_stopping()
        await super().shutdown(sockets)


class ApiServer:
    """One uvicorn server on a pre-bound socket. on_stopping: called once the server starts to stop;
    header_timeout_s: how long a connection may take to send a request's headers."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = "127.0.0.1",
        port: int = 8765,
        allow_remote: bool = False,
        access_log: bool = False,
        on_stopping: Callable[[], None] | None = None,
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        self.host = host
        self.socket = bind_socket(host, port, allow_remote)
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=access_log,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            http=header_timeout_protocol(header_timeout_s),
        )
        self.server = _Server(config, on_stopping)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL clients use (OpenAI clients: base_url)."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def listen(self) -> None:
        """Accept connections from now on (they wait in the backlog until uvicorn runs). Call it once the
        server can answer: before, a client is refused at once instead of hanging while the models load."""
        self.socket.listen(BACKLOG)

    def run(self) -> None:
        """Serve in this thread until Ctrl-C / SIGTERM (in the main thread) or `stop()`."""
        self.listen()
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.socket.close()

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Serve in a background thread; return once it accepts connections."""
        self._thread = threading.Thread(target=self.run, name="specexec-api-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise ServerError(f"the API server on {self.url} stopped while starting (see the log)")
            if time.monotonic() > deadline:
                raise ServerError(f"the API server on {self.url} did not start within {timeout:.0f} s")
            time.sleep(0.01)

    def stop(self, timeout: float = GRACEFUL_SHUTDOWN_S + 3.0) -> None:
        """Ask uvicorn to finish (open streams get GRACEFUL_SHUTDOWN_S) and wait for its thread; safe to call
        twice, and before or after `run`."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.socket.close()
