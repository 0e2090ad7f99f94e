"""The app's local API server: the OpenAI-compatible server of `specexec serve`, hosted in the app's process
and sharing its engine.

`BridgePort` is the gateway's engine port over the app's EngineBridge: the server's requests go through
`EngineBridge.generate`, the same call the chat makes, so the chat's answers and the server's requests wait
in one engine queue and are never interleaved (and the status bar shows the engine busy while an API client
is answered). It lives in the UI thread; the server's thread reaches it through queued signals, in order.

`ApiServerHost` starts, restarts and stops the server (uvicorn in a background thread) as the settings
change, and says what happened in one line for the status bar.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.engine.bridge import (
    CRASHED,
    FAILED,
    LOADING,
    STARTING,
    STOPPED,
    EngineBridge,
    EngineStatus,
    request_settings,
)
from app.settings.schema import AppSettings
from core.engine import protocol as P
from core.errors import ServerError
from core.server.gateway import EngineHealth

log = logging.getLogger(__name__)

HOST = "127.0.0.1"  # the app serves loopback only; `specexec serve --allow-remote` is the way to share it


class BridgePort(QObject):
    """An EnginePort (core.server.gateway) over the app's EngineBridge. Create it in the UI thread."""

    _submit_requested = Signal(object)
    _cancel_requested = Signal(str)

    def __init__(self, bridge: EngineBridge) -> None:
        super().__init__()
        self.bridge = bridge
        self._deliver: Callable[[P.Event], None] = lambda event: None
        self._closed = False
        self._submit_requested.connect(self._submit)
        self._cancel_requested.connect(self._cancel)
        self._links = (
            (bridge.chunk, self._deliver_event),
            (bridge.prompt_started, self._deliver_event),
            (bridge.queued, self._deliver_event),
            (bridge.pass_stats, self._deliver_event),
            (bridge.auto_choice, self._deliver_event),
            (bridge.finished, self._deliver_event),
            (bridge.request_failed, self._deliver_event),
            (bridge.token_count, self._deliver_event),  # its own counts too: the gateway keeps only the server's
        )
        for signal, slot in self._links:
            signal.connect(slot)

    def detach(self) -> None:
        """Stop listening to the bridge and drop requests still on their way (the server stopped)."""
        self._closed = True
        for signal, slot in self._links:
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass

    # -- EnginePort (any thread) ---------------------------------------------------------------------------

    def attach(self, deliver: Callable[[P.Event], None]) -> None:
        self._deliver = deliver

    def submit(self, request: P.Generate | P.CountTokens) -> None:
        self._submit_requested.emit(request)

    def cancel(self, request_id: str) -> None:
        self._cancel_requested.emit(request_id)

    def model_info(self) -> dict[str, Any]:
        return dict(self.bridge.status.models)

    def engine_health(self) -> EngineHealth:
        return engine_health(self.bridge.status)

    # -- UI thread -----------------------------------------------------------------------------------------

    @Slot(object)
    def _submit(self, request: P.Generate | P.CountTokens) -> None:
        if self._closed:
            return
        settings = request_settings(request, "request_id", "messages")
        if isinstance(request, P.Generate):
            self.bridge.generate(list(request.messages), request_id=request.request_id, **settings)
        elif self.bridge.count_tokens(list(request.messages), request_id=request.request_id, **settings) is None:
            self._deliver(P.Error(request.request_id, "engine_died", "the app's engine is not running", ""))

    @Slot(str)
    def _cancel(self, request_id: str) -> None:
        self.bridge.cancel(request_id)

    @Slot(object)
    def _deliver_event(self, event: P.Event) -> None:
        self._deliver(event)


def engine_health(status: EngineStatus) -> EngineHealth:
    """The app's engine as /health reports it: a crashed or stopped engine is down until the user restarts it
    (the app's banner offers that), one starting or loading is on its way."""
    if status.state in (STARTING, LOADING):
        return EngineHealth("loading", "the model is loading in the app: try again in a moment")
    if status.state in (CRASHED, FAILED, STOPPED):
        what = f": {status.message}" if status.message else ""
        return EngineHealth("down", f"the app's engine is not running{what} (restart it from the app's banner)")
    return EngineHealth()


@dataclass(frozen=True)
class ServerConfig:
    """The settings the running server was started with (a change restarts it)."""

    port: int
    api_key: str | None
    allowed_origins: str = ""

    @staticmethod
    def of(settings: AppSettings) -> "ServerConfig | None":
        if not settings.api_server:
            return None
        key = settings.api_server_key if settings.api_server_require_key else None
        return ServerConfig(settings.api_server_port, key, settings.api_server_allowed_origins)


class ApiServerHost(QObject):
    """Runs the API server while the settings say so."""

    notice = Signal(str)  # a toast: stopped, or why it could not start
    serving = Signal(object)  # its URL while it runs, None once it stopped (the status bar shows it, no toast)

    def __init__(self, bridge: EngineBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.config: ServerConfig | None = None
        self.error = ""
        self._server = None  # core.server.runner.ApiServer while running
        self._app = None  # its Starlette app
        self._gateway = None
        self._port: BridgePort | None = None

    @property
    def url(self) -> str | None:
        """The base URL while the server runs."""
        return self._server.url if self._server is not None else None

    def apply(self, settings: AppSettings) -> None:
        """Start, restart or stop the server to match `settings` (request defaults follow them too)."""
        config = ServerConfig.of(settings)
        if config == self.config and self._server is not None:
            self._app.state.server.defaults = self._defaults(settings)
            return
        self.stop(quiet=config is not None)
        if config is None:
            return
        if settings.api_server_require_key and not settings.api_server_key:
            self.error = "the API server needs a key: open Menu > Settings to make one (or turn the key off)"
            self.notice.emit(f"API server not started: {self.error}")
            return
        self._start(config, settings)

    def _defaults(self, settings: AppSettings):
        from core.server.requests import Defaults

        conversation = settings.conversation_defaults()
        return Defaults(
            temperature=conversation.temperature,
            top_p=conversation.top_p,
            max_tokens=conversation.max_tokens,
            method=conversation.decoding_method(bool(settings.draft)),
        )

    def _start(self, config: ServerConfig, settings: AppSettings) -> None:
        from core.server.api import create_app
        from core.server.gateway import EngineGateway
        from core.server.origins import parse_origins
        from core.server.runner import ApiServer

        port = BridgePort(self.bridge)
        gateway = EngineGateway(port)
        try:
            app = create_app(
                gateway,
                config.api_key,
                self._defaults(settings),
                loopback_only=True,
                allowed_origins=parse_origins(config.allowed_origins),
            )
            server = ApiServer(app, HOST, config.port)
            server.start()
        except ServerError as error:
            port.detach()
            self.error = str(error)
            log.warning("API server not started: %s", error)
            self.notice.emit(f"API server not started: {error}")
            return
        self._server, self._app, self._gateway, self._port = server, app, gateway, port
        self.config, self.error = config, ""
        log.info("API server listening on %s", server.url)
        self.serving.emit(server.url)

    def stop(self, quiet: bool = False) -> None:
        """End open requests, stop the server and wait for its thread (a few seconds at most)."""
        if self._server is None:
            self.config = None
            return
        self._gateway.close("the app turned its API server off")
        self._server.stop()
        self._port.detach()
        self._server = self._app = self._gateway = self._port = self.config = None
        log.info("API server stopped")
        self.serving.emit(None)
        if not quiet:
            self.notice.emit("API server stopped")
