"""RemoteEngine: an OpenAI-compatible server driven like the local engine process (core.engine.connection).

It answers the engine's requests with the engine's events, so the app's bridge and `specexec chat` use it
unchanged:

- `load(model)` lists the server's models (GET /models), checks that `model` is one of them (an empty name
  picks the first) and reports StatusReport("ready") with `models` = {target, draft: None, max_context (the
  server's context window when its model list says, else where llama.cpp's GET /props says, else 0), remote
  (the endpoint's name), url, models (all ids), counts_prompts (whether the server counts a prompt before it
  answers: vLLM's POST /tokenize or llama.cpp's POST /v1/chat/completions/input_tokens, both of which
  `specexec serve` answers too, tried in that order once here)}; a server that cannot be used is an
  Error(request_id=None) of a remote_* kind with a plain message and hint.
- `count_tokens` asks such a server for the prompt's count (TokenCount: nothing is left out, since the server
  drops no message; fits False where the prompt and the answer's max_new_tokens pass its context window, which
  vLLM refuses); a server that does not count answers an Error in words. A count runs beside an answer.
- `generate` streams POST /chat/completions: TokenChunk per piece of text (token_ids empty: servers send
  text; a thinking model's reasoning apart, as the server sends it or, from one that leaves it in the answer
  (vLLM without a reasoning parser, a raw template), read out of a `<think>` block that opens the answer:
  core.text.reasoning.ReasoningSplitter; a continued answer's text is passed on as it comes), then Finished
  (prompt_tokens and generated_tokens from the stream's usage, 0 when the server does not count). Answers
  run one at a time, in order, like the engine's. A refused request ends with Error(request_id) of a remote_*
  kind (or context_length); a lost connection (the server stopped or became unreachable) is Error(None,
  "engine_died") like a dead engine process, which ends every request in flight; `restart()` connects again.
- `cancel` closes the stream (the server sees the client leave and stops); Finished(reason="cancelled").

The HTTP work runs in an asyncio loop on a daemon thread owned by this object; the public methods are meant
for one caller thread, and events reach it through a thread-safe queue read by `poll`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from core.engine import protocol as P
from core.errors import EngineError, RemoteDroppedError, RemoteError, RemoteRejectedError, RemoteUnreachableError
from core.remote.endpoint import Endpoint
from core.remote.http_client import COUNT_ROUTES, CONNECT_TIMEOUT_S, IDLE_TIMEOUT_S, OpenAICompatibleClient
from core.remote.wire import PromptCount
from core.text.reasoning import ReasoningSplitter, ThinkingFormat

log = logging.getLogger(__name__)
_ids = itertools.count(1)
LOST_HINT = "the answer so far is kept; try again when the server is back"
PROMPT_REFUSED = "a remote server is asked with chat messages, not a plain-text prompt"  # an answer's, a count's


def request_options(request: P.Generate) -> dict[str, Any]:
    """The OpenAI fields for a Generate's settings. top_k and repetition_penalty are not OpenAI's own (vLLM,
    SGLang, llama.cpp and `specexec serve` take them), so they are sent only when they change something."""
    options: dict[str, Any] = {"temperature": request.temperature, "top_p": request.top_p, "seed": request.seed}
    if request.max_new_tokens is not None:
        options["max_tokens"] = request.max_new_tokens
    if request.stop:
        options["stop"] = list(request.stop)
    if request.top_k:
        options["top_k"] = request.top_k
    if request.repetition_penalty != 1.0:
        options["repetition_penalty"] = request.repetition_penalty
    for name in ("presence_penalty", "frequency_penalty"):  # OpenAI's own: sent when on
        if getattr(request, name):
            options[name] = getattr(request, name)
    options |= template_options(request.chat_template_kwargs)  # e.g. enable_thinking
    if request.continue_final_message:  # vLLM's and SGLang's fields, and `specexec serve`'s (its 400 if refused)
        options.update(continue_final_message=True, add_generation_prompt=False)
    return options


def wire_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages as a server is sent them: role and content (tool calls and thinking stay here)."""
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def template_options(chat_template_kwargs: dict[str, Any]) -> dict[str, Any]:
    """chat_template_kwargs as a request field (vLLM, SGLang and llama.cpp's server read it), when set."""
    return {"chat_template_kwargs": dict(chat_template_kwargs)} if chat_template_kwargs else {}


def engine_error(error: RemoteError, request_id: str | None) -> P.Error:
    return P.Error(request_id, error.kind, str(error), error.hint)


class RemoteEngine:
    """Talks to one endpoint. Not thread-safe: call it from one thread (events arrive through `poll`)."""

    engine_pid: int | None = None

    def __init__(
        self, endpoint: Endpoint, connect_timeout: float = CONNECT_TIMEOUT_S, idle_timeout: float = IDLE_TIMEOUT_S
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._events: queue.SimpleQueue[P.Event] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: OpenAICompatibleClient | None = None  # used in the loop only
        self._turn: asyncio.Lock | None = None  # one answer at a time, in arrival order (asyncio.Lock is FIFO)
        self._tasks: dict[str, asyncio.Task] = {}  # loop thread only
        self._in_flight: set[str] = set()  # caller thread only
        self._last_load: tuple[str, dict[str, Any]] | None = None
        self._model: str | None = None
        self._info: dict[str, Any] = {}
        self._count_route: str | None = None  # the route the server counts prompts on (COUNT_ROUTES), or None
        self._lost = False

    # -- lifecycle -----------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._lost

    @property
    def in_flight(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    @property
    def refused_settings(self) -> frozenset[str]:
        """Request fields this server refused (left out of later requests)."""
        return frozenset(self._client.refused) if self._client is not None else frozenset()

    def start(self, wait: bool = True, timeout: float | None = None) -> None:
        """Start the HTTP loop thread; nothing is sent yet. As with the engine process, EngineStarted (pid 0:
        there is none) comes through `poll` only when not waiting."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(ready,), name="specexec-remote", daemon=True)
        self._thread.start()
        ready.wait()
        self._call(self._open_client()).result()
        self._lost = False
        if not wait:
            self._events.put(P.EngineStarted(0))

    def _run_loop(self, ready: threading.Event) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()
        loop.close()

    async def _open_client(self) -> None:
        self._turn = asyncio.Lock()
        self._client = OpenAICompatibleClient(self.endpoint, self.connect_timeout, self.idle_timeout)

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        if self._loop is None or self._thread is None or not self._thread.is_alive():
            coroutine.close()
            raise EngineError("the remote connection is not running: call start()")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def restart(self, reload: bool = True, wait: bool = True) -> None:
        """Drop every answer in flight (without events: the caller ends them) and connect again; with
        `reload`, select the last model again (in the background unless `wait`)."""
        if self._thread is None or not self._thread.is_alive():
            self.start()
        else:
            self._call(self._reopen()).result()
            self._in_flight.clear()
            self._lost = False
        if reload and self._last_load is not None:
            target, settings = self._last_load
            self.load(target, None, wait=wait, **settings)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Close the streams (servers see the client leave) and the loop thread; safe to call twice."""
        if self._loop is None or self._thread is None:
            return
        if self._thread.is_alive():
            try:
                self._call(self._close()).result(timeout)
            except (concurrent.futures.TimeoutError, EngineError):
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        self._thread = None
        self._loop = None
        self._in_flight.clear()

    async def _drop_all(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()  # tasks no longer listed end without an event
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _reopen(self) -> None:
        """A new HTTP client: pooled connections to a server that went away are not reused."""
        await self._close()
        await self._open_client()

    async def _close(self) -> None:
        await self._drop_all()
        if self._client is not None:
            await self._client.aclose()

    # -- requests ------------------------------------------------------------------------------------------

    def load(
        self,
        target: str = "",
        draft: str | None = None,
        *,
        wait: bool = False,
        on_progress: Callable[[P.LoadProgress], None] | None = None,
        timeout: float | None = None,
        **settings: Any,
    ) -> P.StatusReport | None:
        """Select the server's model `target` (empty: its first) after checking the server lists it. The
        draft and the local engine's load settings do not apply to a server and are ignored. With `wait`,
        block and return the ready StatusReport (RemoteError when the server cannot be used)."""
        self._last_load = (target, settings)
        progress = P.LoadProgress(f"Connecting to {self.endpoint.label}", fraction=None)
        if wait:
            if on_progress is not None:
                on_progress(progress)
            return self._call(self._connect(target)).result(timeout)
        self._events.put(progress)
        self._call(self._connect_reporting(target))
        return None

    async def _connect(self, target: str) -> P.StatusReport:
        models = await self._client.list_models()
        ids = [m.id for m in models]
        if not models:
            raise RemoteRejectedError(f"{self.endpoint.label} offers no models", "load a model on the server first")
        chosen = next((m for m in models if m.id == target), None) if target else models[0]
        if chosen is None:
            shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            raise RemoteRejectedError(
                f"{self.endpoint.label} has no model {target!r} (it has {shown})",
                "pick one of its models in the model manager",
            )
        self._count_route = await self._count_route_of(chosen.id)
        self._model = chosen.id
        self._info = {
            "target": chosen.id,
            "draft": None,
            "max_context": chosen.context_length or await self._served_context() or 0,
            "remote": self.endpoint.label,
            "url": self.endpoint.base_url,
            "models": ids,
            "device": "remote server",
            "counts_prompts": self._count_route is not None,
        }
        return P.StatusReport("ready", dict(self._info))

    async def _count_route_of(self, model: str) -> str | None:
        """The route the server counts a prompt on (COUNT_ROUTES, tried in order with a one-word message), or
        None: a server that cannot, or fails to, is simply one that does not; the answers go on either way."""
        for route in COUNT_ROUTES:
            try:
                hello = [{"role": "user", "content": "hello"}]
                if await self._client.count_prompt(model, hello, {}, route) is not None:
                    return route
            except RemoteError as error:
                log.info("%s does not count prompts on %s: %s", self.endpoint.label, route, error)
        return None

    async def _served_context(self) -> int | None:
        """The window the server gives a request where its model list says none (llama.cpp's), or None."""
        try:
            return await self._client.served_context()
        except RemoteError as error:
            log.info("%s does not say its context window: %s", self.endpoint.label, error)
            return None

    async def _connect_reporting(self, target: str) -> None:
        try:
            self._events.put(await self._connect(target))
        except RemoteError as error:
            self._events.put(engine_error(error, None))

    def generate(self, messages: list[dict[str, str]], *, request_id: str | None = None, **settings: Any) -> str:
        """Queue an answer (settings: Generate's fields; those only the local engine has are ignored)."""
        request_id = request_id or f"r{os.getpid()}-remote-{next(_ids)}"
        request = P.validate(P.Generate(request_id=request_id, messages=tuple(dict(m) for m in messages), **settings))
        if not self.alive:
            raise EngineError(f"the connection to {self.endpoint.label} is not running: call start() or restart()")
        self._in_flight.add(request_id)
        self._loop.call_soon_threadsafe(self._submit, request)  # in call order with cancel()
        return request_id

    def _submit(self, request: P.Generate) -> None:
        request_id = request.request_id
        if request_id in self._tasks:
            self._events.put(P.Error(request_id, "busy", f"request {request_id} is already queued"))
            return
        self._start_task(request_id, self._stream(request))

    def _start_task(self, request_id: str, work: Coroutine[Any, Any, P.Event | None]) -> None:
        """Run a request's work in the loop; the event it returns ends it (`_ended`)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks[request_id] = task
        task.add_done_callback(lambda done: self._ended(request_id, done))

    def _ended(self, request_id: str, task: asyncio.Task) -> None:
        """Report how a request ended, unless it was dropped meanwhile (restart, shutdown, a lost connection).
        A request cancelled before it began (queued) never ran: it ends here as cancelled."""
        if self._tasks.get(request_id) is not task:
            return
        del self._tasks[request_id]
        ending = P.Finished(request_id, "cancelled") if task.cancelled() else task.result()
        if ending is not None:
            self._events.put(ending)

    def count_tokens(self, messages: list[dict[str, Any]], *, request_id: str | None = None, **settings: Any) -> str:
        """Ask the server to count the prompt (a TokenCount follows), where it can (StatusReport's
        counts_prompts); else an Error in words: its tokenizer is its own, and a guess made here would be taken
        for the server's count."""
        request_id = request_id or f"c{os.getpid()}-remote-{next(_ids)}"
        request = P.validate(
            P.CountTokens(request_id=request_id, messages=tuple(dict(m) for m in messages), **settings)
        )
        if request.prompt is not None:
            self._events.put(P.Error(request_id, "invalid_setting", PROMPT_REFUSED))
        elif not self._info.get("counts_prompts") or not self.alive:
            self._events.put(
                P.Error(
                    request_id,
                    "invalid_setting",
                    f"{self.endpoint.label} does not say how long a message is before it answers",
                    "the server's answer reports the tokens it read",
                )
            )
        else:
            self._loop.call_soon_threadsafe(self._start_task, request_id, self._count(request))
        return request_id

    async def _count(self, request: P.CountTokens) -> P.TokenCount | P.Error:
        """The server's count of the prompt (beside any answer being streamed: no turn is taken)."""
        try:
            counted = await self._client.count_prompt(
                self._model,
                wire_messages(request.messages),
                template_options(request.chat_template_kwargs),
                self._count_route or COUNT_ROUTES[0],
            )
        except RemoteError as error:
            return engine_error(error, request.request_id)
        except Exception as error:  # a bug must end the count, not leave it unanswered
            log.exception("counting a prompt on %s failed", self.endpoint.label)
            return P.Error(request.request_id, "internal", f"{type(error).__name__}: {error}", "see the log")
        if counted is None:
            return P.Error(
                request.request_id,
                "remote_rejected",
                f"{self.endpoint.label} no longer counts a message before it answers",
                "connect to it again",
            )
        return P.TokenCount(request.request_id, counted.tokens, fits=self._fits(counted, request.max_new_tokens))

    def _fits(self, counted: PromptCount, max_new_tokens: int | None) -> bool:
        """Whether the prompt leaves the room the answer asks for (vLLM refuses a request whose prompt and
        max_tokens pass its context window; without max_tokens, one token); True where no window is known."""
        window = counted.context_length or int(self._info.get("max_context") or 0)
        return not window or counted.tokens + (max_new_tokens or 1) <= window

    def cancel(self, request_id: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cancel_task, request_id)

    def _cancel_task(self, request_id: str) -> None:
        task = self._tasks.get(request_id)
        if task is not None:
            task.cancel()

    def status(self) -> None:
        state = "ready" if self._model else "idle"
        self._events.put(P.StatusReport(state, dict(self._info), queued=max(0, len(self._in_flight) - 1)))

    def unload(self) -> None:
        self._model, self._info, self._last_load, self._count_route = None, {}, None, None
        self._events.put(P.StatusReport("idle"))

    async def _stream(self, request: P.Generate) -> P.Finished | P.Error | None:
        """Stream the answer's text as TokenChunk events; the event that ends it (None: connection lost)."""
        request_id = request.request_id
        reason, usage = "cancelled", None
        try:
            async with self._turn:
                if request.prompt is not None:
                    raise RemoteRejectedError(PROMPT_REFUSED)
                if self._model is None:
                    return P.Error(
                        request_id,
                        "not_loaded",
                        "no model is selected on the server",
                        "pick a model in the model manager",
                    )
                messages = wire_messages(request.messages)
                # a block that opens the answer (not a continued one: its first text may be a space)
                splitter = None if request.continue_final_message else ReasoningSplitter(ThinkingFormat())
                async for piece in self._client.stream_chat(self._model, messages, request_options(request)):
                    text, reasoning = piece.text, piece.reasoning
                    if splitter is not None and text:
                        split = splitter.push(text)
                        text, reasoning = split.content, reasoning + split.reasoning
                    self._put_text(request_id, text, reasoning)
                    if piece.usage is not None:
                        usage = piece.usage
                    if piece.finish_reason is not None:
                        reason = "length" if piece.finish_reason == "length" else "eos"
                if splitter is not None:  # what it held back: a marker's possible start, an unclosed block
                    split = splitter.finish()
                    self._put_text(request_id, split.content, split.reasoning)
        except asyncio.CancelledError:
            reason = "cancelled"  # Stop: leaving the `async with` closed the stream, so the server stops too
        except (RemoteDroppedError, RemoteUnreachableError) as error:
            self._connection_lost(error)
            return None
        except RemoteError as error:
            return engine_error(error, request_id)
        except Exception as error:  # a bug must end the request, not leave it hanging
            log.exception("remote request %s failed", request_id)
            return P.Error(request_id, "internal", f"{type(error).__name__}: {error}", "see the log")
        return P.Finished(
            request_id,
            reason,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            generated_tokens=usage.completion_tokens if usage else 0,
        )

    def _put(self, request_id: str, event: P.Event) -> None:
        """Report an event of a request still listed (a dropped one reports nothing more)."""
        if request_id in self._tasks:
            self._events.put(event)

    def _put_text(self, request_id: str, text: str, reasoning: str) -> None:
        """Report a piece of the answer, unless it is empty (the splitter may hold a whole piece back)."""
        if text or reasoning:
            self._put(request_id, P.TokenChunk(request_id, text, (), time.monotonic(), reasoning=reasoning))

    def _connection_lost(self, error: RemoteError) -> None:
        """Report the loss once, like a dead engine process, and drop every other answer."""
        if self._lost:
            return
        self._lost = True
        for task in list(self._tasks.values()):
            if task is not asyncio.current_task():
                task.cancel()
        self._tasks.clear()
        self._events.put(P.Error(None, "engine_died", str(error), LOST_HINT))

    # -- events --------------------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> P.Event | None:
        """The next event, waiting up to `timeout` seconds; None if there is none."""
        try:
            event = self._events.get(timeout=timeout) if timeout > 0 else self._events.get_nowait()
        except queue.Empty:
            return None
        if isinstance(event, (P.Finished, P.Error)):
            if event.request_id is not None:
                self._in_flight.discard(event.request_id)
            elif event.kind == "engine_died":
                self._in_flight.clear()
        return event
