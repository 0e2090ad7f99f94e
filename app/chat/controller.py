"""The chat logic between the widgets, the store and the engine bridge (no widgets here).

One answer streams at a time. Its tokens collect in a buffer that a 33 ms timer moves into the message model
(at most ~30 view updates a second however fast the engine is); a 500 ms timer writes the text so far to
SQLite (status "streaming"), and the end of the answer writes it once more with its final status:
complete, stopped (Stop; the partial answer is kept), interrupted (the engine died; kept too) or error.
When the disk is full the answer still ends and is shown; its final fields wait in `unsaved` and are written
every RETRY_SAVE_MS until there is room again, and the person is told both times; a message that cannot be
saved is not sent (it stays in the input).

A thinking model's thinking (TokenChunk.reasoning) collects apart from the answer, into Message.reasoning; how
long it thought, from its first thought to the answer's first word (or to the end of an answer cut off while
thinking), goes into the answer's stats as `thinking_seconds` (`thinking_started_at`, a time.time(), while it
thinks). Earlier answers go back to the model with their thinking as `reasoning_content`, for the chat
template to keep or drop as the model expects (Qwen3's and DeepSeek-R1's drop it; a remote server gets the
answers alone). A chat's Think switch reaches a model whose template can turn thinking off as
chat_template_kwargs {"enable_thinking": ...}.

Tools (issue 43): when the window was given a Toolbox (MCP servers, core.tools) and the model's template has a
tool format, every answer is offered the tools. An answer that ends with calls (read by core.tools.loop, the
API server's parser) keeps the words before them and the calls as a round of the message's `tool_rounds`;
each call waits for the user's decision (`decide`: once, always for this tool in this chat, deny) unless it
was allowed always, runs on the toolbox's thread, and its result comes back through a queued signal; once
the round's calls are done the model answers again into the same message, until it answers without a call or
MAX_ROUNDS rounds ran (the note says so). Stop ends a running tool or an open question too. A tool's output
only ever becomes a tool message: it cannot decide a call or change a setting.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chat import tool_turns as T
from app.conversations import store as S
from app.chat.active_answer import ActiveAnswer
from app.chat.answer_stats import AnswerStats
from app.chat.context_room import could_not_run, room_for, too_long_hint
from app.chat.message_words import unfinished
from app.chat.titles import DEFAULT_TITLE, branch_title, title_from
from app.conversations.import_chat import ChatImportError, read_export
from app.chat.tool_calls_mixin import ToolCallsMixin, answer_words
from app.engine.bridge import READY, EngineBridge
from app.conversations.list_models import ConversationListModel, MessageListModel
from app.settings.schema import (
    AppSettings,
    BudgetMode,
    ConversationSettings,
    conversation_settings_from_json,
    conversation_settings_to_json,
)
from core.engine import protocol as P
from core.text.reasoning import THINKING_SWITCH
from core.text.tool_calls import ToolCallStream
from core.tools.loop import Approvals
from core.tools.toolbox import Toolbox

log = logging.getLogger(__name__)

FLUSH_MS = 33  # buffer -> model (~30 updates/s)
SAVE_MS = 500  # model -> SQLite while streaming
RETRY_SAVE_MS = 2000  # an answer that could not be saved (the disk full) is tried again this often
MIN_PREFILL_TOKENS = 256  # shorter prompts are read too fast to time (or to need an estimate)

# Failures that a Regenerate would only repeat: the conversation, the settings or the model must change first
# (model_format: the model's chat template failed, or never finished, on this conversation).
REPEATING_FAILURES = ("context_length", "invalid_setting", "model_format")

# Hints for people rather than client programs, where the engine's hint is about the protocol.
USER_HINTS = {
    "not_loaded": "pick a model in Menu > Settings (or press Retry), then Regenerate",
    "busy": "wait for the answer in progress, then Regenerate",
    "protocol": "this is a bug: please send the diagnostics (Help > Copy diagnostics)",
    "numerical": "download the model again, or pick another one, under Models in the sidebar",
    "model_format": "the Models page in the sidebar can download it again or switch to another model",
}

REGENERATE_TEMPERATURE = 0.7  # a regenerated answer samples at least this freely ...
REGENERATE_TOP_P = 0.9  # ... from at least this share of the odds


def varied(settings: ConversationSettings) -> ConversationSettings:
    """The settings Regenerate samples with: a new answer is the point, so near-greedy settings (the built-in
    model's are temperature 0.2, top-p 0.5, which repeat an answer word for word) are loosened to
    REGENERATE_TEMPERATURE / REGENERATE_TOP_P for that one answer. A fixed seed asks for the same answer
    again, and greedy (temperature 0) for the likeliest one: both are left as they are."""
    if settings.seed >= 0 or settings.temperature == 0:
        return settings
    return replace(
        settings,
        temperature=max(settings.temperature, REGENERATE_TEMPERATURE),
        top_p=max(settings.top_p, REGENERATE_TOP_P),
    )


def system_turns(settings: ConversationSettings) -> list[dict[str, str]]:
    """What a chat of `settings` starts with before its messages: its system prompt, where it has one."""
    return [{"role": "system", "content": settings.system_prompt}] if settings.system_prompt.strip() else []


class ChatController(ToolCallsMixin, QObject):
    conversation_opened = Signal(object)  # conversation id or None
    title_changed = Signal(int, str)  # conversation id, new title
    generating_changed = Signal(bool)
    answer_finished = Signal(int, str)  # message id, final status
    prompt_started = Signal(int)  # tokens of the prompt the engine is reading
    message = Signal(str)  # a sentence for the person (the window shows it in a toast)
    tool_call_waiting = Signal(int, str)  # message id, call id: a card asks the user
    _tool_done = Signal(str, object)  # call id, Future (emitted on the toolbox's thread, delivered queued)

    def __init__(
        self, store: S.Store, bridge: EngineBridge, settings: AppSettings, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.app_settings = settings
        self.conversations = ConversationListModel(store, self)
        self.messages = MessageListModel(self)
        self.stats = AnswerStats(self)
        self.conversation_id: int | None = None
        self.active: ActiveAnswer | None = None
        self.toolbox: Toolbox | None = None  # MCP servers (set_toolbox); None: answers get no tools
        self.approvals: dict[int, Approvals] = {}  # per conversation: the tools allowed "always"
        self.prefill_tokens_per_s: float | None = None  # measured on the last long prompt: estimates the next
        self._room_refused: tuple[str, int] = ("", 0)  # a target model, the context it could not run with (no_room)
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_MS)
        self._save_timer.timeout.connect(self._save)
        self.unsaved: dict[int, dict] = {}  # message id -> the final fields not saved yet (the disk was full)
        self._retry_timer = QTimer(self)
        self._retry_timer.setInterval(RETRY_SAVE_MS)
        self._retry_timer.timeout.connect(self._retry_unsaved)
        bridge.chunk.connect(self._on_chunk)
        bridge.prompt_started.connect(self._on_prompt_started)
        bridge.queued.connect(self._on_queued)
        bridge.pass_stats.connect(self._on_pass_stats)
        bridge.finished.connect(self._on_finished)
        bridge.context_trimmed.connect(self._on_context_trimmed)
        bridge.request_failed.connect(self._on_failed)
        self._tool_done.connect(self._on_tool_done)

    def set_toolbox(self, toolbox: Toolbox | None) -> None:
        """The MCP servers whose tools the following answers are offered (None: none)."""
        self.toolbox = toolbox

    def tool_format(self) -> str | None:
        """How the model in use writes calls (None: its template has no tools, or it is a remote server)."""
        return self.bridge.status.models.get("tool_call_format")

    def tools_in_use(self) -> bool:
        return self.toolbox is not None and bool(self.toolbox.tools) and self.tool_format() is not None

    def detach(self) -> None:
        """Stop listening to the bridge (a window closing while the bridge lives on, e.g. in tests)."""
        for signal, slot in (
            (self.bridge.chunk, self._on_chunk),
            (self.bridge.pass_stats, self._on_pass_stats),
            (self.bridge.prompt_started, self._on_prompt_started),
            (self.bridge.queued, self._on_queued),
            (self.bridge.finished, self._on_finished),
            (self.bridge.context_trimmed, self._on_context_trimmed),
            (self.bridge.request_failed, self._on_failed),
        ):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass
        if self.active is not None:
            self.bridge.cancel(self.active.request_id)
            self._end_answer(S.INTERRUPTED, {"error": "the window was closed"})

    @property
    def generating(self) -> bool:
        return self.active is not None

    # -- conversations -------------------------------------------------------------------------------------

    def open_conversation(self, conversation_id: int | None) -> None:
        if conversation_id is not None and self.store.conversation(conversation_id) is None:
            conversation_id = None
        self.conversation_id = conversation_id
        rows = self.store.messages(conversation_id) if conversation_id is not None else []
        self.messages.set_messages(rows)
        active = self.active
        if active is not None and active.conversation_id == conversation_id:
            self.messages.update(
                active.message_id,
                content=active.text,
                reasoning=active.reasoning,
                status=S.STREAMING,
                stats=active.live_stats(),
            )
        elif active is None:
            self.stats.reset()  # the status bar shows this conversation's answers, not the last one's
        self.conversation_opened.emit(conversation_id)

    def empty_conversation(self) -> int | None:
        """A conversation still called "New chat" with no messages, if there is one (New chat reuses it)."""
        for row in self.store.conversations():
            if row.title == DEFAULT_TITLE and not self.store.messages(row.id):
                return row.id
        return None

    def new_conversation(self, title: str = DEFAULT_TITLE) -> int:
        empty = self.empty_conversation() if title == DEFAULT_TITLE else None
        if empty is not None:
            self.conversations.refresh()
            self.open_conversation(empty)
            return empty
        conversation_id = self.store.create_conversation(
            title, conversation_settings_to_json(self.conversation_defaults())
        )
        self.conversations.refresh()
        self.open_conversation(conversation_id)
        return conversation_id

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        if title.strip():
            self.store.rename_conversation(conversation_id, title.strip())
            self.conversations.refresh()

    def branch(self, message_id: int) -> int | None:
        """Branch in new chat: a new chat holding this one as shown up to answer `message_id`, opened, to go
        on from there another way; this chat stays as it is. None, and said, when the answer is not saved yet
        (being written, or kept from a full disk) or the branch cannot be saved."""
        message = self.store.message(message_id)
        chat = self.store.conversation(message.conversation_id) if message is not None else None
        if message is None or chat is None:
            return None
        if message.status == S.STREAMING:
            self.message.emit("The chat was not branched: this answer is not saved yet. Branch from it once it is.")
            return None
        try:
            branch = self.store.branch_conversation(message_id, branch_title(chat.title))
        except S.StoreError as error:
            self.message.emit(f"The chat was not branched: {error}.")
            return None
        self.conversations.refresh()
        self.open_conversation(branch)
        return branch

    def import_chats(self, paths: list[Path]) -> tuple[int, list[str]]:
        """Chats exported as JSON (Export as JSON…), each read, checked and added as a new chat; the last one
        imported is opened. Returns how many were imported and, per file that was not, why in words."""
        imported, problems, last = 0, [], None
        for path in paths:
            try:
                chat = read_export(path)
                last = self.store.add_conversation(chat.title, chat.settings_json, chat.messages, chat.created_at)
                imported += 1
            except ChatImportError as error:
                problems.append(f"{error}.")
            except S.StoreError as error:
                problems.append(f"{path.name} was not imported: {error}.")
        if last is not None:
            self.conversations.refresh()
            self.open_conversation(last)
        return imported, problems

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        """Pin the chat to the top of the list, or unpin it; when that cannot be saved (a full disk) it is said,
        and the list stays as it was."""
        try:
            self.store.set_pinned(conversation_id, pinned)
        except S.StoreError as error:
            self.message.emit(f"The chat was not {'pinned' if pinned else 'unpinned'}: {error}.")
            return
        self.conversations.refresh()

    def delete_conversation(self, conversation_id: int) -> None:
        if self.active is not None and self.active.conversation_id == conversation_id:
            self.stop()
            self._end_answer(S.STOPPED, {})
        self.store.delete_conversation(conversation_id)
        self.conversations.refresh()
        if self.conversation_id == conversation_id:
            self.open_conversation(self.conversations.id_at(0))

    def search(self, text: str) -> None:
        self.conversations.refresh(text)

    def conversation_settings(self, conversation_id: int | None = None) -> ConversationSettings:
        conversation_id = self.conversation_id if conversation_id is None else conversation_id
        row = self.store.conversation(conversation_id) if conversation_id is not None else None
        if row is None:
            return self.conversation_defaults()
        return conversation_settings_from_json(row.settings_json, self.conversation_defaults()).validated()

    def conversation_defaults(self) -> ConversationSettings:
        """A new chat's settings for the model in use (AppSettings.conversation_defaults)."""
        return self.app_settings.conversation_defaults(self.bridge.status.models)

    def set_conversation_settings(self, settings: ConversationSettings, conversation_id: int | None = None) -> None:
        conversation_id = self.conversation_id if conversation_id is None else conversation_id
        if conversation_id is None:
            conversation_id = self.new_conversation()
        self.store.set_conversation_settings(conversation_id, conversation_settings_to_json(settings.validated()))

    # -- chatting ------------------------------------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Add the user's message and ask for an answer; False (nothing done) if empty or already answering."""
        text = text.strip()
        if not text or self.generating:
            return False
        if self.conversation_id is None:
            self.new_conversation(title_from(text))
        conversation_id = self.conversation_id
        assert conversation_id is not None
        row = self.store.conversation(conversation_id)
        if row is not None and row.title == DEFAULT_TITLE and not self.messages.rows:
            self.store.rename_conversation(conversation_id, title_from(text))
            self.title_changed.emit(conversation_id, title_from(text))
        try:
            self.messages.append(self.store.add_message(conversation_id, "user", text))
        except S.StoreError as error:  # nothing was sent: the text stays in the input to send again
            log.error("the message was not saved: %s", error)
            self.message.emit(f"Your message was not sent: {error}, then send it again.")
            return False
        self.conversations.refresh()
        self._start_answer(conversation_id)
        return True

    def stop(self) -> None:
        """Ask the engine to stop the answer (it ends within one target pass; the text so far is kept); a
        running tool is cancelled and an open question closed, which ends the answer at once."""
        active = self.active
        if active is None:
            return
        if active.running is not None or active.waiting:
            if active.running is not None:
                active.running.cancel()
                active.running = None
            for record in active.waiting:
                T.stop_call(record)
            active.waiting = []
            self._save_rounds()
            self._end_answer(S.STOPPED, {})
            return
        self.bridge.cancel(active.request_id)

    def can_regenerate(self) -> bool:
        """An answer can be asked for again unless one is streaming or the last one failed in a way a new
        try would repeat (the message is too long for the context window in force, a setting is invalid)."""
        if self.generating or not any(m.role == "user" for m in self.messages.rows):
            return False
        last = self.messages.rows[-1]
        if last.role != "assistant" or last.status != S.FAILED:
            return True
        if last.stats.get("kind") == "context_length":  # unless the context has grown to hold it since
            prompt = int(last.stats.get("prompt_tokens") or 0)
            return 0 < prompt < self.bridge.status.max_context
        return last.stats.get("kind") not in REPEATING_FAILURES

    def regenerate(self) -> bool:
        """A new answer to the last user message; the old answer, unless empty, is kept as an alternative to
        flip back to (and the new one sampled more freely, `varied`). One that never got a word is replaced by
        an answer with the chat's own settings."""
        if not self.can_regenerate() or self.conversation_id is None:
            return False
        last = self.messages.rows[-1]
        answer = None
        if last.role == "assistant" and last.content.strip():
            answer = self.store.add_alternative(last.id)
            self.messages.remove_from(len(self.messages.rows) - 1)
        elif last.role == "assistant":  # an answer that never got a word (an error): nothing worth keeping
            self.store.delete_messages_from(self.conversation_id, last.id)
            self.messages.remove_from(len(self.messages.rows) - 1)
        self._start_answer(self.conversation_id, answer, vary=answer is not None)  # varied from an answer only
        return True

    def can_continue_last_answer(self) -> bool:
        """The last answer ended before its end (cut off at the longest answer, stopped or interrupted:
        app.chat.message_words.unfinished), is saved, and the model runs on this computer: a remote server may
        not know how to go on with an answer (OpenAI's own would write a new one after it)."""
        if self.generating or self.conversation_id is None or not self.messages.rows:
            return False
        last = self.messages.rows[-1]
        return unfinished(last) and last.id not in self.unsaved and self.app_settings.remote_endpoint() is None

    def continue_last_answer(self) -> bool:
        """The model goes on with the last answer from where it ended, into the same message: the text
        (or the thinking) so far is sent as the answer's start (Generate.continue_final_message), the new words
        are added to it, and how long it thought adds up."""
        if not self.can_continue_last_answer():
            return False
        conversation_id, last = self.conversation_id, self.messages.rows[-1]
        answer: dict = {"role": "assistant", "content": last.content}
        if last.reasoning:
            answer["reasoning_content"] = last.reasoning
        messages = [
            *self.history(conversation_id, leave_out=last.id),
            *T.rounds_to_messages(last.tool_rounds),
            answer,
        ]
        try:
            self.store.update_message(last.id, status=S.STREAMING)
        except S.StoreError as error:
            log.error("answer %d was not continued: %s", last.id, error)
            self.message.emit(f"The answer was not continued: {error}, then press Continue again.")
            return False
        kept = {key: last.stats[key] for key in ("thinking_seconds", "edited") if key in last.stats}
        active = ActiveAnswer(
            self.bridge.new_request_id(),
            conversation_id,
            last.id,
            text=last.content,
            saved=last.content,
            reasoning=last.reasoning,
            saved_reasoning=last.reasoning,
            tool_rounds=list(last.tool_rounds),
            earlier=kept,
        )
        self.messages.update(last.id, status=S.STREAMING, stats=active.live_stats())
        self._stream(active, messages, self.conversation_settings(conversation_id), so_far=last.content)
        return True

    def show_alternative(self, message_id: int, step: int) -> bool:
        """Show the previous (step -1) or next (+1) answer of `message_id`'s turn instead of it."""
        if self.generating or self.conversation_id is None:
            return False
        ids = self.store.alternatives(message_id)
        index = ids.index(message_id) + step if message_id in ids else -1
        if not 0 <= index < len(ids):
            return False
        self.store.show_alternative(ids[index])
        row = self.messages.row_of(message_id)
        shown = self.store.message(ids[index])
        if row >= 0 and shown is not None:
            self.messages.replace(row, shown)
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Replace a user message's text, drop everything after it, and answer again."""
        text = text.strip()
        row = self.messages.row_of(message_id)
        if (
            not text
            or self.generating
            or row < 0
            or self.messages.rows[row].role != "user"
            or self.conversation_id is None
        ):
            return False
        self.store.update_message(message_id, content=text)
        self.store.delete_messages_from(self.conversation_id, message_id + 1)
        self.messages.remove_from(row + 1)
        self.messages.update(message_id, content=text)
        self._start_answer(self.conversation_id)
        return True

    def edit_answer(self, message_id: int, text: str) -> bool:
        """Replace an answer's words with `text` (its thinking, tool calls and alternatives stay): the model
        reads this version from now on, and Continue goes on from it. Nothing is asked of the model; the
        answer says it was edited. False (nothing changed) for empty text, while an answer is written, or
        when the disk refuses (said in a toast)."""
        text = text.strip()
        row = self.messages.row_of(message_id)
        if not text or self.generating or row < 0 or self.messages.rows[row].role != "assistant":
            return False
        stats = {**self.messages.rows[row].stats, "edited": True}
        try:
            self.store.update_message(message_id, content=text, stats=stats)
        except S.StoreError as error:
            log.error("answer %d was not edited: %s", message_id, error)
            self.message.emit(f"The answer was not changed: {error}, then save it again.")
            return False
        self.messages.update(message_id, content=text, stats=stats)
        return True

    def history(self, conversation_id: int, leave_out: int | None = None) -> list[dict[str, str]]:
        """What the model sees: the system prompt, then every non-empty user / assistant message (but message
        `leave_out`), an answer's tool calls and results before its text; an answer's thinking rides along as
        `reasoning_content` for the chat template to render or drop (the answer's text never holds it)."""
        turns = system_turns(self.conversation_settings(conversation_id))
        for m in self.store.messages(conversation_id):
            if m.id == leave_out:
                continue
            if m.role == "assistant" and m.tool_rounds:
                turns += T.rounds_to_messages(m.tool_rounds)
            if m.role in ("user", "assistant") and m.content.strip():
                turn = {"role": m.role, "content": m.content}
                if m.role == "assistant" and m.reasoning:
                    turn["reasoning_content"] = m.reasoning
                turns.append(turn)
        return turns

    def thinking_control(self) -> str | None:
        """Whether the model in use thinks: "switchable" (its template can turn thinking off, which the
        chat's Think switch does), "always", or None (it does not think, or it is not known: no model yet, a
        remote server)."""
        control = self.bridge.status.models.get("thinking")
        return control if control in ("switchable", "always") else None

    def template_kwargs(self, settings: ConversationSettings) -> dict[str, bool]:
        """The chat template's variables for an answer: the Think switch, where the model has one."""
        return {THINKING_SWITCH: settings.thinking} if self.thinking_control() == "switchable" else {}

    def _start_answer(self, conversation_id: int, answer: S.Message | None = None, vary: bool = False) -> None:
        settings = self.conversation_settings(conversation_id)
        if vary:
            settings = varied(settings)
        messages = self.history(conversation_id)
        if answer is None:
            try:
                answer = self.store.add_message(conversation_id, "assistant", "", S.STREAMING)
            except S.StoreError as error:
                log.error("no answer was asked for: %s", error)
                self.message.emit(f"No answer was asked for: {error}, then press Regenerate.")
                return
        if conversation_id == self.conversation_id:
            self.messages.append(answer)
        self._stream(ActiveAnswer(self.bridge.new_request_id(), conversation_id, answer.id), messages, settings)

    def _stream(
        self, active: ActiveAnswer, messages: list[dict], settings: ConversationSettings, so_far: str | None = None
    ) -> None:
        """Follow `active` from now on and ask the engine for it (`so_far`: the words of an answer it goes on
        with, continue_last_answer)."""
        self.active = active
        self.stats.reset()
        self._flush_timer.start()
        self._save_timer.start()
        self.generating_changed.emit(True)
        self._generate(messages, settings, active.request_id, so_far)

    def _tools_for(self, settings: ConversationSettings) -> tuple[frozenset[str], tuple[dict, ...]]:
        """The names of the tools an answer in a chat of `settings` is offered, and their definitions."""
        offered = self.toolbox.names_for(settings.tool_servers_off) if self.tools_in_use() else frozenset()
        return offered, (self.toolbox.definitions(offered) if offered else ())

    def draft_prompt(self, text: str) -> tuple[list[dict], dict] | None:
        """What sending `text` now would ask the engine to read, to count it before it is sent: the messages
        (the open chat's history, or a new chat's system prompt, then `text`) and the CountTokens settings
        that shape the prompt as the answer's Generate would. None where there is nothing to count here: an
        empty text, an answer streaming (its chat is about to change), no model ready, or a remote server that
        does not count a prompt before it answers (one that does, vLLM or `specexec serve`, says so when it
        connects: StatusReport.models["counts_prompts"])."""
        if not text.strip() or self.generating or self.bridge.status.state != READY:
            return None
        if self.app_settings.remote_endpoint() is not None and not self.bridge.status.models.get("counts_prompts"):
            return None
        settings = self.conversation_settings()
        if self.conversation_id is not None:
            turns = self.history(self.conversation_id)
        else:  # a new chat: the system prompt it will start with
            turns = system_turns(settings)
        _, tools = self._tools_for(settings)
        counted = {"max_new_tokens": settings.max_tokens, "chat_template_kwargs": self.template_kwargs(settings)}
        return turns + [{"role": "user", "content": text.strip()}], counted | ({"tools": tools} if tools else {})

    def _generate(
        self, messages: list[dict], settings: ConversationSettings, request_id: str, so_far: str | None = None
    ) -> None:
        offered, tools = self._tools_for(settings)
        if self.active is not None:
            self.active.raw = so_far or ""  # the round's text as written: its calls are read from all of it
            self.active.offered = offered
            self.active.calls = ToolCallStream(self.tool_format(), offered) if tools else None
        extra: dict = {"tools": tools} if tools else {}  # a request without tools stays as it was
        if so_far is not None:
            extra["continue_final_message"] = True
        self.bridge.generate(  # may end the answer at once (engine not running): then active is None again
            messages,
            request_id=request_id,
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            repetition_penalty=settings.repetition_penalty,
            max_new_tokens=settings.max_tokens,
            budget=settings.budget if settings.budget_mode == BudgetMode.MANUAL else None,
            method=settings.decoding_method(bool(self.app_settings.draft)),
            seed=settings.seed if settings.seed >= 0 else random.randrange(2**31),
            chat_template_kwargs=self.template_kwargs(settings),
            **extra,
        )

    # -- engine events -------------------------------------------------------------------------------------

    def _on_chunk(self, chunk: P.TokenChunk) -> None:
        active = self.active
        if active is not None and active.request_id == chunk.request_id:
            if chunk.reasoning:
                if active.thinking_since is None and not active.thinking:  # the first thought
                    earlier = active.earlier.get("thinking_seconds", 0.0)  # a continued one thinks on
                    active.thinking_since = time.monotonic() - earlier
                    active.thinking = {"thinking_started_at": time.time() - earlier}
                active.pending_reasoning += chunk.reasoning
            if chunk.text:
                self._end_thinking()  # the answer's first word: the thinking is over
                active.raw += chunk.text
                active.pending += answer_words(active.calls.push(chunk.text)) if active.calls else chunk.text
            if active.reading_since is not None:  # the first token: the prompt has been read
                seconds = time.monotonic() - active.reading_since
                new_tokens = active.reading["prompt_tokens"] - active.reading["reused_tokens"]
                if new_tokens >= MIN_PREFILL_TOKENS and seconds > 0:
                    self.prefill_tokens_per_s = new_tokens / seconds
                active.reading_since = None

    def _on_queued(self, event: P.Queued) -> None:
        """The answer waits behind others (the local API server's): the bubble says how many."""
        active = self.active
        if (
            active is not None
            and active.request_id == event.request_id
            and active.conversation_id == self.conversation_id
        ):
            self.messages.update(active.message_id, stats={"queued_behind": event.position})

    def _on_prompt_started(self, event: P.PromptStarted) -> None:
        active = self.active
        if active is not None and active.request_id == event.request_id:
            reading = {"prompt_tokens": event.prompt_tokens, "reused_tokens": event.reused_tokens}
            if not event.reused_tokens and self._earlier_turns(active.conversation_id):
                reading["whole_conversation"] = True  # nothing cached (a new engine, another chat): all re-read
            new_tokens = event.prompt_tokens - event.reused_tokens
            if self.prefill_tokens_per_s and new_tokens >= MIN_PREFILL_TOKENS:
                reading["expected_s"] = round(new_tokens / self.prefill_tokens_per_s, 1)
            active.reading = reading
            active.reading_since = time.monotonic()
            if active.conversation_id == self.conversation_id:
                self.messages.update(active.message_id, stats=reading)
            self.prompt_started.emit(event.prompt_tokens)

    def _earlier_turns(self, conversation_id: int) -> bool:
        """Whether the prompt holds more than the latest message (an earlier answer is in the history)."""
        return any(m.role == "assistant" and m.content.strip() for m in self.store.messages(conversation_id))

    def _on_pass_stats(self, stats: P.PassStats) -> None:
        if self.active is not None and self.active.request_id == stats.request_id:
            self.stats.add(stats)

    def _on_finished(self, event: P.Finished) -> None:
        if self.active is None or self.active.request_id != event.request_id:
            return
        status = S.STOPPED if event.reason == "cancelled" else S.COMPLETE
        if status == S.COMPLETE and self.active.offered and self.tools_in_use() and self._take_calls():
            return  # the answer goes on once its calls are decided and done
        # A stopped answer's Finished carries no counts (and a server may send none): keep what was seen, so
        # the context meter shows the same figure after the chat is opened again as while it was written.
        prompt = event.prompt_tokens or self.active.reading.get("prompt_tokens", 0)
        generated = event.generated_tokens or self.stats.tokens
        ending = {"reason": event.reason, "prompt_tokens": prompt, "generated_tokens": generated}
        kept = self.bridge.status.max_context
        if event.reason == "length" and kept and prompt + generated >= kept - 1:
            ending["context_full"] = True  # cut off by what the model keeps in mind, not by the longest answer
        self._end_answer(status, ending)

    def _on_context_trimmed(self, event: P.ContextTrimmed) -> None:
        """The engine left this chat's oldest messages out of what the model read for the answer (it keeps
        the system prompt and as much of the chat's end as fits): said once per answer."""
        if self.active is None or self.active.request_id != event.request_id:
            return  # another program's request through the API server: not this chat's news
        kept = self.bridge.status.max_context
        count = f"{event.dropped_messages} oldest message{'s' if event.dropped_messages != 1 else ''}"
        keeps = f" it keeps {kept:,} tokens in mind, and" if kept else ""
        self.message.emit(
            f"The model no longer sees this chat's {count}:{keeps} Menu > Settings > Context length can raise that."
        )

    def _on_failed(self, error: P.Error) -> None:
        if self.active is None or self.active.request_id != error.request_id:
            return
        status = S.INTERRUPTED if error.kind == "engine_died" else S.FAILED
        hint = USER_HINTS.get(error.kind, error.hint)
        extra: dict = {"error": error.message, "hint": hint, "kind": error.kind}
        if error.kind == "context_length":  # a long document: offer to make room where the model goes further
            max_tokens = self.conversation_settings(self.active.conversation_id).max_tokens
            models, remote = self.bridge.status.models, self.app_settings.remote_endpoint() is not None
            refused = self.refused_room()
            room = None if remote else room_for(error.prompt_tokens, max_tokens, models, refused)
            extra["hint"] = too_long_hint(room, error.prompt_tokens, max_tokens, models, remote, refused)
            if error.prompt_tokens:  # the context meter shows it overflowing
                extra["prompt_tokens"] = error.prompt_tokens
            if room is not None:
                extra["room_tokens"] = room.tokens
        self._end_answer(status, extra)

    def find_message(self, message_id: int) -> S.Message | None:
        """Message `message_id` as shown, else as stored: its chat may no longer be the one open."""
        row = self.messages.row_of(message_id)
        return self.messages.rows[row] if row >= 0 else self.store.message(message_id)

    def refused_room(self) -> int:
        """The context length the models in use could not run with (a Make room that failed), 0: none; a
        message too long for them is then no longer offered that length, which would only fail again."""
        target, tokens = self._room_refused
        return tokens if target == str(self.bridge.status.models.get("target") or "") else 0

    def no_room(self, message_id: int | None, tokens: int, target: str) -> None:
        """Make room failed (the `target` model would not load with `tokens` of context, or ran out of memory
        with them): it is not offered that length again, and the failed answer `message_id` (None: it was the
        message in the box, not yet sent) no longer offers it and says that a shorter message is the way."""
        known, refused = self._room_refused
        if target != known or not refused or tokens < refused:
            self._room_refused = (target, tokens)
        message = self.find_message(message_id) if message_id is not None else None
        if message is None:
            return
        stats = {key: value for key, value in message.stats.items() if key != "room_tokens"}
        stats["hint"] = could_not_run(tokens)
        try:
            self.store.update_message(message_id, stats=stats)
        except S.StoreError as error:  # shown all the same; the next start offers Make room again
            log.error("answer %d could not be saved: %s", message_id, error)
        self.messages.update(message_id, stats=stats)

    def _end_answer(self, status: str, extra: dict) -> None:
        active = self.active
        if active is None:
            return
        self._end_thinking()  # an answer cut off while thinking thought until now
        self._flush()
        self._flush_timer.stop()
        self._save_timer.stop()
        stats = {
            **active.earlier,
            **active.reading,
            **self.stats.finish(extra.get("generated_tokens")),
            **active.thinking,
            **extra,
        }
        final = {"content": active.text, "reasoning": active.reasoning, "status": status, "stats": stats}
        try:
            self.store.update_message(active.message_id, **final)
        except S.StoreError as error:  # shown, kept in memory, saved once there is room
            log.error("answer %d could not be saved: %s", active.message_id, error)
            self.unsaved[active.message_id] = final
            self._retry_timer.start()
            self.message.emit(
                f"The answer is shown but not saved: {error}; it is saved as soon as there is room "
                "(keep the app open until then)."
            )
        self.messages.update(
            active.message_id, content=active.text, reasoning=active.reasoning, status=status, stats=stats
        )
        self.active = None
        self.conversations.refresh()
        self.generating_changed.emit(False)
        self.answer_finished.emit(active.message_id, status)
        log.info("answer %d ended: %s (%d chars)", active.message_id, status, len(active.text))

    # -- tools (the rest: ToolCallsMixin) ----------------------------------------------------------------------

    @Slot(str, object)
    def _on_tool_done(self, call_id: str, future) -> None:
        active = self.active
        if active is None or active.running is not future or future.cancelled():
            return  # stopped meanwhile (the record says so already)
        record = active.waiting.pop(0)
        active.running = None
        T.finish_call(record, future.result())
        self._save_rounds()
        self._next_call()

    def _end_thinking(self) -> None:
        """The thinking is over: how long it took replaces when it started."""
        active = self.active
        if active is not None and active.thinking_since is not None:
            active.thinking = {"thinking_seconds": round(time.monotonic() - active.thinking_since, 1)}
            active.thinking_since = None

    def _flush(self) -> None:
        active = self.active
        if active is None or not (active.pending or active.pending_reasoning):
            return
        active.text += active.pending
        active.reasoning += active.pending_reasoning
        active.pending = active.pending_reasoning = ""
        self.messages.update(
            active.message_id, content=active.text, reasoning=active.reasoning, stats=active.live_stats()
        )

    def _save(self) -> None:
        active = self.active
        if active is None:
            return
        self._flush()
        if (active.text, active.reasoning) != (active.saved, active.saved_reasoning):
            try:
                self.store.update_message(
                    active.message_id, content=active.text, reasoning=active.reasoning, stats=active.live_stats()
                )
            except S.StoreError as error:  # the answer goes on; its end is saved (or kept until it can be)
                log.warning("the answer so far could not be saved: %s", error)
                return
            active.saved, active.saved_reasoning = active.text, active.reasoning

    def _retry_unsaved(self) -> None:
        """Save the answers the disk had no room for; stop trying once all are saved."""
        for message_id, final in list(self.unsaved.items()):
            try:
                self.store.update_message(message_id, **final)
            except S.StoreError:
                return
            del self.unsaved[message_id]
            log.info("answer %d saved after all", message_id)
            self.message.emit("The answer that could not be saved is saved now.")
        self._retry_timer.stop()
