"""The gateway between the API server's event loop and the one engine it shares.

The engine answers Generate requests one at a time, in the order they arrive (each starting from the
conversation it keeps that shares the longest prefix with it), so sending every request straight to the
engine's queue is what serialises them: two clients are both answered, one after the other, never interleaved. The gateway only
routes: each HTTP request opens a `Ticket` in the server's event loop; the engine side (an `EnginePort`,
running in another thread) hands every event to `deliver`, which wakes the ticket's reader with
`call_soon_threadsafe`.

A count of a prompt (CountTokens, the API's /tokenize) opens a ticket too, whose one event is the TokenCount
or an Error: the engine answers it at once, beside the answer it writes, so it is not a request /health counts.

A client that goes away abandons its ticket: the gateway sends Cancel (the engine stops within one target
pass, or drops the request if it was still queued) and counts the request as `cancelling` until the
engine's Finished arrives, so `/health` shows when the engine is free again.

Two ports exist: `core.server.engine_thread.EngineThread` (the `specexec serve` command owns an
EngineClient) and `app.api.server.BridgePort` (the desktop app shares its engine with its chat).
"""

from __future__ import annotations

import asyncio
import math
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from core.engine import protocol as P


@dataclass(frozen=True)
class EngineHealth:
    """Whether the engine can answer, for /health: ready (answers, or queues behind the one it answers), loading
    (its models are on their way), restarting (it died and a new one is on its way), or down (nothing will answer
    until someone acts); `message` says what happened and what to do."""

    state: Literal["ready", "loading", "restarting", "down"] = "ready"
    message: str = ""


class EnginePort(Protocol):
    """The engine side of the gateway. Every method may be called from any thread."""

    def attach(self, deliver: Callable[[P.Event], None]) -> None:
        """Send every engine event of the server's requests to `deliver` (from whatever thread)."""

    def submit(self, request: P.Generate | P.CountTokens) -> None:
        """Queue a Generate in the engine (in call order with `cancel`), or ask it a CountTokens."""

    def cancel(self, request_id: str) -> None:
        """Cancel a running or queued request (in call order with `submit`)."""

    def model_info(self) -> dict[str, Any]:
        """The loaded models (StatusReport.models); empty when none is loaded."""

    def engine_health(self) -> EngineHealth:
        """Whether the engine can answer now."""


class Ticket:
    """One request's events, read in the server's event loop."""

    def __init__(self, gateway: "EngineGateway", request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.gateway = gateway
        self.request_id = request_id
        self.loop = loop
        self.queue: asyncio.Queue[P.Event | None] = asyncio.Queue()
        self.ended = False  # its Finished or Error was read, or it was abandoned

    async def next(self) -> P.Event | None:
        """The next event; None once the ticket was abandoned (the client left)."""
        if self.ended:
            return None
        event = await self.queue.get()
        if event is None or isinstance(event, ENDINGS):
            self.ended = True
        return event

    def abandon(self) -> None:
        """The client is gone: cancel the request in the engine and wake the reader. Safe to call twice and
        after the end."""
        self.gateway._abandon(self)


ENDINGS = (P.Finished, P.Error, P.TokenCount)  # the events after which a request has no more
RECENT_REQUESTS = 8  # how many finished requests the Retry-After estimate averages
DEFAULT_RETRY_AFTER_S = 10


class EngineGateway:
    def __init__(self, port: EnginePort) -> None:
        self.port = port
        self._lock = threading.Lock()
        self._open: dict[str, Ticket] = {}
        self._counts: dict[str, Ticket] = {}  # CountTokens asked: answered at once, not queued
        self._cancelling: set[str] = set()
        self._opened_at: dict[str, float] = {}
        self._durations: deque[float] = deque(maxlen=RECENT_REQUESTS)
        port.attach(self.deliver)

    def open(self, request: P.Generate) -> Ticket:
        """Send `request` to the engine; call from the server's event loop."""
        ticket = Ticket(self, request.request_id, asyncio.get_running_loop())
        with self._lock:
            self._open[request.request_id] = ticket
            self._opened_at[request.request_id] = time.monotonic()
        self.port.submit(request)
        return ticket

    def count(self, request: P.CountTokens) -> Ticket:
        """Ask the engine to count a prompt; the ticket's one event is the TokenCount or an Error. Call from the
        server's event loop."""
        ticket = Ticket(self, request.request_id, asyncio.get_running_loop())
        with self._lock:
            self._counts[request.request_id] = ticket
        self.port.submit(request)
        return ticket

    def retry_after(self) -> int:
        """Seconds until a full queue is likely to have room: the mean time of recent requests (each frees a
        place when it ends), or DEFAULT_RETRY_AFTER_S before any ended."""
        with self._lock:
            recent = list(self._durations)
        return min(300, max(1, math.ceil(statistics.mean(recent)))) if recent else DEFAULT_RETRY_AFTER_S

    def deliver(self, event: P.Event) -> None:
        """Route one engine event to its ticket (any thread). Events of other requests are ignored."""
        request_id = getattr(event, "request_id", None)
        if request_id is None:
            return
        ending = isinstance(event, ENDINGS)
        with self._lock:
            if request_id in self._counts:
                ticket = self._counts.pop(request_id) if ending else None
            elif not ending:
                ticket = self._open.get(request_id)
            else:
                ticket = self._open.pop(request_id, None)
                self._cancelling.discard(request_id)
                opened = self._opened_at.pop(request_id, None)
                if opened is not None:
                    self._durations.append(time.monotonic() - opened)
        if ticket is not None:
            try:
                ticket.loop.call_soon_threadsafe(ticket.queue.put_nowait, event)
            except RuntimeError:  # the server's loop has closed: nobody is left to read it
                pass

    def close(self, message: str = "the server is shutting down") -> None:
        """End every open request with a server_stopping Error and cancel it in the engine (any thread)."""
        with self._lock:
            request_ids, counts = list(self._open), list(self._counts)
        for request_id in request_ids:
            self.port.cancel(request_id)
        for request_id in request_ids + counts:
            self.deliver(P.Error(request_id, "server_stopping", message, "start the server again"))

    def _abandon(self, ticket: Ticket) -> None:
        with self._lock:
            still_open = self._open.pop(ticket.request_id, None) is not None
            if still_open:
                self._cancelling.add(ticket.request_id)
        if still_open:
            self.port.cancel(ticket.request_id)
        if not ticket.ended:
            ticket.loop.call_soon_threadsafe(ticket.queue.put_nowait, None)

    def health(self) -> dict[str, Any]:
        """What /health reports: requests being answered or queued, and abandoned ones still stopping."""
        with self._lock:
            return {"requests": len(self._open), "cancelling": len(self._cancelling)}

    def model_info(self) -> dict[str, Any]:
        return self.port.model_info()

    def engine_health(self) -> EngineHealth:
        return self.port.engine_health()
