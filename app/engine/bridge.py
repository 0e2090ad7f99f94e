"""The bridge between the Qt UI and the engine process.

`EngineWorker` lives on its own QThread and owns the engine connection (core.engine.connection: the local
engine process's `EngineClient`, or a remote server's `RemoteEngine`; both plain, one-thread clients that
speak the same protocol, so nothing here or in the chat asks which one it has). `connect()` swaps it.
A 30 ms timer in that thread sends what the UI asked for and drains the engine's events, emitting them as
one batch per tick (so the UI gets at most ~33 event signals a second however fast tokens come). Requests
reach the worker through a thread-safe queue and Stop through a locked set checked every tick (never a
queued signal that would wait behind other work); anything the worker raises becomes the `failed` signal,
never a dead thread.

`EngineBridge` lives in the UI thread: it starts the worker, keeps the engine's state (`EngineStatus`),
and re-emits events as typed signals. Nothing here blocks the UI thread except `shutdown()` when the app
quits (bounded by its timeout).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from core.engine import protocol as P
from core.engine.client import EngineClient, died_while_loading
from core.engine.connection import EngineConnection

log = logging.getLogger(__name__)

TICK_MS = 30
MAX_EVENTS_PER_TICK = 5000

# EngineStatus.state values
STOPPED, STARTING, LOADING, IDLE, READY, GENERATING, CRASHED, FAILED = (
    "stopped",
    "starting",
    "loading",
    "idle",
    "ready",
    "generating",
    "crashed",
    "failed",
)


@dataclass(frozen=True)
class EngineStatus:
    """What the UI shows about the engine. state: stopped | starting | loading | idle (no models) | ready |
    generating | crashed (the process died or did not start) | failed (the models did not load)."""

    state: str = STOPPED
    progress: float | None = None  # loading: 0..1 when known
    stage: str = ""  # loading: the engine's step
    message: str = ""  # crashed / failed: what happened
    hint: str = ""  # crashed / failed: what to do
    models: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None

    @property
    def max_context(self) -> int:
        """The tokens of a chat the loaded models keep (the engine's or server's report), 0 while none is known."""
        return int(self.models.get("max_context") or 0)

    def describe(self) -> str:
        if self.state == LOADING and self.stage.startswith("Connecting"):  # a remote server (core.remote.engine)
            return "Connecting"
        if self.state == CRASHED and self.models.get("remote"):
            return "Disconnected"
        if self.state == LOADING:
            percent = f" {self.progress * 100:.0f}%" if self.progress is not None else ""
            return f"Loading models{percent}"
        return {
            STOPPED: "Stopped",
            STARTING: "Starting",
            IDLE: "No model loaded",
            READY: "Ready",
            GENERATING: "Generating",
            CRASHED: "Crashed",
            FAILED: "Models failed to load",
        }.get(self.state, self.state)


def request_settings(request: P.Request, *passed_apart: str) -> dict[str, Any]:
    """A request's fields as the keyword arguments of the connection's method that sends it again (all but
    its version and the `passed_apart` ones, which the method takes by position or name)."""
    left_out = {"version", *passed_apart}
    return {f.name: getattr(request, f.name) for f in dataclasses.fields(request) if f.name not in left_out}


def load_kwargs(load: P.Load) -> dict[str, Any]:
    return request_settings(load, "target", "draft")


class EngineWorker(QObject):
    """Owns the engine connection; runs in the bridge's QThread. Public methods marked thread-safe may be called
    from the UI thread; everything else runs in the worker thread."""

    events = Signal(object)  # list[P.Event], one batch per tick
    failed = Signal(str)  # an exception in the worker, with its traceback
    stopped = Signal()

    def __init__(self, client_factory: Callable[[], EngineConnection], tick_ms: int = TICK_MS) -> None:
        super().__init__()
        self._factory = client_factory
        self._tick_ms = tick_ms
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._cancel_lock = threading.Lock()
        self._cancels: set[str] = set()
        self.client: EngineConnection | None = None
        self._timer: QTimer | None = None

    # -- thread-safe ---------------------------------------------------------------------------------------

    def submit(self, command: str, argument: Any = None) -> None:
        self._commands.put((command, argument))

    def request_cancel(self, request_id: str) -> None:
        with self._cancel_lock:
            self._cancels.add(request_id)

    # -- worker thread -------------------------------------------------------------------------------------

    @Slot()
    def begin(self) -> None:
        """Connected to QThread.started: create the client and the polling timer in this thread."""
        try:
            self.client = self._factory()
        except Exception:  # reported on the first command; the timer still runs so commands get answers
            log.exception("could not create the engine client")
            self.failed.emit(traceback.format_exc())
        self._timer = QTimer(self)
        self._timer.setInterval(self._tick_ms)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    @Slot()
    def _tick(self) -> None:
        batch: list[P.Event] = []
        try:
            self._run_commands(batch)
            self._send_cancels()
            if self.client is not None:
                for _ in range(MAX_EVENTS_PER_TICK):
                    event = self.client.poll(0.0)
                    if event is None:
                        break
                    batch.append(event)
        except Exception:  # noqa: BLE001 - never let the thread die: report and keep ticking
            text = traceback.format_exc()
            log.error("engine worker failed:\n%s", text)
            self.failed.emit(text)
        if batch:
            self.events.emit(batch)

    def _send_cancels(self) -> None:
        with self._cancel_lock:
            cancels, self._cancels = self._cancels, set()
        client = self.client
        for request_id in cancels:
            if client is not None and client.alive:
                client.cancel(request_id)

    def _run_commands(self, batch: list[P.Event]) -> None:
        while True:
            try:
                command, argument = self._commands.get_nowait()
            except queue.Empty:
                return
            client = self.client
            if command == "connect":
                self._connect(client, *argument, batch)
                continue
            if client is None:  # the factory failed in begin()
                request_id = argument.request_id if command in ("generate", "count") else None
                batch.append(
                    P.Error(
                        request_id,
                        "engine_start",
                        "the engine client could not be created",
                        "see the log (Menu > Help > Open logs folder)",
                    )
                )
                if command == "shutdown":
                    QThread.currentThread().quit()
                    return
                continue
            if command == "start":
                self._start(client, argument, batch)
            elif command == "load":
                self._guarded(
                    batch,
                    None,
                    lambda client=client, load=argument: client.load(load.target, load.draft, **load_kwargs(load)),
                )
            elif command in ("generate", "count"):  # a Generate, or a CountTokens
                request: P.Generate | P.CountTokens = argument
                send = client.generate if command == "generate" else client.count_tokens
                settings = request_settings(request, "request_id", "messages")
                self._guarded(
                    batch,
                    request.request_id,
                    lambda send=send, request=request, settings=settings: send(
                        list(request.messages), request_id=request.request_id, **settings
                    ),
                )
            elif command == "status":
                if client.alive:
                    client.status()
            elif command == "restart":
                try:
                    client.restart(reload=True, wait=False)
                    batch.append(P.EngineStarted(client.engine_pid or 0))
                except Exception as error:  # noqa: BLE001 - any failure to restart is reported to the window as an Error
                    batch.append(
                        P.Error(
                            None,
                            "engine_start",
                            f"the engine did not start: {error}",
                            "see the log (Menu > Help > Open logs folder)",
                        )
                    )
            elif command == "shutdown":
                if self._timer is not None:
                    self._timer.stop()
                client.shutdown(timeout=float(argument or 5.0))
                self.stopped.emit()
                thread = QThread.currentThread()
                thread.quit()
                return

    def _connect(
        self, old: EngineConnection | None, factory: Callable[[], EngineConnection], load: P.Load, batch: list[P.Event]
    ) -> None:
        """Replace the engine connection (this computer <-> a remote server): the old one is shut down (a
        local engine process exits and frees its memory), the new one started and given `load`."""
        if old is not None:
            old.shutdown(timeout=5.0)
        self._factory = factory
        try:
            self.client = factory()
        except Exception as error:  # noqa: BLE001 - any failure to connect is reported to the window as an Error
            self.client = None
            batch.append(
                P.Error(
                    None,
                    "engine_start",
                    f"the engine connection could not be made: {error}",
                    "see the log (Menu > Help > Open logs folder)",
                )
            )
            return
        self._start(self.client, load, batch)

    def _start(self, client: EngineConnection, load: P.Load | None, batch: list[P.Event]) -> None:
        """Spawn the engine without waiting for it (EngineStarted comes through poll): a worker blocked for
        the seconds a spawn takes could not stop when the app quits, and Qt aborts on a running QThread."""
        try:
            client.start(wait=False)
        except Exception as error:  # noqa: BLE001 - any failure to spawn is reported to the window as an Error
            batch.append(
                P.Error(
                    None,
                    "engine_start",
                    f"the engine did not start: {error}",
                    "see the log (Menu > Help > Open logs folder)",
                )
            )
            return
        if load is not None:
            self._guarded(batch, None, lambda: client.load(load.target, load.draft, **load_kwargs(load)))

    def _guarded(self, batch: list[P.Event], request_id: str | None, action: Callable[[], Any]) -> None:
        """Run a send; a dead engine or a rejected request becomes an Error event."""
        try:
            action()
        except P.ProtocolError as error:
            batch.append(P.Error(request_id, "invalid_setting", str(error), "check the settings"))
        except Exception as error:  # noqa: BLE001 - a dead engine fails a send with any error: reported as an Error
            batch.append(
                P.Error(
                    request_id,
                    "engine_died",
                    f"the engine is not running ({error})",
                    "restart the engine to go on - the conversation is kept",
                )
            )


class EngineBridge(QObject):
    """UI-thread face of the engine. Signals carry protocol events (frozen dataclasses)."""

    status_changed = Signal(object)  # EngineStatus
    chunk = Signal(object)  # P.TokenChunk: the answer's text and a thinking model's thinking (`reasoning`) apart
    prompt_started = Signal(object)  # P.PromptStarted: the engine reads the prompt (prefill) before answering
    queued = Signal(object)  # P.Queued: a request waits behind `position` others (e.g. the API server's)
    pass_stats = Signal(object)  # P.PassStats
    auto_choice = Signal(object)  # P.AutoChoice: what the automatic method / budget chose, and why
    context_trimmed = Signal(object)  # P.ContextTrimmed: a request's oldest messages were left out to fit
    finished = Signal(object)  # P.Finished
    request_failed = Signal(object)  # P.Error ending one request (kind engine_died when the engine died)
    token_count = Signal(object)  # P.TokenCount answering count_tokens, or the P.Error of a count not made
    engine_failed = Signal(object)  # P.Error for the engine as a whole: died, did not start, load failed
    notice = Signal(str)  # something worth a line in the status bar

    def __init__(
        self,
        client_factory: Callable[[], EngineConnection] | None = None,
        parent: QObject | None = None,
        tick_ms: int = TICK_MS,
    ) -> None:
        super().__init__(parent)
        self._factory = client_factory or EngineClient
        self._tick_ms = tick_ms
        self.status = EngineStatus()
        self.in_flight: set[str] = set()
        self.counting: set[str] = set()  # count_tokens requests not answered yet
        self._load_pending = False
        self._thread: QThread | None = None
        self.worker: EngineWorker | None = None
        # The log folder holding the GPU check's report: an automatic device never uses a GPU that failed it.
        self.gpu_report_dir: Path | None = None

    # -- commands (never block) ----------------------------------------------------------------------------

    def _checked(self, load: P.Load) -> P.Load:
        from app.system.gpu_check import checked_load, read_report

        return checked_load(load, read_report(self.gpu_report_dir))

    def start(self, load: P.Load | None = None) -> None:
        """Start the worker thread and the engine, then load `load` (the UI shows starting / loading n%).
        The engine inherits this process's environment: CUDA graphs off when the GPU check said so."""
        from app.system.gpu_check import apply_graphs_verdict, read_report

        apply_graphs_verdict(read_report(self.gpu_report_dir), os.environ)
        load = self._checked(load) if load is not None else None
        if self._thread is None:
            self._thread = QThread()
            self._thread.setObjectName("engine-bridge")
            self.worker = EngineWorker(self._factory, self._tick_ms)
            self.worker.moveToThread(self._thread)
            self._thread.started.connect(self.worker.begin)
            self.worker.events.connect(self.handle_events)
            self.worker.failed.connect(self._worker_failed)
            self._thread.start()
        self._load_pending = load is not None
        self._set(state=STARTING, progress=None, stage="", message="", hint="")
        self.worker.submit("start", load)

    def load(self, load: P.Load) -> None:
        """Replace the models (the engine queues the Load after any answer in progress)."""
        if self.worker is None:
            self.start(load)
            return
        load = self._checked(load)
        self._load_pending = True
        self._set(state=LOADING, progress=None, stage="Loading models", message="", hint="")
        self.worker.submit("load", load)

    @staticmethod
    def new_request_id() -> str:
        return f"a{uuid.uuid4().hex[:12]}"

    def generate(self, messages: list[dict[str, str]], request_id: str | None = None, **settings: Any) -> str:
        """Queue an answer; returns its request id at once (events follow through the signals). A request
        that cannot be sent ends with `request_failed` (possibly before this returns)."""
        request_id = request_id or self.new_request_id()
        request = P.Generate(request_id=request_id, messages=tuple(dict(m) for m in messages), **settings)
        self.in_flight.add(request_id)
        if self.status.state in (READY, IDLE):
            self._set(state=GENERATING)
        if self.worker is None:
            self._end_request(P.Error(request_id, "engine_died", "the engine is not running", "start it first"))
        else:
            self.worker.submit("generate", request)
        return request_id

    def count_tokens(
        self, messages: list[dict[str, Any]], request_id: str | None = None, **settings: Any
    ) -> str | None:
        """Ask how long the prompt of `messages` would be (settings: CountTokens' fields); its TokenCount, or
        an Error, comes through `token_count`. None (nothing asked) while no engine runs."""
        if self.worker is None:
            return None
        request = P.CountTokens(
            request_id=request_id or f"c{uuid.uuid4().hex[:12]}", messages=tuple(dict(m) for m in messages), **settings
        )
        self.counting.add(request.request_id)
        self.worker.submit("count", request)
        return request.request_id

    def cancel(self, request_id: str) -> None:
        if self.worker is not None:
            self.worker.request_cancel(request_id)

    def connect(self, client_factory: Callable[[], EngineConnection], load: P.Load) -> None:
        """Talk to another engine from now on (this computer's, or a remote server): the answers in flight end
        as interrupted, the old connection is shut down and the new one loads `load`."""
        self._factory = client_factory
        if self.worker is None:
            self.start(load)
            return
        for request_id in list(self.in_flight):
            self._end_request(P.Error(request_id, "engine_died", "the model was switched", ""))
        self._load_pending = True
        self._set(state=STARTING, progress=None, stage="", message="", hint="", pid=None, models={})
        self.worker.submit("connect", (client_factory, load))

    def restart(self) -> None:
        """Start a new engine process and load the last models again (also after a crash; for a remote
        server: connect again)."""
        if self.worker is None:
            return
        for request_id in list(self.in_flight):
            self._end_request(P.Error(request_id, "engine_died", "the engine was restarted", ""))
        self._load_pending = True
        self._set(state=STARTING, progress=None, stage="", message="", hint="", pid=None)
        self.worker.submit("restart")

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the engine and the worker thread (waits up to about `timeout` + 2 s: only when quitting)."""
        thread, worker = self._thread, self.worker
        if thread is None or worker is None:
            return
        worker.submit("shutdown", timeout)
        if not thread.wait(int((timeout + 8.0) * 1000)):  # the client's shutdown: timeout + terminate + kill
            log.warning("the engine worker did not stop in time")  # keep the QThread alive: never destroy it running
            return
        self._thread = None
        self.worker = None
        self.in_flight.clear()
        self.counting.clear()
        self._set(state=STOPPED, pid=None)

    # -- events --------------------------------------------------------------------------------------------

    @Slot(object)
    def handle_events(self, events: list[P.Event]) -> None:
        for event in events:
            try:
                self.handle_event(event)
            except Exception:  # a bug in a slot must not lose the rest of the batch
                log.exception("handling %r failed", event)

    def handle_event(self, event: P.Event) -> None:
        if isinstance(event, P.TokenChunk):
            if event.text or event.reasoning or event.logprobs:
                self.chunk.emit(event)
            if self.status.state == READY:
                self._set(state=GENERATING)
        elif isinstance(event, P.PassStats):
            self.pass_stats.emit(event)
        elif isinstance(event, P.PromptStarted):
            self.prompt_started.emit(event)
        elif isinstance(event, P.Queued):
            self.queued.emit(event)
        elif isinstance(event, P.AutoChoice):
            self.auto_choice.emit(event)
        elif isinstance(event, P.Finished):
            self._end_request(event)
        elif isinstance(event, P.TokenCount) or (isinstance(event, P.Error) and event.request_id in self.counting):
            self.counting.discard(event.request_id)
            self.token_count.emit(event)
        elif isinstance(event, P.Error):
            self._error(event)
        elif isinstance(event, P.EngineStarted):
            log.info("engine started (pid %s)", event.pid)
            if self._load_pending:
                self._set(state=LOADING, progress=0.0, stage="Loading models", pid=event.pid or None)
            else:
                self._set(state=IDLE, pid=event.pid or None)  # 0: a remote server, no process
        elif isinstance(event, P.LoadProgress):
            self._set(state=LOADING, progress=event.fraction, stage=event.stage)
        elif isinstance(event, P.StatusReport):
            self._status_report(event)
        elif isinstance(event, P.ContextTrimmed):  # said by whoever asked (the chat, not for an API client's)
            self.context_trimmed.emit(event)
        elif isinstance(event, P.BudgetReduced):  # engine-wide until the next load: said to the person
            log.warning("out of GPU memory: tree budget %d -> %d", event.old_budget, event.new_budget)
            self.notice.emit(
                "The graphics card ran short of memory, so the draft model now guesses fewer words at a time: "
                "answers may come a little slower until the models are loaded again."
            )

    def _status_report(self, report: P.StatusReport) -> None:
        if report.state == "ready":
            self._load_pending = False
            self._set(
                state=GENERATING if self.in_flight else READY, progress=None, stage="", models=dict(report.models)
            )
        elif report.state == "loading":
            self._set(state=LOADING)
        elif report.state == "generating":
            self._set(state=GENERATING, models=dict(report.models) or self.status.models)
        elif report.state == "idle" and not self._load_pending:
            self._set(state=IDLE, models={})

    def _error(self, error: P.Error) -> None:
        if error.kind == "engine_died" and error.request_id is None and self.status.state == LOADING:
            error = died_while_loading(error)  # a load that failed, with what to try, not a crash to restart from
        if (
            error.kind in ("engine_died", "engine_died_loading") and error.request_id is None
        ) or error.kind == "engine_start":
            log.error("engine %s: %s", error.kind, error.message)
            for request_id in list(self.in_flight):
                self._end_request(P.Error(request_id, "engine_died", error.message, error.hint))
            self.counting.clear()  # never answered: the next count goes to the next engine
            self._set(state=CRASHED, message=error.message, hint=error.hint, progress=None)
            self.engine_failed.emit(error)
        elif error.request_id is not None:
            self._end_request(error)
        elif error.kind == "protocol":
            log.warning("engine protocol error: %s", error.message)
            self.notice.emit(f"Engine: {error.message}")
        else:  # a Load failed (or the engine loop itself); the process may live on without models
            log.error("engine error %s: %s (%s)", error.kind, error.message, error.hint)
            self._load_pending = False
            self._set(state=FAILED, message=error.message, hint=error.hint, progress=None)
            self.engine_failed.emit(error)

    def _end_request(self, event: P.Finished | P.Error) -> None:
        was_in_flight = event.request_id in self.in_flight
        self.in_flight.discard(event.request_id)
        if isinstance(event, P.Finished):
            self.finished.emit(event)
        elif was_in_flight or event.kind != "engine_died":
            self.request_failed.emit(event)
        if not self.in_flight and self.status.state == GENERATING:
            self._set(state=READY)

    @Slot(str)
    def _worker_failed(self, text: str) -> None:
        last = text.strip().splitlines()[-1] if text.strip() else "unknown error"
        self.notice.emit(f"Engine connection error: {last}")

    def _set(self, **changes: Any) -> None:
        status = dataclasses.replace(self.status, **changes)
        if status != self.status:
            self.status = status
            self.status_changed.emit(status)

    # -- for diagnostics -----------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        s = self.status
        info: dict[str, Any] = {"state": s.state, "pid": s.pid, "in flight": len(self.in_flight)}
        if s.message:
            info["last error"] = f"{s.message} ({s.hint})" if s.hint else s.message
        info.update({f"model {k}": v for k, v in s.models.items()})
        return info
