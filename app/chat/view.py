"""The conversation on screen: one MessageWidget per row of a MessageListModel, in a scroll area; your
messages as bubbles on the right, answers in a readable column with room to breathe, code blocks as cards
with their language and a copy button, actions (icons) on hover.

Prose goes through QTextBrowser.setMarkdown; each code block is a CodeCard coloured by Pygments. While an
answer streams, a message re-renders on a timer whose interval grows with the cost of the last render (at
least 100 ms; three times the last render time), so a long answer never ties up the UI thread; the final
render happens at once when the answer ends. A theme switch re-renders every message (links and code colours
are baked into the rendered document from the palette).

A thinking model's thinking is a ThinkingBlock above its answer, in muted words: open while the model thinks
("Thinking… 5 s"), folded to one line ("Thought for 12 s") once the answer starts, one click to open again. It
stays open when there is no answer (the answer was cut off while the model was still thinking).

An answer that called tools shows a card per call (app/chat/tool_card.py) between its thinking and its words;
the cards' Allow / Deny reach the controller through ChatView.tool_decided.
"""

from __future__ import annotations

import time
from datetime import datetime

from PySide6.QtCore import QEvent, QModelIndex, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor, QFont, QFontDatabase, QGuiApplication, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument,
    QTextFrameFormat, QTextTable,
)
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QScrollArea, QSizePolicy, QTextBrowser,
    QToolButton, QVBoxLayout, QWidget,
)

from app.chat.highlight import highlight_document
from app.chat.markdown import segments
from app.chat.thinking_words import thought_summary
from app.chat.tool_card import ToolCallsBlock
from app.conversations import store as S
from app.conversations.list_models import MessageListModel
from app.conversations.store import Message
from app.theme.icons import themed
from app.theme.tokens import READABLE_COLUMN_PX, SPACE, TYPE, current
from app.window.buttons import LINK, PRIMARY, SECONDARY, button

# GitHub dialect (tables, fenced code, task lists); raw HTML in an answer is shown as text, not interpreted.
MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value | QTextDocument.MarkdownFeature.MarkdownNoHTML.value
)
MIN_RENDER_MS = 100
RENDER_COST_FACTOR = 3
STICK_TO_BOTTOM_PX = 48
PROGRESS_MS = 500  # the "reading your message… N s" line counts up
WRITING = "writing…"  # beside the time while an answer streams
COPIED_MS = 1500  # a copy button shows a tick this long
USER_BUBBLE_SHARE = 0.78  # your messages take at most this share of the row
MIN_BUBBLE_PX = 90
MAX_COLUMN_PX = READABLE_COLUMN_PX + 2 * SPACE.l  # the conversation column stays readable on a wide window
SIDE_MARGIN_PX = 20
SUGGESTIONS = (
    "What is the capital of France?",
    "Give me three ideas for a weekend trip by train.",
    "Write a Python function that checks whether a word is a palindrome.",
)


def body_font_size() -> float:
    """Answers and your messages: a step above the controls' font."""
    return QGuiApplication.font().pointSizeF() * TYPE.body


def set_line_height(document: QTextDocument, percent: int) -> None:
    """Every block of `document` at `percent` of its font's height (answers read better with air)."""
    cursor = QTextCursor(document)
    cursor.select(QTextCursor.SelectionType.Document)
    spacing = QTextBlockFormat()
    spacing.setLineHeight(percent, QTextBlockFormat.LineHeightTypes.ProportionalHeight.value)
    cursor.mergeBlockFormat(spacing)


def tighten_lists(document: QTextDocument, gap: float = 2.0) -> None:
    """List items close together (setMarkdown spaces each like a paragraph); the list as a whole keeps the
    paragraph spacing above and below it."""
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        if block.textList() is not None:
            previous, following = block.previous(), block.next()
            look = block.blockFormat()
            if previous.isValid() and previous.textList() is not None:
                look.setTopMargin(gap)
            if following.isValid() and following.textList() is not None:
                look.setBottomMargin(gap)
            cursor.setPosition(block.position())
            cursor.setBlockFormat(look)
        block = block.next()


def shade_inline_code(document: QTextDocument, background: str) -> None:
    """Give `inline code` (setMarkdown's fixed-pitch fragments) a tinted background, like a chip (drawn with
    the document's font settings, which setMarkdown's fixed-pitch font would otherwise drop)."""
    shade = QTextCharFormat()
    shade.setBackground(QColor(background))
    shade.setFontStyleStrategy(document.defaultFont().styleStrategy())
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.isValid() and fragment.charFormat().fontFixedPitch():
                cursor.setPosition(fragment.position())
                cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(shade)
            it += 1
        block = block.next()


def style_tables(document: QTextDocument, border: str) -> None:
    """Tables with thin single borders in the theme's colour and room in their cells (setMarkdown's default
    is a dark double border)."""
    frames = list(document.rootFrame().childFrames())
    while frames:
        frame = frames.pop()
        frames.extend(frame.childFrames())
        if isinstance(frame, QTextTable):
            look = frame.format()
            look.setBorder(1)
            look.setBorderBrush(QColor(border))
            look.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            look.setBorderCollapse(True)
            look.setCellSpacing(0)
            look.setCellPadding(SPACE.s - 2)
            frame.setFormat(look)


class MarkdownView(QTextBrowser):
    """A read-only text view as tall as its content (the chat's scroll area does the scrolling)."""

    link_activated = Signal(QUrl)

    def __init__(self, parent: QWidget | None = None, wrap: bool = True) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        if not wrap:
            self.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.anchorClicked.connect(self.link_activated)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def _fit(self, *_: object) -> None:
        height = int(self.document().size().height()) + 2 * self.frameWidth() + 2
        bar = self.horizontalScrollBar()
        if bar.isVisible() or (self.lineWrapMode() == QTextBrowser.LineWrapMode.NoWrap
                               and self.document().idealWidth() > self.viewport().width()):
            height += bar.sizeHint().height()
        if height != self.height():
            self.setFixedHeight(max(height, self.fontMetrics().height() + 8))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit()


class CodeCard(QFrame):
    """One code block as a card: its language and a Copy button on a header strip, the code below in a
    fixed-pitch font, coloured for the card's theme, scrolling sideways rather than wrapping."""

    copied = Signal(str)  # what was copied ("python code")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeCard")
        self.code = ""
        self.language = ""
        self._dark: bool | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(1, 1, 1, 1)
        layout.setSpacing(0)
        header = QWidget()
        header.setObjectName("codeHeader")
        header.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        row = QHBoxLayout(header)
        row.setContentsMargins(SPACE.m, 2, 4, 2)
        self.language_label = QLabel()
        self.language_label.setObjectName("codeLanguage")
        self.copy_button = QToolButton()
        self.copy_button.setObjectName("codeCopy")
        self.copy_button.setText("Copy")
        self.copy_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.copy_button.setAccessibleName("Copy code")
        self.copy_button.setToolTip("Copy this code to the clipboard")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self._copy_icon = themed(self.copy_button, "copy", "muted_text", size=14)
        self.copy_button.clicked.connect(self.copy)
        row.addWidget(self.language_label)
        row.addStretch(1)
        row.addWidget(self.copy_button)
        self.view = MarkdownView(wrap=False)
        self.view.setObjectName("codeText")
        self.view.setAccessibleName("Code")
        font = QFont(QGuiApplication.font())  # the application's font settings (hinting, antialiasing) ...
        font.setFamilies(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).families())  # ... fixed pitch
        font.setFixedPitch(True)
        font.setPointSizeF(body_font_size() * 0.9)  # fixed-pitch fonts look larger at the same size
        self.view.setFont(font)
        self.view.document().setDefaultFont(font)
        self.view.document().setDocumentMargin(SPACE.m)
        layout.addWidget(header)
        layout.addWidget(self.view)

    def set_code(self, code: str, language: str) -> None:
        dark = current().dark
        if (code, language, dark) == (self.code, self.language, self._dark):
            return
        self.code, self.language, self._dark = code, language, dark
        self.language_label.setText(language or "code")
        self.view.setPlainText(code)
        highlight_document(self.view.document(), language, dark)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copied.emit(f"{self.language} code".strip())
        self._copy_icon.set("check")
        self.copy_button.setText("Copied")
        QTimer.singleShot(COPIED_MS, self._copy_done)

    def _copy_done(self) -> None:
        try:
            self._copy_icon.set("copy")
            self.copy_button.setText("Copy")
        except RuntimeError:  # the card went away meanwhile
            pass


class MessageBody(QWidget):
    """What a message says: plain text (yours, a placeholder, an error) in one view, or an answer's Markdown
    as prose views and code cards in order. Widgets are reused while an answer streams, so the text so far
    is not rebuilt from scratch on every render."""

    link_activated = Signal(QUrl)
    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(SPACE.s)
        self.parts: list[QWidget] = []
        self._texts: list[tuple[str, str, str]] = []  # (kind, text, language) shown by each part

    def _part(self, index: int, kind: str) -> QWidget:
        """The part at `index`, of `kind`; a part of another kind there (and all after it) is replaced."""
        if index < len(self.parts) and isinstance(self.parts[index], CodeCard) == (kind == "code"):
            return self.parts[index]
        self._drop_from(index)
        if kind == "code":
            part = CodeCard()
            part.copied.connect(self.copied)
        else:
            part = MarkdownView()
            part.link_activated.connect(self.link_activated)
            font = part.font()
            font.setPointSizeF(body_font_size())
            part.setFont(font)
            part.document().setDefaultFont(font)
        self.column.addWidget(part)
        self.parts.append(part)
        self._texts.append(("", "", ""))
        return part

    def _drop_from(self, index: int) -> None:
        for part in self.parts[index:]:
            self.column.removeWidget(part)
            part.hide()
            part.deleteLater()
        del self.parts[index:]
        del self._texts[index:]

    def set_plain(self, text: str) -> None:
        view = self._part(0, "plain")
        if self._texts[0] != ("plain", text, ""):
            view.setPlainText(text)
            set_line_height(view.document(), TYPE.body_line_height)
            self._texts[0] = ("plain", text, "")
        self._drop_from(1)

    def set_markdown(self, text: str, force: bool = False) -> None:
        colors = current()
        pieces = segments(text)
        for index, piece in enumerate(pieces):
            part = self._part(index, piece.kind)
            key = (piece.kind, piece.text, piece.language)
            if isinstance(part, CodeCard):
                part.set_code(piece.text, piece.language)
            elif force or self._texts[index] != key:
                part.document().setMarkdown(piece.text, MARKDOWN_FEATURES)
                set_line_height(part.document(), TYPE.body_line_height)
                tighten_lists(part.document())
                shade_inline_code(part.document(), colors.surface_alt)
                style_tables(part.document(), colors.border)
            self._texts[index] = key
        if not pieces:
            self.set_plain("")
            return
        self._drop_from(len(pieces))

    def toPlainText(self) -> str:  # noqa: N802 - mirrors QTextEdit's name, which tests and callers expect
        return "\n".join(part.code if isinstance(part, CodeCard) else part.toPlainText() for part in self.parts)

    def code_cards(self) -> list[CodeCard]:
        return [part for part in self.parts if isinstance(part, CodeCard)]

    def ideal_width(self) -> int:
        """The width the text needs on one line per paragraph (for sizing your bubbles)."""
        if not self.parts or isinstance(self.parts[0], CodeCard):
            return self.width()
        probe = self.parts[0].document().clone(self)
        probe.setTextWidth(-1)
        width = int(probe.idealWidth())
        probe.deleteLater()
        return width


def sentence(text: str) -> str:
    """`text` as a sentence: a capital first letter, no trailing full stop (the caller adds one)."""
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:]


def error_text(message: Message) -> str:
    """A failed answer's error in plain sentences: what happened, then what to do."""
    stats = message.stats or {}
    text = sentence(stats.get("error") or "the engine reported an error") + "."
    if stats.get("hint"):
        text += " " + sentence(stats["hint"]) + "."
    return text


def format_time(timestamp: float, now: float | None = None) -> str:
    """"14:02" today, "23 Nov 14:02" on another day (local time)."""
    if timestamp <= 0:
        return ""
    moment = datetime.fromtimestamp(timestamp)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    return moment.strftime("%H:%M") if moment.date() == today else moment.strftime("%d %b %H:%M").lstrip("0")


def thinking_title(message: Message, now: float | None = None) -> str:
    """The thinking block's one line: "Thinking… 5 s" while the model thinks, then "Thought for 12 s"."""
    stats = message.stats or {}
    started = stats.get("thinking_started_at")
    if message.status == S.STREAMING and "thinking_seconds" not in stats:
        if isinstance(started, (int, float)):
            return f"Thinking… {int(max(0.0, (time.time() if now is None else now) - started))} s"
        return "Thinking…"
    return thought_summary(stats)


class ThinkingBlock(QFrame):
    """A thinking model's thinking above its answer: a one-line toggle (a chevron and the title) over the
    thinking in muted words with a rule at its left. Folded or open as `show_thinking` says, until the reader
    clicks: from then on this block stays as the reader left it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingBlock")
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(SPACE.xs)
        self.toggle = QToolButton()
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self._icon = themed(self.toggle, "chevron-right", "muted_text", size=14)
        self.toggle.clicked.connect(self._clicked)
        self.text_frame = QFrame()
        self.text_frame.setObjectName("thinkingText")
        inner = QVBoxLayout(self.text_frame)
        inner.setContentsMargins(SPACE.m, 0, 0, 0)
        self.view = MarkdownView()
        self.view.setObjectName("thinkingView")
        self.view.setAccessibleName("The model's thinking")
        font = self.view.font()
        font.setPointSizeF(QGuiApplication.font().pointSizeF())  # a step below the answer's words
        self.view.setFont(font)
        self.view.document().setDefaultFont(font)
        inner.addWidget(self.view)
        column.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        column.addWidget(self.text_frame)
        self.expanded = False
        self.reader_choice: bool | None = None  # open (True) or folded (False) by a click
        self._text = ""
        self._set_expanded(False)

    def show_thinking(self, text: str, title: str, open_by_default: bool) -> None:
        """Show `text` under `title`; open or folded as `open_by_default` says unless the reader chose."""
        if text != self._text:
            if self._text and text.startswith(self._text):  # it grew while streaming: add the new words only
                cursor = QTextCursor(self.view.document())
                cursor.movePosition(QTextCursor.MoveOperation.End)
                cursor.insertText(text[len(self._text):])  # new lines take the last one's line height
            else:
                self.view.setPlainText(text)
                set_line_height(self.view.document(), TYPE.body_line_height - 10)
            self._text = text
        self.set_title(title)
        self._set_expanded(open_by_default if self.reader_choice is None else self.reader_choice)

    def set_title(self, title: str) -> None:
        if self.toggle.text() != title:
            self.toggle.setText(title)
            self._describe()

    def text(self) -> str:
        return self._text

    def _clicked(self) -> None:
        self.reader_choice = not self.expanded
        self._set_expanded(self.reader_choice)

    def _set_expanded(self, expanded: bool) -> None:
        if expanded == self.expanded and self.text_frame.isHidden() != expanded:
            return
        self.expanded = expanded
        self.text_frame.setVisible(expanded)
        self._icon.set("chevron-down" if expanded else "chevron-right")
        self._describe()

    def _describe(self) -> None:
        what = "Hide the model's thinking" if self.expanded else "Show the model's thinking"
        self.toggle.setAccessibleName(f"{self.toggle.text()}: {what.lower()}")
        self.toggle.setToolTip(what)


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
    hover (Copy, Edit for your messages; Copy, Regenerate on the last answer). An answer with alternatives
    always shows its "‹ 2 / 3 ›" switcher."""

    edit_submitted = Signal(int, str)  # message id, new text
    editing_started = Signal()  # the editor opened in place (the view scrolls it into sight)
    copied = Signal(str)  # what was copied (for the status bar)
    regenerate_requested = Signal()
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

        header = QHBoxLayout()
        header.setSpacing(8)
        self.who = QLabel("You" if self.user else "Assistant")
        self.who.setObjectName("messageAuthor")
        self.time_label = QLabel()
        self.time_label.setObjectName("messageTime")
        self.status_label = QLabel()
        self.status_label.setObjectName("messageTime")
        header.addWidget(self.who)
        header.addWidget(self.time_label)
        header.addWidget(self.status_label)
        header.addStretch(1)
        layout.addLayout(header)

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

        self.progress = QLabel()
        self.progress.setObjectName("messageProgress")
        self.progress.setAccessibleName("Answer progress")
        self.progress.hide()
        layout.addWidget(self.progress)

        self.editor: QPlainTextEdit | None = None
        self.edit_row: QWidget | None = None

        self.footer = QLabel()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.footer)

        self.actions = QWidget()
        self.actions.setObjectName("messageActions")
        actions = QHBoxLayout(self.actions)
        actions.setContentsMargins(0, 0, 0, 0)
        actions.setSpacing(2)
        self.copy_button = _action_button("copy", "Copy message", "Copy this message (as Markdown)")
        self.copy_button.clicked.connect(self.copy_text)
        actions.addWidget(self.copy_button)
        self.edit_button: QToolButton | None = None
        self.regenerate_button: QToolButton | None = None
        if self.user:
            self.edit_button = _action_button("pencil", "Edit message and resend", "Edit this message and get a new answer")
            self.edit_button.clicked.connect(self.start_editing)
            actions.addWidget(self.edit_button)
        else:
            self.regenerate_button = _action_button("refresh-cw", "Regenerate the answer",
                                                    "Another answer; this one is kept to flip back to (Ctrl+R)")
            self.regenerate_button.clicked.connect(self.regenerate_requested)
            actions.addWidget(self.regenerate_button)
        self.previous_button = _action_button("chevron-left", "Previous answer", "Show the previous answer")
        self.previous_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, -1))
        self.alternative_label = QLabel()
        self.alternative_label.setObjectName("alternativeCount")
        self.next_button = _action_button("chevron-right", "Next answer", "Show the next answer")
        self.next_button.clicked.connect(lambda: self.alternative_requested.emit(self.message.id, +1))
        for position, widget in enumerate((self.previous_button, self.alternative_label, self.next_button)):
            actions.insertWidget(position, widget)  # first, against the answer's edge: hovering adds beside it
        for action in (self.copy_button, self.edit_button, self.regenerate_button):
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
        self.status_label.setAccessibleName(f"Status: {message.status}")
        self.time_label.setText(format_time(message.created_at))
        self.footer.setText(self._footer_text(message))
        self.footer.setToolTip(self._footer_details(message))
        self.footer.setVisible(bool(self.footer.text()))
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
            return f"Reading {what} ({new:,} tokens)… {seconds} s{estimate}"
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
        # the progress line stands in for the "…", the open thinking block too; a thinking that is all there
        # is (cut off) needs no empty body under it
        has_words = bool(m.content) or not m.reasoning or m.status == S.FAILED
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
            parts.append("Interrupted: " + ("cut off before the answer was finished" if lost
                                            else stats.get("error") or "the answer was cut off"))
        elif message.status == S.FAILED and message.content:
            parts.append(error_text(message))
        elif message.status == S.STOPPED:
            parts.append("Stopped")
        if (message.role == "assistant" and message.reasoning and not message.content
                and message.status == S.COMPLETE and stats.get("reason") == "length"):
            parts.append("Cut off while still thinking: raise Longest answer in Chat settings")
        if message.role == "assistant" and stats.get("tool_note"):
            parts.append(stats["tool_note"][0].upper() + stats["tool_note"][1:])
        if message.role == "assistant" and stats.get("tokens"):
            with_thinking = ", thinking included" if message.reasoning else ""
            parts.append(f"{stats['tokens']} tokens{with_thinking} · {stats.get('tokens_per_s', 0):.1f} tokens/s")
        return "   ".join(parts)

    def _footer_details(self, message: Message) -> str:
        """The answer's technical figures, one hover away."""
        stats = message.stats or {}
        if message.role != "assistant" or not stats.get("tokens"):
            return ""
        lines = [f"{stats['tokens']} tokens in {stats.get('passes', 0)} passes of the model"
                 + (" (the thinking and the answer)" if message.reasoning else "")]
        if stats.get("tokens_per_pass", 0) > 1:
            lines.append(f"{stats['tokens_per_pass']:.2f} tokens per pass (the draft model's guesses that were "
                         f"kept), tree budget {stats.get('budget', 0)}")
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
        elif self.user:  # what the user typed is shown as typed
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
        if url.scheme() in ("http", "https", "mailto"):
            from PySide6.QtGui import QDesktopServices

            QDesktopServices.openUrl(url)

    # -- layout and hover ----------------------------------------------------------------------------------

    def _fit_bubble(self) -> None:
        """Your messages: a bubble as wide as the text, at most USER_BUBBLE_SHARE of the row."""
        if not self.user or self.width() <= 0:
            return
        widest = int(self.width() * USER_BUBBLE_SHARE)
        margins = self.bubble.layout().contentsMargins()
        header = self.bubble.layout().itemAt(0).sizeHint().width()  # "You 12:02" must fit too
        ideal = max(self.body.ideal_width() + 16, header) + margins.left() + margins.right()
        self.bubble.setFixedWidth(max(MIN_BUBBLE_PX, min(widest, ideal)))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        self._fit_bubble()

    def set_last(self, last: bool) -> None:
        """Regenerate is offered on the last answer only."""
        self._is_last = last
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
        """Copy, Edit and Regenerate show on hover; an answer's switcher between alternatives always shows
        (it says which answer this is); nothing while editing or streaming."""
        several = self.message.alt_count > 1 and not self.user
        idle = self.editor is None and not self.streaming
        for action in (self.copy_button, self.edit_button):
            if action is not None:
                action.setVisible(self._hovered)
        if self.regenerate_button is not None:
            self.regenerate_button.setVisible(self._hovered and self._is_last)
        self.actions.setVisible(idle and (self._hovered or several))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt signature
        """A theme switch: render again, since links and code colours are baked into the rendered text."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._rendered is not None:
            QTimer.singleShot(0, self._rerender)

    def _rerender(self) -> None:
        try:
            self.render(force=True)
        except RuntimeError:  # deleted meanwhile
            pass

    # -- editing (user messages) ---------------------------------------------------------------------------

    def start_editing(self) -> None:
        if self.editor is not None:
            self.editor.setFocus()
            return
        self.editor = QPlainTextEdit(self.message.content)
        self.editor.setAccessibleName("Edit message")
        self.editor.setMaximumHeight(160)
        self.edit_row = QWidget()
        row = QHBoxLayout(self.edit_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.resend_button = button("Save && resend", PRIMARY)
        self.resend_button.setAccessibleName("Save edited message and resend")
        self.resend_button.clicked.connect(self._submit_edit)
        self.cancel_edit_button = button("Cancel", SECONDARY)
        self.cancel_edit_button.setAccessibleName("Cancel editing")
        self.cancel_edit_button.clicked.connect(self.stop_editing)
        row.addWidget(self.cancel_edit_button)
        row.addWidget(self.resend_button)
        layout = self.bubble.layout()
        index = layout.indexOf(self.body)
        layout.insertWidget(index + 1, self.editor)
        layout.insertWidget(index + 2, self.edit_row)
        self.bubble.setFixedWidth(int(self.width() * USER_BUBBLE_SHARE))
        self.body.hide()
        self._update_actions_visibility()
        self.editor.setFocus()
        self.editing_started.emit()

    def stop_editing(self) -> None:
        if self.editor is None:
            return
        for widget in (self.editor, self.edit_row):
            widget.hide()
            widget.deleteLater()
        self.editor = self.edit_row = None
        self.body.show()
        self._fit_bubble()
        self._update_actions_visibility()

    def _submit_edit(self) -> None:
        if self.editor is None:
            return
        text = self.editor.toPlainText().strip()
        if text:
            self.stop_editing()
            self.edit_submitted.emit(self.message.id, text)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit and the alternatives are off while an answer streams."""
        for action in (self.edit_button, self.previous_button, self.next_button):
            if action is not None:
                action.setEnabled(enabled)
        if enabled:
            self._show_alternatives()


class ChatView(QScrollArea):
    """Binds to a MessageListModel: rows in, rows out, rows changed. Empty, it shows a welcome with the
    model pair and a few suggestions to start from."""

    edit_submitted = Signal(int, str)
    copied = Signal(str)
    regenerate_requested = Signal()
    alternative_requested = Signal(int, int)  # message id, step
    tool_decided = Signal(str, str)  # call id, decision: a tool card's answer
    suggestion_clicked = Signal(str)
    models_requested = Signal()  # "Get a bigger model" in the empty chat

    def __init__(self, model: MessageListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.widgets: list[MessageWidget] = []
        self._actions_enabled = True
        self._regenerate_enabled = True
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName("Conversation")
        self.setObjectName("chatView")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        container = QWidget()
        container.setObjectName("chatContainer")
        self.column = QVBoxLayout(container)  # centred by its side margins (resizeEvent), not a nested layout
        self.column.setContentsMargins(SIDE_MARGIN_PX, 16, SIDE_MARGIN_PX, 16)
        self.column.setSpacing(SPACE.l)
        self.placeholder = self._welcome()
        self.column.addWidget(self.placeholder)
        self.column.addStretch(1)
        self.setWidget(container)
        self._stick = True
        self._editing: MessageWidget | None = None  # a message being edited in place, kept in sight
        self.verticalScrollBar().rangeChanged.connect(self._range_changed)
        self.verticalScrollBar().valueChanged.connect(self._value_changed)
        model.modelReset.connect(self._rebuild)
        model.rowsInserted.connect(self._inserted)
        model.rowsRemoved.connect(self._removed)
        model.dataChanged.connect(self._changed)
        self._rebuild()

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        side = max(SIDE_MARGIN_PX, (self.viewport().width() - MAX_COLUMN_PX) // 2)
        self.column.setContentsMargins(side, 16, side, 16)

    def _welcome(self) -> QWidget:
        welcome = QWidget()
        welcome.setObjectName("chatPlaceholder")
        layout = QVBoxLayout(welcome)
        layout.setContentsMargins(0, 60, 0, 0)
        layout.setSpacing(10)
        title = QLabel("How can I help?")
        title.setObjectName("welcomeTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label = QLabel()
        self.placeholder_label.setObjectName("welcomeText")
        self.placeholder_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label.setWordWrap(True)
        self.placeholder_label.setMinimumWidth(420)
        self.placeholder_label.setMaximumWidth(560)
        self.models_button = button("Get a bigger model", LINK,
                                    "Models that answer better, and how fast each would run on this computer")
        self.models_button.clicked.connect(self.models_requested)
        self.models_button.hide()
        layout.addWidget(title)
        for widget in (self.placeholder_label, self.models_button):
            row = QHBoxLayout()
            row.addStretch(1)
            row.addWidget(widget)
            row.addStretch(1)
            layout.addLayout(row)
        layout.addSpacing(SPACE.s)
        self.suggestion_buttons = []
        for text in SUGGESTIONS:
            suggestion = QPushButton(text)
            suggestion.setObjectName("suggestion")
            suggestion.setAccessibleName(f"Suggestion: {text}")
            suggestion.setCursor(Qt.CursorShape.PointingHandCursor)
            suggestion.clicked.connect(lambda _=False, t=text: self.suggestion_clicked.emit(t))
            row = QHBoxLayout()
            row.addStretch(1)
            row.addWidget(suggestion)
            row.addStretch(1)
            layout.addLayout(row)
            self.suggestion_buttons.append(suggestion)
        return welcome

    def set_welcome(self, text: str, offer_models: bool = False) -> None:
        """What the empty chat says about the model in use; `offer_models`: a link to bigger ones."""
        self.placeholder_label.setText(text)
        self.models_button.setVisible(offer_models)

    def placeholder_text(self) -> str:
        return self.placeholder_label.text()

    # -- model binding -------------------------------------------------------------------------------------

    def _make(self, message: Message) -> MessageWidget:
        widget = MessageWidget(message)
        widget.edit_submitted.connect(self.edit_submitted)
        widget.editing_started.connect(lambda: self._show_editor(widget))
        widget.copied.connect(self.copied)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.alternative_requested.connect(self.alternative_requested)
        widget.tool_decided.connect(self.tool_decided)
        widget.set_actions_enabled(self._actions_enabled)
        return widget

    def _show_editor(self, widget: MessageWidget) -> None:
        """A message edited in place: its editor and buttons in sight (one near the bottom edge may open below
        it). The editor's height is known only once laid out, which also grows the scroll range: the view
        scrolls to it then, and again whenever the range changes while it is open."""
        self._stick = False
        self._editing = widget
        QTimer.singleShot(0, self._reveal_editor)

    def _reveal_editor(self) -> None:
        widget = self._editing
        if widget is None or widget.edit_row is None or widget not in self.widgets:
            self._editing = None
            return
        self.ensureWidgetVisible(widget.edit_row, 0, SPACE.xl)

    def _rebuild(self) -> None:
        for widget in self.widgets:
            self.column.removeWidget(widget)
            widget.hide()  # at once: deleteLater waits for the event loop, and a shown widget would linger
            widget.deleteLater()
        self.widgets = []
        for message in self.model.rows:
            widget = self._make(message)
            self.column.insertWidget(self.column.count() - 1, widget)
            self.widgets.append(widget)
        self._rows_changed()
        self._stick = True
        QTimer.singleShot(0, self.scroll_to_bottom)

    def _inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        for row in range(first, last + 1):
            widget = self._make(self.model.rows[row])
            self.column.insertWidget(1 + row, widget)  # 0 is the placeholder
            self.widgets.insert(row, widget)
        self._rows_changed()
        self._stick = True

    def _removed(self, parent: QModelIndex, first: int, last: int) -> None:
        for widget in self.widgets[first : last + 1]:
            self.column.removeWidget(widget)
            widget.hide()
            widget.deleteLater()
        del self.widgets[first : last + 1]
        self._rows_changed()

    def _changed(self, top: QModelIndex, bottom: QModelIndex, roles: list[int] | None = None) -> None:
        for row in range(top.row(), bottom.row() + 1):
            if 0 <= row < len(self.widgets):
                self.widgets[row].set_message(self.model.rows[row])
        self._rows_changed()

    def _rows_changed(self) -> None:
        self.placeholder.setVisible(not self.widgets)
        for number, widget in enumerate(self.widgets):
            widget.set_last(number == len(self.widgets) - 1)
        self.set_regenerate_enabled(self._regenerate_enabled)

    def set_actions_enabled(self, enabled: bool) -> None:
        """Edit buttons and alternatives are off while an answer streams."""
        self._actions_enabled = enabled
        for widget in self.widgets:
            widget.set_actions_enabled(enabled)

    def set_regenerate_enabled(self, enabled: bool) -> None:
        self._regenerate_enabled = enabled
        for widget in self.widgets:
            if widget.regenerate_button is not None:
                widget.regenerate_button.setEnabled(enabled)

    def focus_tool_call(self, message_id: int, call_id: str) -> None:
        """A tool card asks: bring it into sight and give it the keyboard (Esc denies)."""
        widget = next((w for w in self.widgets if w.message.id == message_id), None)
        card = widget.tool_calls.card(call_id) if widget is not None and widget.tool_calls is not None else None
        if card is not None:
            self.ensureWidgetVisible(card)
            card.setFocus(Qt.FocusReason.OtherFocusReason)

    def last_answer(self) -> MessageWidget | None:
        return next((w for w in reversed(self.widgets) if not w.user), None)

    # -- scrolling: follow the answer while the user is at the bottom ---------------------------------------

    def _value_changed(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = bar.maximum() - value <= STICK_TO_BOTTOM_PX

    def _range_changed(self, _minimum: int, maximum: int) -> None:
        if self._editing is not None:
            self._reveal_editor()
        elif self._stick:
            self.verticalScrollBar().setValue(maximum)

    def scroll_to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())
