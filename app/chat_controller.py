"""The chat logic between the widgets, the store and the engine bridge (no widgets here).

One answer streams at a time. Its tokens collect in a buffer that a 33 ms timer moves into the message model
(at most ~30 view updates a second however fast the engine is); a 500 ms timer writes the text so far to
SQLite (status "streaming"), and the end of the answer writes it once more with its final status:
complete, stopped (Stop; the partial answer is kept), interrupted (the engine died; kept too) or error.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from app import store as S
from app.answer_stats import AnswerStats
from app.engine_bridge import EngineBridge
from app.models import ConversationListModel, MessageListModel
from app.settings import AppSettings, BudgetMode, ConversationSettings, conversation_settings_from_json, conversation_settings_to_json
from core.engine import protocol as P

log = logging.getLogger(__name__)

FLUSH_MS = 33  # buffer -> model (~30 updates/s)
SAVE_MS = 500  # model -> SQLite while streaming
DEFAULT_TITLE = "New chat"
TITLE_LENGTH = 48

# Hints for people rather than client programs, where the engine's hint is about the protocol.
USER_HINTS = {
    "not_loaded": "pick a model in File > Settings (or press Retry), then Regenerate",
    "busy": "wait for the answer in progress, then Regenerate",
    "protocol": "this is a bug: please send the diagnostics (Help > Copy diagnostics)",
}


@dataclass
class ActiveAnswer:
    request_id: str
    conversation_id: int
    message_id: int
    text: str = ""
    pending: str = ""
    saved: str = ""


def title_from(text: str) -> str:
    line = " ".join(text.strip().split())
    return (line[: TITLE_LENGTH - 1] + "…") if len(line) > TITLE_LENGTH else (line or DEFAULT_TITLE)


class ChatController(QObject):
    conversation_opened = Signal(object)  # conversation id or None
    generating_changed = Signal(bool)
    answer_finished = Signal(int, str)  # message id, final status
    message = Signal(str)  # a line for the status bar

    def __init__(self, store: S.Store, bridge: EngineBridge, settings: AppSettings, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.app_settings = settings
        self.conversations = ConversationListModel(store, self)
        self.messages = MessageListModel(self)
        self.stats = AnswerStats(self)
        self.conversation_id: int | None = None
        self.active: ActiveAnswer | None = None
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_MS)
        self._save_timer.timeout.connect(self._save)
        bridge.token.connect(self._on_token)
        bridge.pass_stats.connect(self._on_pass_stats)
        bridge.finished.connect(self._on_finished)
        bridge.request_failed.connect(self._on_failed)

    def detach(self) -> None:
        """Stop listening to the bridge (a window closing while the bridge lives on, e.g. in tests)."""
        for signal, slot in ((self.bridge.token, self._on_token), (self.bridge.pass_stats, self._on_pass_stats),
                             (self.bridge.finished, self._on_finished), (self.bridge.request_failed, self._on_failed)):
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
            self.messages.update(active.message_id, content=active.text, status=S.STREAMING)
        self.conversation_opened.emit(conversation_id)

    def new_conversation(self, title: str = DEFAULT_TITLE) -> int:
        conversation_id = self.store.create_conversation(
            title, conversation_settings_to_json(self.app_settings.defaults.validated()))
        self.conversations.refresh()
        self.open_conversation(conversation_id)
        return conversation_id

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        if title.strip():
            self.store.rename_conversation(conversation_id, title.strip())
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
            return self.app_settings.defaults.validated()
        return conversation_settings_from_json(row.settings_json, self.app_settings.defaults).validated()

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
        self.messages.append(self.store.add_message(conversation_id, "user", text))
        self.conversations.refresh()
        self._start_answer(conversation_id)
        return True

    def stop(self) -> None:
        """Ask the engine to stop the answer (it ends within one target pass; the text so far is kept)."""
        if self.active is not None:
            self.bridge.cancel(self.active.request_id)

    def can_regenerate(self) -> bool:
        return not self.generating and any(m.role == "user" for m in self.messages.rows)

    def regenerate(self) -> bool:
        """Replace the last answer with a new one (or answer the last user message if it has none)."""
        if not self.can_regenerate() or self.conversation_id is None:
            return False
        last = self.messages.rows[-1]
        if last.role == "assistant":
            self.store.delete_messages_from(self.conversation_id, last.id)
            self.messages.remove_from(len(self.messages.rows) - 1)
        self._start_answer(self.conversation_id)
        return True

    def edit_and_resend(self, message_id: int, text: str) -> bool:
        """Replace a user message's text, drop everything after it, and answer again."""
        text = text.strip()
        row = self.messages.row_of(message_id)
        if not text or self.generating or row < 0 or self.messages.rows[row].role != "user" or self.conversation_id is None:
            return False
        self.store.update_message(message_id, content=text)
        self.store.delete_messages_from(self.conversation_id, message_id + 1)
        self.messages.remove_from(row + 1)
        self.messages.update(message_id, content=text)
        self._start_answer(self.conversation_id)
        return True

    def history(self, conversation_id: int) -> list[dict[str, str]]:
        """What the model sees: the system prompt, then every non-empty user / assistant message."""
        settings = self.conversation_settings(conversation_id)
        turns = [{"role": "system", "content": settings.system_prompt}] if settings.system_prompt.strip() else []
        turns += [{"role": m.role, "content": m.content} for m in self.store.messages(conversation_id)
                  if m.role in ("user", "assistant") and m.content.strip()]
        return turns

    def _start_answer(self, conversation_id: int) -> None:
        settings = self.conversation_settings(conversation_id)
        messages = self.history(conversation_id)
        answer = self.store.add_message(conversation_id, "assistant", "", S.STREAMING)
        if conversation_id == self.conversation_id:
            self.messages.append(answer)
        request_id = self.bridge.new_request_id()
        self.active = ActiveAnswer(request_id, conversation_id, answer.id)
        self.stats.reset()
        self._flush_timer.start()
        self._save_timer.start()
        self.generating_changed.emit(True)
        self.bridge.generate(  # may end the answer at once (engine not running): then active is None again
            messages,
            request_id=request_id,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_new_tokens=settings.max_tokens,
            budget=settings.budget if settings.budget_mode == BudgetMode.MANUAL else None,
            method=self.app_settings.method(),
            seed=random.randrange(2**31),
        )

    # -- engine events -------------------------------------------------------------------------------------

    def _on_token(self, request_id: str, text: str) -> None:
        if self.active is not None and self.active.request_id == request_id:
            self.active.pending += text

    def _on_pass_stats(self, stats: P.PassStats) -> None:
        if self.active is not None and self.active.request_id == stats.request_id:
            self.stats.add(stats)

    def _on_finished(self, event: P.Finished) -> None:
        if self.active is None or self.active.request_id != event.request_id:
            return
        status = S.STOPPED if event.reason == "cancelled" else S.COMPLETE
        self._end_answer(status, {"reason": event.reason, "prompt_tokens": event.prompt_tokens,
                                  "generated_tokens": event.generated_tokens})

    def _on_failed(self, error: P.Error) -> None:
        if self.active is None or self.active.request_id != error.request_id:
            return
        status = S.INTERRUPTED if error.kind == "engine_died" else S.FAILED
        hint = USER_HINTS.get(error.kind, error.hint)
        self._end_answer(status, {"error": error.message, "hint": hint, "kind": error.kind})

    def _end_answer(self, status: str, extra: dict) -> None:
        active = self.active
        if active is None:
            return
        self._flush()
        self._flush_timer.stop()
        self._save_timer.stop()
        self.stats.flush()
        stats = {**self.stats.summary(), **extra}
        self.store.update_message(active.message_id, content=active.text, status=status, stats=stats)
        self.messages.update(active.message_id, content=active.text, status=status, stats=stats)
        self.active = None
        self.conversations.refresh()
        self.generating_changed.emit(False)
        self.answer_finished.emit(active.message_id, status)
        log.info("answer %d ended: %s (%d chars)", active.message_id, status, len(active.text))

    def _flush(self) -> None:
        active = self.active
        if active is None or not active.pending:
            return
        active.text += active.pending
        active.pending = ""
        self.messages.update(active.message_id, content=active.text)

    def _save(self) -> None:
        active = self.active
        if active is None:
            return
        self._flush()
        if active.text != active.saved:
            self.store.update_message(active.message_id, content=active.text)
            active.saved = active.text
