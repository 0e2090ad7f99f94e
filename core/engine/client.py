"""The client side of the engine: start, talk to, watch and restart the engine process.

Plain Python (no Qt, no torch): the desktop app drives it from a timer, `specexec chat` from a loop.

    client = EngineClient()
    client.start()                                   # spawns the engine, waits for EngineStarted
    client.load("builtin", "builtin-draft", wait=True)
    rid = client.generate([{"role": "user", "content": "Hi"}], max_new_tokens=64)
    for event in client.iter_request(rid):           # TokenChunk, PassStats, ..., Finished or Error
        ...
    client.shutdown()

A dead engine (crashed, killed, out of host memory) is noticed by `poll` / `events` / `iter_request` within
0.1 s of the call that reads events (the process's liveness is checked between 0.1 s waits on the event
queue) and reported once as Error(kind="engine_died"), which ends every request in flight; `restart()` starts
a new engine and sends the last Load again.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from core.engine import protocol as P
from core.errors import EngineError, LoadDiedError

LIVENESS_INTERVAL_S = 0.1
# what to do when the engine dies while it loads (the CLI's chat and the app's banner say the same)
LOAD_DIED_HINT = "try a smaller model (or a 4-bit one), or close other programs to free memory, then load again"
DEFAULT_START_TIMEOUT_S = 180.0

_ids = itertools.count(1)


def _describe_exit(pid: int | None, exitcode: int | None) -> str:
    if exitcode is None:
        return f"the engine process (pid {pid}) stopped answering"
    if exitcode < 0:
        import signal

        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the engine process (pid {pid}) was killed by {name}"
    return f"the engine process (pid {pid}) exited with code {exitcode}"


def died_while_loading(error: P.Error) -> P.Error:
    """The engine's death (an engine_died Error) during a load, said as the load failure it is, with what to
    try (LOAD_DIED_HINT) instead of "restart it to go on"."""
    return P.Error(
        None,
        "engine_died_loading",
        f"the models could not be loaded: the engine stopped while loading them ({error.message})",
        LOAD_DIED_HINT,
    )


class EngineClient:
    """Owns one engine process at a time. Not thread-safe: use it from one thread."""

    def __init__(self, start_timeout: float = DEFAULT_START_TIMEOUT_S, torch_threads: int | None = None) -> None:
        """torch_threads: CPU threads the engine's torch may use (None: core.system.threads' default, physical
        cores minus one, which leaves a core for the UI or the terminal)."""
        self.start_timeout = start_timeout
        self.torch_threads = torch_threads
        self._ctx = multiprocessing.get_context("spawn")
        self.process: Any = None
        self._requests: Any = None
        self._events: Any = None
        self._lifeline: Any = None  # write end of the pipe whose closing tells the engine we are gone
        self._backlog: deque[P.Event] = deque()
        self._in_flight: set[str] = set()
        self._last_load: P.Load | None = None
        self._closing = False
        self._death_reported = False
        self.engine_pid: int | None = None

    # ------------------------------------------------------------------------------------------------------
    # Lifecycle

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    @property
    def in_flight(self) -> frozenset[str]:
        """Generate requests sent and not yet finished."""
        return frozenset(self._in_flight)

    def start(self, wait: bool = True, timeout: float | None = None) -> None:
        """Spawn the engine. With `wait`, block until it reports EngineStarted (EngineError if it dies or
        takes longer than `timeout`); without, EngineStarted arrives through `poll` like any event."""
        if self.alive:
            return
        from core.engine.process import engine_main  # light: process.py imports torch lazily

        self._close_channels()
        ctx = self._ctx
        lifeline_read, self._lifeline = ctx.Pipe(duplex=False)
        self._requests, self._events = ctx.Queue(), ctx.Queue()
        self._backlog.clear()
        self._in_flight.clear()
        self._closing = self._death_reported = False
        self.engine_pid = None
        self.process = ctx.Process(
            target=engine_main,
            args=(self._requests, self._events, lifeline_read, os.getpid(), self.torch_threads),
            name="specexec-engine",
            daemon=True,  # terminated by multiprocessing's exit handler if we exit without shutdown()
        )
        self.process.start()
        lifeline_read.close()  # only the engine holds the read end
        if wait:
            self._wait_started(self.start_timeout if timeout is None else timeout)

    def wait_started(self, timeout: float | None = None) -> None:
        """Block until the engine of a `start(wait=False)` has reported EngineStarted (EngineError if it dies
        or takes longer than `timeout`, default the start timeout): the caller did other slow work meanwhile."""
        if self.engine_pid is None:
            self._wait_started(self.start_timeout if timeout is None else timeout)

    def _wait_started(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.engine_pid is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                raise EngineError(f"the engine process did not start within {timeout:.0f} s")
            event = self._read(remaining)
            if isinstance(event, P.Error) and event.kind == "engine_died":
                raise EngineError(f"{event.message} while starting")
            if event is not None and not isinstance(event, P.EngineStarted):
                self._backlog.append(event)

    def restart(self, reload: bool = True, wait: bool = True) -> None:
        """Stop the engine (however it is doing) and start a new one; with `reload`, send the last Load
        again (it loads in the background unless wait=True)."""
        self._stop_process(graceful=self.alive)
        self.start(wait=True)
        if reload and self._last_load is not None:
            self._send(self._last_load)
            if wait:
                self.wait_loaded()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Ask the engine to exit, then terminate / kill it if it does not; safe to call twice."""
        self._stop_process(graceful=True, timeout=timeout)
        self._close_channels()

    def __enter__(self) -> "EngineClient":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _stop_process(self, graceful: bool, timeout: float = 5.0) -> None:
        process = self.process
        if process is None:
            return
        self._closing = True
        if graceful and self.engine_pid is not None and process.is_alive():  # one still starting has nothing to save
            try:
                self._requests.put(P.Shutdown())
            except (OSError, ValueError):
                pass
            process.join(timeout)
        self._kill()

    def _kill(self) -> None:
        process = self.process
        if process is None:
            return
        if process.is_alive():
            process.terminate()
            process.join(2.0)
        if process.is_alive():
            process.kill()
            process.join(2.0)
        self._closing = True
        self._in_flight.clear()

    def _close_channels(self) -> None:
        for q in (self._requests, self._events):
            if q is not None:
                q.cancel_join_thread()  # never block our exit on a dead engine's pipe
                q.close()
        if self._lifeline is not None:
            self._lifeline.close()
        self._requests = self._events = self._lifeline = None
        if self.process is not None and not self.process.is_alive():
            self.process.close()
            self.process = None

    # ------------------------------------------------------------------------------------------------------
    # Requests

    def send(self, message: object) -> None:
        """Put any object on the request queue (the typed helpers below are the normal way)."""
        if self._requests is None or not self.alive:
            raise EngineError("the engine is not running: call start() or restart()")
        self._requests.put(message)

    def _send(self, message: P.Request) -> None:
        P.validate(message)
        self.send(message)

    def load(
        self,
        target: str = "builtin",
        draft: str | None = "builtin-draft",
        *,
        wait: bool = False,
        on_progress: Callable[[P.LoadProgress], None] | None = None,
        timeout: float | None = None,
        **settings: Any,
    ) -> P.StatusReport | None:
        """Send Load (settings: Load's fields). With `wait`, block until the models are ready and return the
        StatusReport (EngineError if loading fails)."""
        request = P.Load(target=target, draft=draft, **settings)
        self._send(request)
        self._last_load = request
        return self.wait_loaded(on_progress, timeout) if wait else None

    def wait_loaded(
        self, on_progress: Callable[[P.LoadProgress], None] | None = None, timeout: float | None = None
    ) -> P.StatusReport:
        """Block until the engine reports 'ready'. Other events are kept for `poll`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise EngineError(f"the models did not load within {timeout:.0f} s")
            event = self._read(1.0 if remaining is None else min(remaining, 1.0))
            if event is None:
                continue
            if isinstance(event, P.LoadProgress):
                if on_progress is not None:
                    on_progress(event)
            elif isinstance(event, P.StatusReport) and event.state == "ready":
                return event
            elif isinstance(event, P.Error) and event.request_id is None and event.kind == "engine_died":
                died = died_while_loading(event)
                raise LoadDiedError(died.message)
            elif isinstance(event, P.Error) and event.request_id is None and event.kind != "protocol":
                raise EngineError(f"{event.message}" + (f" ({event.hint})" if event.hint else ""))
            elif not isinstance(event, P.StatusReport):
                self._backlog.append(event)

    def generate(self, messages: list[dict[str, str]], *, request_id: str | None = None, **settings: Any) -> str:
        """Queue an answer to `messages` (settings: Generate's fields); returns its request id."""
        request_id = request_id or f"r{os.getpid()}-{next(_ids)}"
        self._send(P.Generate(request_id=request_id, messages=tuple(dict(m) for m in messages), **settings))
        self._in_flight.add(request_id)
        return request_id

    def count_tokens(self, messages: list[dict[str, Any]], *, request_id: str | None = None, **settings: Any) -> str:
        """Ask how long the prompt of `messages` would be (settings: CountTokens' fields); the TokenCount (or
        Error) carrying the returned request id follows."""
        request_id = request_id or f"c{os.getpid()}-{next(_ids)}"
        self._send(P.CountTokens(request_id=request_id, messages=tuple(dict(m) for m in messages), **settings))
        return request_id

    def cancel(self, request_id: str) -> None:
        self._send(P.Cancel(request_id))

    def status(self) -> None:
        """Ask for a StatusReport (it arrives as an event)."""
        self._send(P.Status())

    def unload(self) -> None:
        self._last_load = None
        self._send(P.Unload())

    # ------------------------------------------------------------------------------------------------------
    # Events

    def _read(self, timeout: float) -> P.Event | None:
        """The next event from the queue within `timeout` s; Error(engine_died) once when the engine is gone."""
        if self._events is None:
            return None
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = deadline - time.monotonic()
            try:
                return self._note(self._events.get(timeout=max(0.0, min(remaining, LIVENESS_INTERVAL_S))))
            except queue.Empty:
                pass
            except (EOFError, OSError):
                break
            if self.process is None or not self.process.is_alive():
                try:  # what it sent before dying comes first
                    return self._note(self._events.get_nowait())
                except (queue.Empty, EOFError, OSError):
                    break
            if remaining <= 0:
                return None
        if self._closing or self._death_reported:
            return None
        self._death_reported = True
        self._in_flight.clear()
        exitcode = self.process.exitcode if self.process is not None else None
        return P.Error(
            None,
            "engine_died",
            _describe_exit(self.engine_pid, exitcode),
            "the engine crashed or was killed (out of memory?); restart it to go on - the conversation is kept",
        )

    def _note(self, event: Any) -> P.Event:
        if isinstance(event, P.EngineStarted):
            self.engine_pid = event.pid
            if event.protocol_version != P.PROTOCOL_VERSION:
                return P.Error(
                    None,
                    "protocol",
                    f"the engine speaks protocol {event.protocol_version}, this client {P.PROTOCOL_VERSION}",
                    "reinstall SpecExec Desktop",
                )
        elif isinstance(event, (P.Finished, P.Error)) and event.request_id is not None:
            self._in_flight.discard(event.request_id)
        return event

    def poll(self, timeout: float = 0.0) -> P.Event | None:
        """The next event, waiting up to `timeout` seconds; None if there is none."""
        if self._backlog:
            return self._backlog.popleft()
        return self._read(timeout)

    def events(self, timeout: float | None = None) -> Iterator[P.Event]:
        """Every event as it arrives; ends when none came for `timeout` seconds (None: never) or after the
        engine's death has been reported."""
        while True:
            event = self.poll(LIVENESS_INTERVAL_S if timeout is None else timeout)
            if event is None:
                if timeout is not None or self._death_reported or self.process is None:
                    return
                continue
            yield event
            if isinstance(event, P.Error) and event.kind == "engine_died":
                return

    def iter_request(self, request_id: str, idle_timeout: float | None = None) -> Iterator[P.Event]:
        """The events of one request, ending with its Finished, TokenCount or Error (or Error(engine_died)). Events of
        other requests are kept for `poll`. TimeoutError after `idle_timeout` s without any event."""
        for event in [e for e in self._backlog if getattr(e, "request_id", None) == request_id]:
            self._backlog.remove(event)
            yield event
            if isinstance(event, (P.Finished, P.TokenCount, P.Error)):
                return
        while True:
            event = self._read(LIVENESS_INTERVAL_S if idle_timeout is None else idle_timeout)
            if event is None:
                if idle_timeout is not None:
                    raise TimeoutError(f"no event for request {request_id} within {idle_timeout} s")
                if self._death_reported or self._events is None:
                    return
                continue
            if isinstance(event, P.Error) and event.kind == "engine_died":
                yield event
                return
            if getattr(event, "request_id", None) != request_id:
                self._backlog.append(event)
                continue
            yield event
            if isinstance(event, (P.Finished, P.TokenCount, P.Error)):
                return
