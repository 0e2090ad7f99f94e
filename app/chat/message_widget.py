"""One message on screen: your messages as bubbles on the right, answers in the readable column, actions
(icons) on hover, editing in place.

While an answer streams, a message re-renders on a timer whose interval grows with the cost of the last render
(at least 100 ms; three times the last render time), so a long answer never ties up the UI thread; the final
render happens at once when the answer ends. A theme switch re-renders every message (links and code colours
are baked into the rendered document from the palette).

An answer that called tools shows a card per call (app/chat/tool_card.py) between its thinking and its words;
the cards' Allow / Deny reach the controller through MessageWidget.tool_decided and ChatView.tool_decided.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QTextCursor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QToolButton, QVBoxLayout, QWidget

from app.chat.attached_files import documents_folded
from app.chat.input_box import MAX_LINES, InputBox
from app.chat.message_text import OPENED_SCHEMES, MessageBody
from app.chat.message_words import error_text, format_time, speed_words, unfinished
from app.chat.tool_card import ToolCallsBlock
from app.chat.thinking_block import ThinkingBlock, thinking_title
from app.conversations import store as S
from app.conversations.store import Message
from app.theme.icons import themed
from app.theme.tokens import SPACE
from app.window.buttons import LINK, PRIMARY, SECONDARY, button
from app.window.labels import Label
from core.text.counts import token_count

MIN_RENDER_MS = 100
RENDER_COST_FACTOR = 3
PROGRESS_MS = 500  # the "reading your message… N s" line counts up
WRITING = "writing…"  # beside the time while an answer streams
USER_BUBBLE_SHARE = 0.78  # your messages take at most this share of the row
MIN_BUBBLE_PX = 90
FOLD_CHARS = 3000  # a message of yours longer than this (a pasted document) is shown folded ...
FOLDED_CHARS = 1200  # ... to its first characters, with "Show more"
EDITED_ANSWER_LINES = 20  # an answer edited in place shows this many lines before it scrolls


def _action_button(icon_name: str, name: str, tip: str) -> QToolButton:
    """An icon button under a message; its words are in the tooltip and for screen readers."""
    button = QToolButton()
    button.setAccessibleName(name)
    button.setToolTip(tip)
    button.setObjectName("messageAction")
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    themed(button, icon_name, "muted_text", size=16)
    return button


class MessageWidget(QWidget):
    """One message as a bubble (yours, on the right) or an answer in the column: who and when, the rendered
    text, progress while the engine reads a long prompt, stats or the error, and icon actions that appear on
    hover (Copy, Edit on every message; Branch in new chat on answers, Regenerate on the last one).
    An answer with alternatives always shows its "‹ 2 / 3 ›" switcher."""

    edit_submitted = Signal(int, str)  # message id, new text: your message, to save and resend
    answer_edited = Signal(int, str)  # message id, new text: an answer's words changed, nothing resent
    editing_started = Signal()  # the editor opened in place (the view scrolls it into sight)
    editing_stopped = Signal()  # the editor closed (saved or cancelled): the keyboard goes back to the message box
    copied = Signal(str)  # what was copied (for the status bar)
    files_refused = Signal(str)  # why files dropped on the message being edited were not added
    files_reading = Signal(str)  # the PDFs dropped on it being read
    regenerate_requested = Signal()
    branch_requested = Signal(int)  # message id: Branch in new chat from this answer
    make_room_requested = Signal(int)  # message id: a message too long for the context, the model to make room
    continue_requested = Signal()  # the last answer, cut off at the longest answer, to go on
    alternative_requested = Signal(int, int)  # message id, step (-1 previous, +1 next)
    tool_decided = Signal(str, str)  # call id, decision (once / always / deny)

    def __init__(self, message: Message, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message = message
        self.user = message.role == "user"
        self.render_count = 0
        self.last_render_ms = 0.0
        self._rendered: tuple[str, str] | None = None  # (text, status) last rendered
        self._rendered_at = float("-inf")
        self._is_last = False
        self._hovered = False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(2)
        row = QHBoxLayout()
        self.bubble = QFrame()
        self.bubble.setObjectName("userMessage" if self.user else "assistantMessage")
        if self.user:
            row.addStretch(1)
        row.addWidget(self.bubble, 0 if self.user else 1)
        outer.addLayout(row)
        layout = QVBoxLayout(self.bubble)
        layout.setContentsMargins(SPACE.m + 2, SPACE.s, SPACE.m + 2, SPACE.s + 2)
        layout.setSpacing(SPACE.s)

        # No "You" / "Assistant" over every turn (the side and the bubble say who); the time shows on hover,
        # beside the actions; "writing…" above an answer while it streams.
        self.time_label = Label()
        self.time_label.setObjectName("messageTime")
        self.status_label = Label()
        self.status_label.setObjectName("messageTime")
        self.status_label.hide()
        layout.addWidget(self.status_label)

        self.thinking: ThinkingBlock | None = None  # a thinking model's thinking, above its answer
        if not self.user:
            self.thinking = ThinkingBlock()
            self.thinking.hide()
            layout.addWidget(self.thinking)
        self.tool_calls: ToolCallsBlock | None = None  # the answer's tool calls, as cards
        if not self.user:
            self.tool_calls = ToolCallsBlock()
            self.tool_calls.decided.connect(self.tool_decided)
            self.tool_calls.hide()
            layout.addWidget(self.tool_calls)

        self.body = MessageBody()
        self.body.setAccessibleName("Your message" if self.user else "Answer")
        self.body.link_activated.connect(self._link)
        self.body.copied.connect(self.copied)
        layout.addWidget(self.body)
        self.fold_button = button("Show more", LINK)  # a long message of yours, folded to its start
        self.fold_button.setAccessibleName("Show the whole message")
        self.fold_button.clicked.connect(self._toggle_fold)
        self.fold_button.hide()
        self.folded = True
        layout.addWidget(self.fold_button, 0, Qt.AlignmentFlag.AlignLeft)

        self.room_button = None  # a failed answer's way out where the message is too long for the context
        if not self.user:
            self.room_button = button("Make room and try again", SECONDARY)
            self.room_button.setAccessibleName("Make room for the message and try again")
            self.room_button.clicked.connect(lambda: self.make_room_requested.emit(self.message.id))
            self.room_button.hide()
            layout.addWidget(self.room_button, 0, Qt.AlignmentFlag.AlignLeft)

        self.progress = Label()
        self.progress.setObjectName("messageProgress")
        self.progress.setAccessibleName("Answer progress")
        self.progress.hide()
        layout.addWidget(self.progress)

        self.editor: InputBox | None = None
        self.edit_row: QWidget | None = None

        self.footer = Label()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.footer)

        self.continue_button = None  # the last answer cut off at the longest answer: the model goes on with it
        self.continue_offered = False  # whether the model in use can (the view says: not a remote server)
        if not self.user:
            self.continue_button = button("Continue", SECONDARY)
            self.continue_button.setAccessibleName("Continue the answer")
            self.continue_button.setToolTip("The model goes on from where the answer stopped, in this answer")
            self.continue_button.clicked.connect(self.continue_requested)
            self.continue_button.hide()
            layout.addWidget(self.continue_button, 0, Qt.AlignmentFlag.AlignLeft)

        self.actions = QWidget()
        self.actions.setObjectName("messageActions")
        actions = QHBoxLayout(self.actions)
        actions.setContentsMargins(0, 0, 0, 0)
        actions.setSpacing(2)
        self.copy_button = _action_button("copy", "Copy message", "Copy this message (as Markdown)")
        self.copy_button.clicked.connect(self.copy_text)
        actions.addWidget(self.copy_button)
        self.edit_button = (  # yours: change and resend; an answer: change its words
            _action_button("pencil", "Edit message and resend", "Edit this message and get a new answer")
            if self.user
            else _action_button(
                "pencil", "Edit answer", "Change the answer's words: the model reads your version from now on"
            )
        )
        self.edit_button.clicked.connect(self.start_editing)
        actions.addWidget(self.edit_button)
        self.regenerate_button: QToolButton | None = None
        self.branch_button: QToolButton | None = None
        if not self.user:
            self.branch_button = _action_button(
                "git-branch", "Branch in new chat", "A new chat with the conversation up to this answer"
            )
            self.branch_button.clicked.connect(lambda: self.branch_requested.emit(self.message.id))
            actions.addWidget(self.branch_button)
            self.regenerate_button = _action_button(
                "refresh-cw", "Regenerate the answer", "Another answer; this one is kept to flip back to (Ctrl+R)"
            )
            self.regenerate_button.clicked.connect(self.regenerate_requested)
            actions.addWidget(self.regenerate_button)
        self.speed_label = Label()  # an answer's speed in plain words, beside its actions on hover
        self.speed_label.setObjectName("answerSpeed")
        self.speed_label.setAccessibleName("Answer speed")
        actions.addWidget(self.speed_label)
        actions.addWidget(self.time_label)
        self.previous_button = _action_button("chevron-left", "Previous answer", "Show the previous answer")
        self.previous_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, -1))
        self.alternative_label = Label()
        self.alternative_label.setObjectName("alternativeCount")
        self.next_button = _action_button("chevron-right", "Next answer", "Show the next answer")
        self.next_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, +1))
        for position, widget in enumerate((self.previous_button, self.alternative_label, self.next_button)):
            actions.insertWidget(position, widget)  # first, against the answer's edge: hovering adds beside it
        for action in (self.copy_button, self.edit_button, self.regenerate_button, self.branch_button):
            if action is not None:  # appearing on hover moves nothing beside them
                keep = action.sizePolicy()
                keep.setRetainSizeWhenHidden(True)
                action.setSizePolicy(keep)
        policy = self.actions.sizePolicy()
        policy.setRetainSizeWhenHidden(True)  # hover shows the actions without moving the text
        self.actions.setSizePolicy(policy)
        under = QHBoxLayout()  # the actions sit under the bubble, on its side
        under.setContentsMargins(8 if not self.user else 0, 0, 8 if self.user else 0, 0)
        if self.user:
            under.addStretch(1)
        under.addWidget(self.actions)
        if not self.user:
            under.addStretch(1)
        outer.addLayout(under)

        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.timeout.connect(self.render)
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(PROGRESS_MS)
        self._progress_timer.timeout.connect(self._show_progress)
        self.set_message(message)

    # -- content -------------------------------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self.message.status == S.STREAMING

    def set_message(self, message: Message) -> None:
        if self.thinking is not None and message.id != self.message.id:  # another answer of the turn shown here
            self.thinking.reader_choice = None
        self.message = message
        # Only "writing…" here: the footer says stopped / interrupted / the error, once.
        self.status_label.setText(WRITING if message.status == S.STREAMING else "")
        self.status_label.setVisible(message.status == S.STREAMING)
        self.status_label.setAccessibleName(f"Status: {message.status}")
        self.time_label.setText(format_time(message.created_at))
        self.footer.setText(self._footer_text(message))
        self.footer.setVisible(bool(self.footer.text()))
        self.speed_label.setText(speed_words(message))
        self.speed_label.setToolTip(self._footer_details(message))
        self.body.setAccessibleDescription(message.content[:200])
        if self.tool_calls is not None:
            self.tool_calls.show_rounds(message.tool_rounds)
        self._show_progress()
        self._show_alternatives()
        if self.streaming:
            self._throttled_render()
        else:
            self._render_timer.stop()
            self.render()

    def progress_text(self) -> str:
        """While the answer has no text (nor thinking) yet: what the engine is doing and for how long; ""
        otherwise."""
        if not self.streaming or self.message.content or self.message.reasoning:
            return ""
        open_calls = {c.get("status") for r in self.message.tool_rounds for c in r.get("calls", [])}
        if "asking" in open_calls:
            return ""  # the card asks; nothing runs meanwhile
        if "running" in open_calls:
            return "Running the tool…"
        seconds = int(max(0.0, time.time() - self.message.created_at))
        stats = self.message.stats or {}
        if "prompt_tokens" in stats:
            new = stats["prompt_tokens"] - stats.get("reused_tokens", 0)
            expected = stats.get("expected_s")  # from the speed the last long prompt was read at
            estimate = f" of about {expected:.0f} s" if expected and expected >= 2 else ""
            what = "the conversation" if stats.get("whole_conversation") else "your message"
            return f"Reading {what} ({token_count(new)})… {seconds} s{estimate}"
        if stats.get("queued_behind"):
            ahead = stats["queued_behind"]
            return f"Waiting for {ahead} other answer{'s' if ahead > 1 else ''} to finish (programs using the local API)… {seconds} s"
        return f"Waiting for the engine… {seconds} s"

    def _thinking_now(self) -> bool:
        """Whether the model is thinking right now (its thinking streams, no answer yet)."""
        m = self.message
        return self.streaming and bool(m.reasoning) and not m.content

    def _show_progress(self) -> None:
        """The progress line while the prompt is read, the thinking's running time while the model thinks
        (both count up on a timer), and the body only where it has something to say."""
        text = self.progress_text()
        self.progress.setText(text)
        self.progress.setVisible(bool(text))
        if self.thinking is not None and self.message.reasoning:
            self.thinking.set_title(thinking_title(self.message))
        m = self.message
        # the progress line stands in for the "…", the open thinking block too; a thinking or tool cards that
        # are all there is (cut off, stopped) need no empty body under them
        has_words = bool(m.content) or m.status == S.FAILED or (self.streaming and not m.reasoning)
        has_words = has_words or not (m.reasoning or m.tool_rounds)
        self.body.setVisible(not text and self.editor is None and has_words)
        ticking = bool(text) or self._thinking_now()
        if ticking and not self._progress_timer.isActive():
            self._progress_timer.start()
        elif not ticking:
            self._progress_timer.stop()

    def _show_alternatives(self) -> None:
        m = self.message
        several = m.alt_count > 1 and not self.user
        for widget in (self.previous_button, self.alternative_label, self.next_button):
            widget.setVisible(several)
        if several:
            self.alternative_label.setText(f"{m.alt_index + 1} / {m.alt_count}")
            self.previous_button.setEnabled(m.alt_index > 0)
            self.next_button.setEnabled(m.alt_index < m.alt_count - 1)
        self._update_actions_visibility()

    def _throttled_render(self) -> None:
        """Render now if the last render is old enough, else once when it is (leading and trailing edge)."""
        interval_ms = max(MIN_RENDER_MS, RENDER_COST_FACTOR * self.last_render_ms)
        waited_ms = (time.perf_counter() - self._rendered_at) * 1000
        if waited_ms >= interval_ms:
            self._render_timer.stop()
            self.render()
        elif not self._render_timer.isActive():
            self._render_timer.start(int(interval_ms - waited_ms) + 1)

    def _footer_text(self, message: Message) -> str:
        stats = message.stats or {}
        parts = []
        if message.status == S.INTERRUPTED:  # the banner says why (the engine stopped, the connection was
            # lost); no pids, signals or addresses here
            lost = stats.get("kind") == "engine_died" or "engine" in stats.get("error", "")
            parts.append(
                "Interrupted: "
                + ("cut off before the answer was finished" if lost else stats.get("error") or "the answer was cut off")
            )
        elif message.status == S.FAILED and message.content:
            parts.append(error_text(message))
        elif message.status == S.STOPPED:
            parts.append("Stopped")
        if message.role == "assistant" and message.status == S.COMPLETE and stats.get("reason") == "length":
            parts.append(self._cut_off_words(message))
        if message.role == "assistant" and stats.get("edited"):
            parts.append("Edited by you")
        if message.role == "assistant" and stats.get("tool_note"):
            parts.append(stats["tool_note"][0].upper() + stats["tool_note"][1:])
        if (
            message.role == "assistant"
            and message.status == S.COMPLETE
            and not message.content
            and not message.reasoning
        ):
            parts.append(
                "The model ended its answer without writing anything. Regenerate asks it again; "
                "rewording your message may help"
            )
        return "   ".join(parts)

    def _cut_off_words(self, message: Message) -> str:
        """Why an answer stopped short, and the way on: Continue where it is offered (the last answer, with a
        model on this computer), else a longer answer next time."""
        if (message.stats or {}).get("context_full"):
            return (
                "Cut off where the chat fills all the model keeps in mind: a longer Context length in Settings "
                "holds more, or start a new chat"
            )
        where = "while still thinking" if message.reasoning and not message.content else "at the longest answer"
        if self._is_last and self.continue_offered:
            return f"Cut off {where}: Continue goes on from here (Longest answer is in Chat settings, Ctrl+Shift+S)"
        return f"Cut off {where}: raise Longest answer in Chat settings (Ctrl+Shift+S), then Regenerate for a whole one"

    def _footer_details(self, message: Message) -> str:
        """The answer's exact figures, on the speed's tooltip."""
        stats = message.stats or {}
        if message.role != "assistant" or not stats.get("tokens"):
            return ""
        tokens = stats["tokens"]
        lines = [
            f"{token_count(tokens)}{', thinking included' if message.reasoning else ''}"
            f" · {stats.get('tokens_per_s', 0):.1f} tokens/s",
            f"{stats.get('passes', 0)} passes of the model",
        ]
        if stats.get("tokens_per_pass", 0) > 1:
            lines.append(
                f"{stats['tokens_per_pass']:.2f} tokens per pass (the draft model's guesses that were "
                f"kept), tree budget {stats.get('budget', 0)}"
            )
        return "\n".join(lines)

    def render(self, force: bool = False) -> None:
        """Show the message's text (and a thinking model's thinking); `force` re-renders unchanged text (the
        theme changed)."""
        text, status = self.message.content, self.message.status
        started = time.perf_counter()
        thought = self._show_thinking()
        if (text, status) == self._rendered and not force:
            if thought:  # the thinking grew: its cost counts for the next render's wait too
                self._rendered_at = time.perf_counter()
                self.last_render_ms = (self._rendered_at - started) * 1000
            return
        if not text and self.streaming:
            self.body.set_plain("…")
        elif not text and status == S.FAILED:  # nothing was written: the error is the message
            self.body.set_plain(error_text(self.message))
        elif self.user:  # as typed; documents added to it as a line each, and a very long paste at its start
            folded = documents_folded(text)
            long = len(folded) > FOLD_CHARS
            self.fold_button.setVisible(long or folded != text)
            if self.folded:
                self.body.set_plain(folded[:FOLDED_CHARS].rstrip() + "…" if long else folded)
            else:
                self.body.set_plain(text)
        else:
            self.body.set_markdown(text, force=force)
        if self.bubble.property("failed") != (status == S.FAILED):
            self.bubble.setProperty("failed", status == S.FAILED)
            self.bubble.style().unpolish(self.bubble)
            self.bubble.style().polish(self.bubble)
        self._rendered = (text, status)
        self._rendered_at = time.perf_counter()
        self.last_render_ms = (self._rendered_at - started) * 1000
        self.render_count += 1
        self._fit_bubble()

    def _show_thinking(self) -> bool:
        """The thinking block as the message says: hidden without thinking; open while there is no answer
        (the model thinks, or the answer never came), folded once there is. True if its text changed."""
        if self.thinking is None:
            return False
        reasoning = self.message.reasoning
        self.thinking.setVisible(bool(reasoning))
        if not reasoning:
            return False
        changed = reasoning != self.thinking.text()
        self.thinking.show_thinking(reasoning, thinking_title(self.message), open_by_default=not self.message.content)
        return changed

    def copy_text(self) -> None:
        QGuiApplication.clipboard().setText(self.message.content)
        self.copied.emit("message")

    def _link(self, url: QUrl) -> None:
        if url.scheme() in OPENED_SCHEMES:  # never a file or a program (the hover says so: link_words)
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)

    # -- layout and hover ----------------------------------------------------------------------------------

    def _fit_bubble(self) -> None:
        """Your messages: a bubble as wide as the text, at most USER_BUBBLE_SHARE of the row."""
        if not self.user or self.width() <= 0:
            return
        widest = int(self.width() * USER_BUBBLE_SHARE)
        margins = self.bubble.layout().contentsMargins()
        ideal = self.body.ideal_width() + 16 + margins.left() + margins.right()
        self.bubble.setFixedWidth(max(MIN_BUBBLE_PX, min(widest, ideal)))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit_bubble()

    def set_last(self, last: bool, continue_offered: bool = False) -> None:
        """Regenerate is offered on the last answer only, and Continue too where `continue_offered` (the
        model in use can go on with an answer)."""
        if (last, continue_offered) == (self._is_last, self.continue_offered):
            return
        self._is_last, self.continue_offered = last, continue_offered
        self.footer.setText(self._footer_text(self.message))
        self.footer.setVisible(bool(self.footer.text()))
        self._update_actions_visibility()

    def enterEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        self._hovered = True
        self._update_actions_visibility()
        super().enterEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        self._hovered = False
        self._update_actions_visibility()
        super().leaveEvent(event)

    def _update_actions_visibility(self) -> None:
        """Copy, Edit, Regenerate and Branch show on hover; an answer's switcher between alternatives always shows
        (it says which answer this is); nothing while editing or streaming."""
        several = self.message.alt_count > 1 and not self.user
        idle = self.editor is None and not self.streaming
        for action in (self.copy_button, self.branch_button):
            if action is not None:
                action.setVisible(self._hovered)
        # an answer without words has none to change
        self.edit_button.setVisible(self._hovered and (self.user or bool(self.message.content)))
        if self.regenerate_button is not None:
            self.regenerate_button.setVisible(self._hovered and self._is_last)
        if self.room_button is not None:
            tokens = int((self.message.stats or {}).get("room_tokens") or 0)
            self.room_button.setVisible(self._is_last and self.message.status == S.FAILED and tokens > 0)
            self.room_button.setToolTip(
                f"Load the model again with room for {tokens:,} tokens of chat (Menu > Settings > Context "
                "length), then answer (Ctrl+R)"
            )
        if self.continue_button is not None:
            offered = self._is_last and self.continue_offered and self.editor is None  # not while being edited
            self.continue_button.setVisible(offered and unfinished(self.message))
        self.speed_label.setVisible(self._hovered and bool(self.speed_label.text()))
        self.time_label.setVisible(self._hovered)
        self.actions.setVisible(idle and (self._hovered or several))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt signature
        """A theme switch: render again, since links and code colours are baked into the rendered text. A
        text size change: the same, in views made anew at the new size (each part's font is set when made)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange and self._rendered is not None:
            self.body.clear()
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange) and self._rendered is not None:
            QTimer.singleShot(0, self._rerender)

    def _rerender(self) -> None:
        try:
            self.render(force=True)
        except RuntimeError:  # deleted meanwhile
            pass

    def _toggle_fold(self) -> None:
        self.folded = not self.folded
        self.fold_button.setText("Show more" if self.folded else "Show less")
        self.fold_button.setAccessibleName("Show the whole message" if self.folded else "Fold the message")
        self.render(force=True)

    # -- editing: your message (saved and resent) or an answer (saved) -------------------------------------

    def start_editing(self) -> None:
        if self.editor is not None:
            self.editor.setFocus()
            return
        self.editor = InputBox(cancellable=True, max_lines=MAX_LINES if self.user else EDITED_ANSWER_LINES)
        self.editor.setPlainText(self.message.content)
        self.editor.setPlaceholderText("")
        self.editor.setAccessibleName("Edit message" if self.user else "Edit answer")
        self.editor.setAccessibleDescription(
            f"Enter saves{' and resends' if self.user else ''}, Shift+Enter starts a new line, Esc cancels."
        )
        self.editor.moveCursor(QTextCursor.MoveOperation.End)  # go on typing where the message ends
        self.editor.submitted.connect(lambda _text: self._submit_edit())
        self.editor.cancelled.connect(self.stop_editing)
        self.editor.files_refused.connect(self.files_refused)
        self.editor.files_reading.connect(self.files_reading)
        self.edit_row = QWidget()
        row = QHBoxLayout(self.edit_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.resend_button = button("Save && resend" if self.user else "Save", PRIMARY)
        self.resend_button.setAccessibleName("Save edited message and resend" if self.user else "Save edited answer")
        self.resend_button.setToolTip("Save and resend (Enter)" if self.user else "Save (Enter)")
        self.resend_button.clicked.connect(self._submit_edit)
        self.cancel_edit_button = button("Cancel", SECONDARY)
        self.cancel_edit_button.setAccessibleName("Cancel editing")
        self.cancel_edit_button.setToolTip("Cancel (Esc)")
        self.cancel_edit_button.clicked.connect(self.stop_editing)
        row.addWidget(self.cancel_edit_button)
        row.addWidget(self.resend_button)
        layout = self.bubble.layout()
        index = layout.indexOf(self.body)
        layout.insertWidget(index + 1, self.editor)
        layout.insertWidget(index + 2, self.edit_row)
        if self.user:
            self.bubble.setFixedWidth(int(self.width() * USER_BUBBLE_SHARE))
        self.body.hide()
        self._update_actions_visibility()
        self.editor.setFocus()
        self.editing_started.emit()

    def stop_editing(self) -> None:
        if self.editor is None:
            return
        self.editor.stop_reading()
        for widget in (self.editor, self.edit_row):
            widget.hide()
            widget.deleteLater()
        self.editor = self.edit_row = None
        self.body.show()
        self._fit_bubble()
        self._update_actions_visibility()
        self.editing_stopped.emit()

    def _submit_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText().strip()
        if text:
            self.stop_editing()
            (self.edit_submitted if self.user else self.answer_edited).emit(self.message.id, text)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit and the alternatives are off while an answer streams."""
        for action in (self.edit_button, self.previous_button, self.next_button):
            if action is not None:
                action.setEnabled(enabled)
        if enabled:
            self._show_alternatives()
