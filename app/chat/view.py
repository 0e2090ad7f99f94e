"""The conversation on screen: one MessageWidget per row of a MessageListModel, in a scroll area, the
column centred and never wider than reads well; empty, a welcome with suggestions. The message itself is in
message_widget.py, its text in message_text.py, the thinking block in thinking_block.py, tool calls' cards in
tool_card.py.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QScrollArea, QVBoxLayout, QWidget

from app.chat.message_widget import MessageWidget
from app.conversations.list_models import MessageListModel
from app.conversations.store import Message
from app.theme.tokens import READABLE_COLUMN_PX, SPACE
from app.window.buttons import LINK, button
from app.window.labels import Label

STICK_TO_BOTTOM_PX = 48
MAX_COLUMN_PX = READABLE_COLUMN_PX + 2 * SPACE.l  # the conversation column stays readable on a wide window
SIDE_MARGIN_PX = 20
SUGGESTIONS = (
    "What is the capital of France?",
    "Give me three ideas for a weekend trip by train.",
    "Write a Python function that checks whether a word is a palindrome.",
)


class ChatView(QScrollArea):
    """Binds to a MessageListModel: rows in, rows out, rows changed. Empty, it shows a welcome with the
    model pair and a few suggestions to start from."""

    edit_submitted = Signal(int, str)
    answer_edited = Signal(int, str)  # message id, new words (MessageWidget.answer_edited)
    copied = Signal(str)
    files_refused = Signal(str)  # why files dropped on a message being edited were not added
    files_reading = Signal(str)  # the PDFs dropped on it being read
    regenerate_requested = Signal()
    branch_requested = Signal(int)  # message id (MessageWidget.branch_requested)
    editing_stopped = Signal()  # a message edited in place was saved or cancelled
    make_room_requested = Signal(int)  # message id (MessageWidget.make_room_requested)
    continue_requested = Signal()  # the last answer's Continue (MessageWidget.continue_requested)
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
        self._room_enabled = True
        self._continue_offered = False
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName("Conversation")
        self.setObjectName("chatView")
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        container = QWidget()
        container.setObjectName("chatContainer")
        self.column = QVBoxLayout(container)  # centred by its side margins (resizeEvent), not a nested layout
        self.column.setContentsMargins(SIDE_MARGIN_PX, 16, SIDE_MARGIN_PX, 16)
        self.column.setSpacing(SPACE.xs)  # the actions row under each turn (kept when hidden) spaces them too
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
        title = Label("How can I help?")
        title.setObjectName("welcomeTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label = Label()
        self.placeholder_label.setObjectName("welcomeText")
        self.placeholder_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder_label.setWordWrap(True)
        self.placeholder_label.setMinimumWidth(420)
        self.placeholder_label.setMaximumWidth(560)
        self.models_button = button(
            "Get a bigger model", LINK, "Models that answer better, and how fast each would run on this computer"
        )
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
        widget.answer_edited.connect(self.answer_edited)
        widget.editing_started.connect(lambda: self._show_editor(widget))
        widget.editing_stopped.connect(self.editing_stopped)
        widget.copied.connect(self.copied)
        widget.files_refused.connect(self.files_refused)
        widget.files_reading.connect(self.files_reading)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.branch_requested.connect(self.branch_requested)
        widget.make_room_requested.connect(self.make_room_requested)
        widget.continue_requested.connect(self.continue_requested)
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
            widget.set_last(number == len(self.widgets) - 1, self._continue_offered)
        self.set_regenerate_enabled(self._regenerate_enabled)
        self.set_room_enabled(self._room_enabled)

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

    def set_continue_offered(self, offered: bool) -> None:
        """Whether the last answer, when cut off, offers Continue: the model in use can go on with it (one on
        this computer, running); else its footer says how to get a longer answer instead."""
        if offered != self._continue_offered:
            self._continue_offered = offered
            self._rows_changed()

    def set_room_enabled(self, enabled: bool) -> None:
        """Make room is off while an answer streams and while the model loads again to make room."""
        self._room_enabled = enabled
        for widget in self.widgets:
            if widget.room_button is not None:
                widget.room_button.setEnabled(enabled)

    def focus_tool_call(self, message_id: int, call_id: str) -> None:
        """A tool card asks: bring it into sight and give it the keyboard (Esc denies)."""
        widget = next((w for w in self.widgets if w.message.id == message_id), None)
        card = widget.tool_calls.card(call_id) if widget is not None and widget.tool_calls is not None else None
        if card is not None:
            self.ensureWidgetVisible(card)
            card.setFocus(Qt.FocusReason.OtherFocusReason)

    def last_answer(self) -> MessageWidget | None:
        return next((w for w in reversed(self.widgets) if not w.user), None)

    def edit_last_message(self) -> bool:
        """Your last message opened for editing in place, the keyboard in it; False when there is none or
        editing is off (an answer is being written)."""
        mine = next((w for w in reversed(self.widgets) if w.user), None)
        if mine is None or not self._actions_enabled:
            return False
        mine.start_editing()
        return True

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
