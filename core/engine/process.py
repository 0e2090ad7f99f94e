"""The engine process: owns the models and runs the generation loop, driven by protocol messages.

`engine_main` is the entry point of the process the client starts (multiprocessing "spawn" context). It
ignores SIGINT (Ctrl-C in a terminal reaches the whole process group; the client decides what Ctrl-C means),
starts a watchdog thread that ends the process within half a second of its parent dying (the parent holds
the write end of a pipe, which closes when it dies, and on POSIX the parent pid changes too), and then serves
requests until Shutdown.

This module imports no torch at module level: the client imports it (to name the process entry point) and
the client must stay light. `Engine` also runs in-process on plain `queue.Queue`s, which is how tests reach
its seams (`fault_hook`).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from core.engine import protocol as P
from core.engine.events import auto_choice_event, error_event, is_user_error
from core.errors import ContextLengthError, InvalidSettingError

WATCH_INTERVAL_S = 0.5  # how often the watchdog checks the parent (the brief: at least every second)
IDLE_POLL_S = 0.5


def _weight_bytes(spec: str | None) -> int:
    """Bytes of a model's weight files when `spec` is a local folder or file (0 when unknown)."""
    if not spec:
        return 0
    path = Path(spec).expanduser()
    try:
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            return sum(p.stat().st_size for p in path.iterdir() if p.suffix in (".safetensors", ".gguf"))
    except OSError:
        pass
    return 0


class _Cancelled(BaseException):
    """Raised inside load progress callbacks when a Shutdown arrives while loading (a BaseException so the
    loader's own error wrapping lets it through)."""


class Engine:
    """The request loop. `requests.get` / `events.put` are the only things it needs from the queues."""

    def __init__(self, requests: Any, events: Any, fault_hook: Callable[[], None] | None = None) -> None:
        self.requests = requests
        self.events = events
        self.fault_hook = fault_hook  # test seam, see core.engine.session.Turn._install_fault_seam
        self.pending: deque[P.Request] = deque()
        self.running = True
        self.state: str = "idle"
        self.load_request: P.Load | None = None
        self.models_info: dict[str, Any] = {}
        self.session = None  # core.engine.session.ChatSession once loaded
        # the most draft tokens per pass: the target's limit when VRAM is short, lowered by out-of-memory retries
        self.budget_cap: int | None = None
        self.current: str | None = None  # request id being generated
        self.cancel_current = False
        self.prepared: dict[str, Any] = {}  # request id -> PreparedPrompt of queued Generates checked on arrival

    # ------------------------------------------------------------------------------------------------------
    # Queue handling

    def emit(self, event: P.Event) -> None:
        self.events.put(event)

    def run(self) -> None:
        while self.running:
            if self.pending:
                self.handle(self.pending.popleft())
                continue
            try:
                message = self.requests.get(timeout=IDLE_POLL_S)
            except queue.Empty:
                continue
            self.accept(message)

    def drain(self) -> None:
        """Take every waiting message without blocking (called between target passes and load steps)."""
        while True:
            try:
                message = self.requests.get_nowait()
            except queue.Empty:
                return
            except (EOFError, OSError):
                return
            self.accept(message)

    def accept(self, message: object) -> None:
        """Validate a message; answer Status/CountTokens/Cancel/Shutdown at once; queue Load/Unload/Generate."""
        try:
            request = P.decode_request(message)
        except P.ProtocolError as error:
            self.emit(
                P.Error(
                    None, "protocol", str(error), f"send messages of core.engine.protocol version {P.PROTOCOL_VERSION}"
                )
            )
            return
        except Exception as error:  # noqa: BLE001 - a message whose attributes blow up when read
            self.emit(P.Error(None, "protocol", f"malformed message: {error!r}", "send core.engine.protocol messages"))
            return
        if isinstance(request, P.Status):
            self.emit(self.status_report())
        elif isinstance(request, P.CountTokens):
            self.count_tokens(request)
        elif isinstance(request, P.Cancel):
            self.cancel(request.request_id)
        elif isinstance(request, P.Shutdown):
            self.running = False
            self.cancel_current = self.current is not None
            for queued in list(self.pending):
                if isinstance(queued, P.Generate):
                    self.emit(P.Finished(queued.request_id, "cancelled"))
            self.pending.clear()
            self.prepared.clear()
        elif isinstance(request, P.Generate) and (
            request.request_id == self.current
            or any(isinstance(q, P.Generate) and q.request_id == request.request_id for q in self.pending)
        ):
            self.emit(
                P.Error(
                    request.request_id,
                    "busy",
                    f"request id {request.request_id!r} is already queued or running",
                    "use a new request id for each Generate",
                )
            )
        elif isinstance(request, P.Generate):
            self.admit(request)
        else:
            self.pending.append(request)

    def admit(self, request: P.Generate) -> None:
        """Queue a Generate, checking its prompt at once when the models it will run on are loaded: a prompt
        that does not fit is refused now, not after the answers ahead of it (an API client gets a plain 400
        instead of an error inside a stream it was kept waiting on). Says its place when others are ahead."""
        if self.session is not None and not any(isinstance(q, (P.Load, P.Unload)) for q in self.pending):
            try:
                self.prepared[request.request_id] = self.prepare(request)
            except Exception as error:  # noqa: BLE001 - a request that cannot be prepared ends with an Error event
                self.emit(error_event(request.request_id, error))
                return
        self.pending.append(request)
        ahead = (self.current is not None) + sum(isinstance(q, P.Generate) for q in self.pending) - 1
        if ahead:
            self.emit(P.Queued(request.request_id, ahead))

    def count_tokens(self, request: P.CountTokens) -> None:
        """Answer a CountTokens with the prompt a Generate of the same messages would read (its oldest messages
        left out as they would be), or an Error (no models, a template that cannot render them). The models
        that count are those loaded now: a client asks again once a Load it sent is done."""
        if self.session is None:
            self.emit(P.Error(request.request_id, "not_loaded", "no model is loaded", "send Load first"))
            return
        try:
            if request.prompt is not None:
                prepared = self.session.prepare_text(request.prompt)
            else:
                prepared = self.prepare_messages(
                    request.messages,
                    request.max_new_tokens,
                    request.trim_context,
                    request.tools,
                    request.chat_template_kwargs,
                )
        except ContextLengthError as error:
            self.emit(P.TokenCount(request.request_id, error.prompt_tokens, fits=False))
        except Exception as error:  # noqa: BLE001 - a count that cannot be made ends with an Error event
            self.emit(error_event(request.request_id, error))
        else:
            self.emit(P.TokenCount(request.request_id, len(prepared.prompt_ids), prepared.dropped_messages))

    def announce_queue(self) -> None:
        """Tell every waiting Generate its new place (the queue moved: one answer started)."""
        waiting = [q for q in self.pending if isinstance(q, P.Generate)]
        for place, queued in enumerate(waiting, start=1):
            self.emit(P.Queued(queued.request_id, place))

    def cancel(self, request_id: str) -> None:
        if request_id == self.current:
            self.cancel_current = True
            return
        for queued in list(self.pending):
            if isinstance(queued, P.Generate) and queued.request_id == request_id:
                self.pending.remove(queued)
                self.prepared.pop(request_id, None)
                self.emit(P.Finished(request_id, "cancelled"))
                return
        # unknown or already finished: nothing to do (cancel races with the end of an answer)

    def status_report(self) -> P.StatusReport:
        state = "generating" if self.current is not None else self.state
        queued = sum(isinstance(q, P.Generate) for q in self.pending)
        return P.StatusReport(state, dict(self.models_info), queued)

    # ------------------------------------------------------------------------------------------------------
    # Requests

    def handle(self, request: P.Request) -> None:
        request_id = getattr(request, "request_id", None)
        try:
            if isinstance(request, P.Load):
                self.load(request)
            elif isinstance(request, P.Unload):
                self.unload()
                self.emit(self.status_report())
            elif isinstance(request, P.Generate):
                self.generate(request)
        except _Cancelled:
            self.unload()
        except Exception as error:  # noqa: BLE001 - the engine lives on; the request ends with an Error
            self.emit(error_event(request_id, error))
            if isinstance(request, P.Load):
                self.unload()
            elif self.session is not None and not is_user_error(error):
                self.session.reset()  # the caches may be half-written
        finally:
            self.current = None
            self.cancel_current = False

    def unload(self) -> None:
        self.session = None
        self.models_info = {}
        self.load_request = None
        self.state = "idle"
        import gc

        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def load(self, request: P.Load) -> None:
        from core.decoding.settings import TreeSettings, resolve_budget
        from core.engine.session import ChatSession
        from core.loading.pair import load_pair
        from core.loading.offload_settings import OffloadSettings, parse_resident_layers
        from core.text.tool_format import tool_call_format
        from core.text.reasoning import thinking_control

        self.unload()
        self.state = "loading"
        self.emit(self.status_report())
        # core.loading.pair loads the draft first, so that the target's default VRAM budget already excludes it.
        roles = ([("draft", request.draft)] if request.draft else []) + [("target", request.target)]
        sizes = [_weight_bytes(spec) for _, spec in roles]
        total = sum(sizes)
        tree_budget = resolve_budget(request.budget, "auto")[0]  # auto: room for the largest it may pick
        # Checked now, not at the first answer: a bad depth or width would otherwise fail only after the load.
        TreeSettings(budget=tree_budget, max_depth=request.max_depth, expand=request.expand)
        offload = OffloadSettings(
            mode=request.offload,
            vram_budget_gb=request.vram_budget_gb,
            resident_layers=parse_resident_layers(str(request.resident_layers)),
            tree_budget=tree_budget,
        )

        def progress_for(role: str, spec: str) -> tuple[Callable[[str], None], Callable[[int, int], None]]:
            index = [name for name, _ in roles].index(role)
            now = {"stage": f"Loading the {role} model {spec}", "share": 0.0}

            def progress(stage: str | None = None, share: float | None = None) -> None:
                """A new step (`stage`) or a new `share` (0..1) of this model's weights read; keeps the other."""
                now["stage"] = stage or now["stage"]
                now["share"] = now["share"] if share is None else share
                if total:  # weighted by file size: a 35 GB target is most of the bar, its draft a sliver
                    done = sum(sizes[:index]) + int(now["share"] * sizes[index])
                    fraction = done / total
                else:
                    done, fraction = 0, (index + now["share"]) / len(roles)
                self.emit(P.LoadProgress(now["stage"], done, total, fraction))
                self.drain()
                if not self.running:
                    raise _Cancelled()

            progress()
            return progress, lambda done, all_bytes: progress(share=done / max(all_bytes, 1))

        target, draft = load_pair(
            request.target,
            request.draft,
            offload=offload,
            dtype=request.dtype,
            device=request.device,
            context_length=request.context_length,
            tree_budget=tree_budget,
            progress_for=progress_for,
            fit_context=request.fit_context,
        )
        self.session = ChatSession(target.lm, draft.lm if draft else None, target.tokenizer)
        self.emit(P.LoadProgress("Measuring this machine's speed", total, total, 1.0))
        self.session.tuner_for(request.max_depth)  # a second or two the first time, then read from the cache
        self.emit(P.LoadProgress("Loaded", total, total, 1.0))
        self.load_request = request
        self.budget_cap = target.lm.max_tree_tokens
        self.models_info = {
            "target": target.lm.name,
            "tool_call_format": tool_call_format(target.tokenizer),
            "thinking": thinking_control(target.tokenizer),
            "draft": draft.lm.name if draft else None,
            "device": str(target.lm.device),
            "dtype": str(target.lm.dtype).removeprefix("torch."),
            "max_context": self.session.context_limit,
            "model_context": self.session.model_context,
            "context_bytes_per_token": self.session.context_bytes_per_token,
            "budget": request.budget
            if request.budget == "auto"
            else min(request.budget, self.budget_cap or request.budget),
            "max_depth": request.max_depth,
            "expand": request.expand,
            "offload": request.offload,
            "vram_budget_gb": request.vram_budget_gb,
            "resident_layers": request.resident_layers,
        }
        self.state = "ready"
        self.emit(self.status_report())

    def generate(self, request: P.Generate) -> None:
        from core.decoding.settings import (
            DecodingSettings,
            SamplingParams,
            TreeSettings,
            overlap_wanted,
            resolve_budget,
        )

        if self.session is None:
            self.emit(P.Error(request.request_id, "not_loaded", "no model is loaded", "send Load first"))
            return
        self.current, self.cancel_current = request.request_id, False
        self.announce_queue()
        prepared = self.prepared.pop(request.request_id, None)
        load = self.load_request
        budget, auto_budget = resolve_budget(
            request.budget if request.budget is not None else load.budget, request.method
        )
        if self.budget_cap is not None:
            budget = min(budget, self.budget_cap)
        params = SamplingParams(
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k,
            repetition_penalty=request.repetition_penalty,
            seed=request.seed,
            presence_penalty=request.presence_penalty,
            frequency_penalty=request.frequency_penalty,
        )
        settings = DecodingSettings(
            method=request.method,
            tree=TreeSettings(
                budget=budget,
                max_depth=load.max_depth,
                expand=load.expand,
                draft_top_p=load.draft_top_p,
                overlap=self.session.draft is not None and overlap_wanted(self.session.draft.device),
            ),
            max_new_tokens=request.max_new_tokens or self.session.context_limit,  # None: the context's end
            stop=tuple(request.stop),
            auto_budget=auto_budget,
        )
        prepared = prepared or self.prepare(request)
        room = min(settings.max_new_tokens, self.session.context_limit - len(prepared.prompt_ids))
        controls = self.output_controls(request, prepared.thinking, room)
        if prepared.dropped_messages:
            self.emit(P.ContextTrimmed(request.request_id, prepared.dropped_messages))
        turn = self.session.turn(
            prepared.prompt_ids,
            params,
            settings,
            request.reuse_cache,
            self.fault_hook,
            request.cache_owner,
            controls,
            prepared.thinking,
        )
        self.emit(P.PromptStarted(request.request_id, len(prepared.prompt_ids), turn.reused_prefix_tokens))
        reason = None
        shown = None  # the last AutoChoice sent
        try:
            for item in turn:
                if hasattr(item, "new_budget"):
                    self.budget_cap = item.new_budget
                    self.emit(P.BudgetReduced(request.request_id, item.old_budget, item.new_budget))
                elif item.choice is not None:
                    if shown is None or (item.choice.config, item.choice.reason) != (shown.config, shown.reason):
                        shown = item.choice
                        self.emit(auto_choice_event(request.request_id, shown))
                    self.emit_chunk(request.request_id, item, shown.config.budget)
                else:
                    self.emit_chunk(
                        request.request_id, item, turn.settings.tree.budget if request.method != "sequential" else 0
                    )
                self.drain()
                if self.cancel_current and turn.finish_reason is None:
                    reason = "cancelled"
                    break
        finally:
            turn.close()
        self.emit(
            P.Finished(
                request.request_id,
                reason or turn.finish_reason or "length",
                prompt_tokens=len(prepared.prompt_ids),
                reused_prefix_tokens=turn.reused_prefix_tokens,
                generated_tokens=len(turn.token_ids)
                - (turn.finish_reason == "eos"),  # the end of turn is no answer token
                draft_reused_prefix_tokens=turn.draft_reused_prefix_tokens,
            )
        )
        if shown is not None and self.session.tuner is not None:  # a tuned answer: keep the speed it saw here
            from core.decoding.autotune.setup import record_expected_speed

            record_expected_speed(self.session.tuner, self.session.target, self.session.draft)

    def output_controls(self, request: P.Generate, thinking: Any = None, room: int | None = None) -> Any:
        """The request's grammar (checked against the target's tokenizer) and log-probabilities, or None. A
        thinking model (`thinking`: the answer's ThinkingFormat) thinks freely before the grammar holds, for
        at most its thinking budget: the request's, or under a grammar half the answer's `room` (tokens)."""
        budget = request.thinking_token_budget if thinking is not None else None
        if budget is None and thinking is not None and request.grammar_kind is not None and room is not None:
            budget = max(room // 2, 0)
        if request.grammar_kind is None and request.top_logprobs is None and budget is None:
            return None
        from core.decoding.constraints import FREE_TEXT, GrammarConstraint, GrammarSpec
        from core.decoding.methods.step import OutputControls

        target = self.session.target
        grammar = None
        if request.grammar_kind is not None or budget is not None:
            spec = GrammarSpec(request.grammar_kind, request.grammar_source) if request.grammar_kind else FREE_TEXT
            grammar = GrammarConstraint(
                spec, self.session.tokenizer, target.vocab_size, tuple(target.eos_token_ids), thinking, budget
            )
        return OutputControls(grammar, request.top_logprobs)

    def prepare(self, request: P.Generate) -> Any:
        """The request's prompt ids after the context policy (a PreparedPrompt); raises what the checks find."""
        if request.prompt is not None:
            return self.session.prepare_text(request.prompt)
        if request.continue_final_message and request.grammar_kind is not None:
            raise InvalidSettingError(
                "an answer cannot be continued under a grammar or response format (it would be read from its "
                "start): ask for a new answer, or continue without the format"
            )
        return self.prepare_messages(
            request.messages,
            request.max_new_tokens,
            request.trim_context,
            request.tools,
            request.chat_template_kwargs,
            request.continue_final_message,
        )

    def prepare_messages(
        self,
        messages: Any,
        max_new_tokens: int | None,
        trim: bool,
        tools: Any,
        template_kwargs: dict[str, Any],
        continue_final: bool = False,
    ) -> Any:
        """A conversation's prompt ids after the context policy (a PreparedPrompt), for Generate and CountTokens
        alike, so that a count is the prompt an answer would be given."""
        from core.text.template_kwargs import check_template_kwargs

        # room kept for the answer when old turns are dropped (no max_new_tokens: a quarter of the context)
        room = max_new_tokens or min(1024, self.session.context_limit // 4)
        return self.session.prepare(
            [dict(m) for m in messages],
            room,
            trim,
            tuple(tools),
            check_template_kwargs(template_kwargs),
            continue_final,
        )

    def logprob_entries(self, logprobs: Any, token_ids: list[int]) -> tuple[dict[str, Any], ...] | None:
        """TokenChunk.logprobs: each token's text and log-probability, with its alternatives'."""
        if logprobs is None:
            return None
        decode = self.session.tokenizer.decode

        def text(token: int) -> str:
            return decode([token])

        from core.decoding.methods.step import reported_logprob

        return tuple(
            {
                "token": text(token),
                "logprob": reported_logprob(entry.logprob),
                "top": [{"token": text(other), "logprob": reported_logprob(value)} for other, value in entry.top],
            }
            for token, entry in zip(token_ids, logprobs)
        )

    def emit_chunk(self, request_id: str, chunk: Any, budget: int) -> None:
        stats = chunk.stats
        seconds = stats.draft_seconds + stats.target_seconds
        entries = self.logprob_entries(chunk.logprobs, chunk.token_ids)
        if entries and chunk.finish_reason == "eos":  # the end-of-turn token is not part of the answer
            entries = entries[:-1]
        self.emit(
            P.TokenChunk(request_id, chunk.text, tuple(chunk.token_ids), time.monotonic(), entries, chunk.reasoning)
        )
        self.emit(
            P.PassStats(
                request_id,
                stats.tokens,
                stats.tree_size,
                1000 * stats.draft_seconds,
                1000 * stats.target_seconds,
                stats.tokens / seconds if seconds > 0 else 0.0,
                budget,
            )
        )


# ----------------------------------------------------------------------------------------------------------
# Process entry point


def _parent_gone(parent_conn: Any, parent_pid: int) -> bool:
    if os.name == "posix" and os.getppid() != parent_pid:
        return True
    try:
        if parent_conn.poll(WATCH_INTERVAL_S):
            parent_conn.recv()  # the parent never sends; data means nothing, EOF means it is gone
    except (EOFError, OSError):
        return True
    return False


def _watch_parent(parent_conn: Any, parent_pid: int) -> None:
    while not _parent_gone(parent_conn, parent_pid):
        pass
    os._exit(3)  # no cleanup: the models die with the process, and nobody is left to read events


def _quiet_progress_bars() -> None:
    """The engine reports its loading progress as LoadProgress events; the libraries' own terminal bars
    (transformers' "Loading weights", "Writing model shards") would only clutter the app's terminal."""
    import huggingface_hub.utils
    import transformers.utils.logging

    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()


def engine_main(
    requests: Any, events: Any, parent_conn: Any, parent_pid: int, torch_threads: int | None = None
) -> None:
    """Entry point of the engine process (see the module docstring). torch_threads: CPU threads for torch
    (None: core.system.threads' default, physical cores minus one)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_conn, parent_pid), name="parent-watch", daemon=True).start()
    from core.system.threads import apply_torch_threads

    apply_torch_threads(torch_threads)
    _quiet_progress_bars()
    events.put(P.EngineStarted(os.getpid()))
    engine = Engine(requests, events)
    try:
        engine.run()
    except BaseException as error:  # noqa: BLE001 - a bug in the loop itself: tell the client, then exit
        try:
            events.put(error_event(None, error))
        finally:
            raise
    if threading.current_thread() is threading.main_thread():
        _end_process(events)


def _end_process(events: Any) -> None:
    """End the process after a Shutdown without Python's teardown, which spends 1-2 s freeing torch's and
    transformers' modules that nothing will use again (every model switch and every quit waited for it).
    What must outlive us goes first: the events already put (the queue's feeder thread is flushed), the log
    handlers and the standard streams (None in the Windows app, which has no console, nor does the engine it
    starts). The system frees memory, page-locked memory and a GPU context as it does for any process that
    ends."""
    import logging

    events.close()
    events.join_thread()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)
