"""The engine port of `specexec serve`: one thread that owns a started, loaded EngineClient.

EngineClient is not thread-safe, so after the command has started the engine and loaded the models (in the
main thread, where loading errors end the command), this thread alone uses it: it sends the requests and
cancels the server asks for (one queue, in order) and hands every event to the gateway. If the engine dies,
every open request ends with an engine_died Error (503) and the engine is restarted with the same models;
requests that arrive meanwhile wait in the engine's queue behind the reload (or get a 503 while no engine
process runs). A restart that fails (the new engine dies while it starts, or before its models are loaded) is
tried again after 1, 2, 4, ... up to RESTART_BACKOFF_MAX_S seconds, for as long as the server runs; until the
models are loaded again, `/health` says "restarting" with what happened (HTTP 503).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from core.engine import protocol as P
from core.engine.client import EngineClient
from core.server.gateway import EngineHealth

log = logging.getLogger(__name__)

POLL_S = 0.02  # longest wait for an engine event before looking at the command queue again
RESTART_BACKOFF_S = 1.0  # the wait before the second try of a restart, doubled after each failed one
RESTART_BACKOFF_MAX_S = 30.0


def restart_delay(failures: int) -> float:
    """Seconds to wait before the next restart after `failures` failed ones in a row (0: at once)."""
    return 0.0 if failures <= 0 else min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2 ** (failures - 1))


class EngineThread:
    """An EnginePort (core.server.gateway) over an EngineClient driven from its own thread."""

    def __init__(self, client: EngineClient) -> None:
        self.client = client
        self._models: dict[str, Any] = {}
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._deliver: Callable[[P.Event], None] = lambda event: None
        self._open: set[str] = set()
        self._stop = threading.Event()
        self._health = EngineHealth()
        self._failures = 0  # restarts in a row that did not get the models loaded again
        self._restart_at: float | None = None  # when the next restart is due (monotonic), if one is
        self._thread = threading.Thread(target=self._run, name="specexec-server-engine", daemon=True)

    # -- EnginePort (any thread) ---------------------------------------------------------------------------

    def attach(self, deliver: Callable[[P.Event], None]) -> None:
        self._deliver = deliver

    def submit(self, request: P.Generate | P.CountTokens) -> None:
        self._commands.put(("send", request))

    def cancel(self, request_id: str) -> None:
        self._commands.put(("cancel", request_id))

    def model_info(self) -> dict[str, Any]:
        return dict(self._models)

    def engine_health(self) -> EngineHealth:
        return self._health

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self, models: dict[str, Any]) -> None:
        """Take over the client (started, models loaded: `models` is its StatusReport.models)."""
        self._models = dict(models)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (the caller then shuts the client down)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._restart_at is not None and time.monotonic() >= self._restart_at:
                    self._restart()
                self._run_commands()
                event = self.client.poll(POLL_S)
                while event is not None:
                    self._handle(event)
                    event = self.client.poll(0.0)
            except Exception:  # never let the thread die with requests waiting on it
                log.exception("the server's engine thread failed; going on")

    def _run_commands(self) -> None:
        while True:
            try:
                command, argument = self._commands.get_nowait()
            except queue.Empty:
                return
            if command == "send":
                self._send(argument)
            elif command == "cancel" and argument in self._open and self.client.alive:
                self.client.cancel(argument)

    def _send(self, request: P.Generate | P.CountTokens) -> None:
        try:
            self.client.send(P.validate(request))
        except P.ProtocolError as error:
            self._deliver(P.Error(request.request_id, "invalid_setting", str(error)))
            return
        except Exception as error:  # noqa: BLE001 - a dead engine fails a send with any error: the client gets an Error
            self._deliver(
                P.Error(
                    request.request_id,
                    "engine_died",
                    f"the engine is not running ({error})",
                    self._health.message or "it is being restarted: try again in a moment",
                )
            )
            return
        self._open.add(request.request_id)

    def _handle(self, event: P.Event) -> None:
        if isinstance(event, P.StatusReport) and event.state == "ready":
            self._models = dict(event.models)
            self._failures, self._health = 0, EngineHealth()
        elif isinstance(event, P.BudgetReduced):
            self._models["budget"] = event.new_budget
        if isinstance(event, (P.Finished, P.Error, P.TokenCount)) and event.request_id is not None:
            self._open.discard(event.request_id)
        if isinstance(event, P.Error) and event.kind == "engine_died" and event.request_id is None:
            self._engine_died(event)
            return
        if isinstance(event, P.Error) and event.request_id is None and self._health.state == "restarting":
            # the reload failed in a live engine: the same models will not load by trying again
            log.error("the engine restarted but could not load the models again: %s", event.message)
            self._health = EngineHealth(
                "down",
                f"the engine restarted but could not load the models again ({event.message}): restart `specexec serve`",
            )
        self._deliver(event)

    def _engine_died(self, error: P.Error) -> None:
        for request_id in sorted(self._open):
            self._deliver(P.Error(request_id, "engine_died", error.message, "the engine is restarting: try again"))
        self._open.clear()
        if self._health.state == "restarting":  # it died again before its models were loaded
            self._failures += 1
        delay = restart_delay(self._failures)
        log.error("%s; restarting the engine%s", error.message, f" in {delay:.0f} s" if delay else "")
        self._restart_later(delay, error.message)

    def _restart_later(self, delay: float, why: str) -> None:
        self._restart_at = time.monotonic() + delay
        wait = f"in about {max(1, round(delay))} s" if delay else "in a moment"
        self._health = EngineHealth(
            "restarting",
            f"{why}; the engine is being restarted: try again {wait}"
            + (f" (restart {self._failures + 1})" if self._failures else ""),
        )

    def _restart(self) -> None:
        """Start a new engine and queue the Load again; a start that fails is tried again later."""
        self._restart_at = None
        try:
            self.client.restart(reload=True, wait=False)  # the Load is queued first: later requests wait for it
        except Exception as error:  # noqa: BLE001 - whatever stopped this try, the next one is due
            self._failures += 1
            delay = restart_delay(self._failures)
            log.error("could not restart the engine (%s); trying again in %.0f s", error, delay)
            self._restart_later(delay, f"the engine could not be restarted ({error})")
