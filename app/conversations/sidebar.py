"""The sidebar: New chat, search box, conversation list (bound to ConversationListModel), Rename / Delete,
and an empty state in the list's place when there is nothing to show ("No chats match …")."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.conversations.list_models import ConversationListModel
from app.theme.icons import themed
from app.theme.tokens import SPACE
from app.window.buttons import SECONDARY, button

RENAME_EXTRA_PX = 10  # the rename box: the text's height plus its own padding and border


class _TitleDelegate(QStyledItemDelegate):
    """Rows as the style draws them; the rename box over the whole row and at least a line of text tall (the
    style's item padding would otherwise squeeze it to a few pixels)."""

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: QModelIndex) -> None:  # noqa: N802
        rect = option.rect
        height = max(rect.height(), editor.fontMetrics().height() + RENAME_EXTRA_PX)
        editor.setGeometry(rect.x(), rect.y() + (rect.height() - height) // 2, rect.width(), height)


class _ListView(QListView):
    delete_pressed = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Delete and self.state() != QAbstractItemView.State.EditingState:
            self.delete_pressed.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class ConversationList(QWidget):
    new_requested = Signal()
    selected = Signal(int)  # conversation id
    delete_requested = Signal(int)
    search_changed = Signal(str)

    def __init__(self, model: ConversationListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.s, SPACE.s, SPACE.xs, SPACE.s)
        layout.setSpacing(SPACE.s)
        self.new_button = QPushButton("&New chat")
        self.new_button.setObjectName("newChat")
        themed(self.new_button, "square-pen")
        self.new_button.setAccessibleName("New chat")
        self.new_button.setToolTip("Start a new chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        layout.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setObjectName("sidebarSearch")
        self.search.setPlaceholderText("Search chats")
        self.search.setAccessibleName("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed)
        layout.addWidget(self.search)
        self.view = _ListView()
        self.view.setModel(model)
        self.view.setItemDelegate(_TitleDelegate(self.view))
        self.view.setAccessibleName("Conversations")
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setUniformItemSizes(True)
        self.view.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed | QAbstractItemView.EditTrigger.SelectedClicked
        )
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        self.view.delete_pressed.connect(self._delete_current)
        layout.addWidget(self.view, 1)
        self.empty = QLabel()
        self.empty.setObjectName("emptyState")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.empty.setAccessibleName("No chats")
        layout.addWidget(self.empty, 1)
        model.modelReset.connect(self._show_empty_state)
        model.rowsInserted.connect(self._show_empty_state)
        model.rowsRemoved.connect(self._show_empty_state)
        row = QHBoxLayout()
        self.rename_button = button("Rena&me", SECONDARY)
        self.rename_button.setAccessibleName("Rename chat")
        self.rename_button.setToolTip("Rename the selected chat (F2)")
        self.rename_button.clicked.connect(self.rename_current)
        themed(self.rename_button, "pencil", size=16)
        self.delete_button = button("&Delete…", SECONDARY)
        themed(self.delete_button, "trash-2", size=16)
        self.delete_button.setAccessibleName("Delete chat")
        self.delete_button.setToolTip("Delete the selected chat (Del)")
        self.delete_button.clicked.connect(self._delete_current)
        row.addWidget(self.rename_button)
        row.addWidget(self.delete_button)
        layout.addLayout(row)
        self._quiet = False
        self._show_empty_state()

    def _show_empty_state(self, *_: object) -> None:
        """In the list's place when it is empty: why, and what to do."""
        empty = self.model.rowCount() == 0
        search = self.model.search.strip()
        self.empty.setText(f"No chats match “{search}”." if search else "No chats yet. Type a message to start one.")
        self.empty.setVisible(empty)
        self.view.setVisible(not empty)
        self._enable_actions()

    def _enable_actions(self) -> None:
        """Rename and Delete act on the open chat: off while it is not in the list (a search hides it)."""
        shown = self.current_id() is not None and self.view.isVisibleTo(self)
        for action in (self.rename_button, self.delete_button):
            action.setEnabled(shown)

    def current_id(self) -> int | None:
        index = self.view.currentIndex()
        return self.model.id_at(index.row()) if index.isValid() else None

    def select(self, conversation_id: int | None) -> None:
        """Show `conversation_id` as current without emitting `selected`."""
        self._quiet = True
        try:
            row = self.model.row_of(conversation_id) if conversation_id is not None else -1
            if row >= 0:
                self.view.selectionModel().setCurrentIndex(
                    self.model.index(row), QItemSelectionModel.SelectionFlag.ClearAndSelect
                )
            else:
                self.view.selectionModel().clear()
        finally:
            self._quiet = False
        self._enable_actions()

    def rename_current(self) -> None:
        index = self.view.currentIndex()
        if index.isValid():
            self.view.setFocus()
            self.view.edit(index)

    def _delete_current(self) -> None:
        conversation_id = self.current_id()
        if conversation_id is not None:
            self.delete_requested.emit(conversation_id)

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._enable_actions()
        if self._quiet or not current.isValid():
            return
        conversation_id = self.model.id_at(current.row())
        if conversation_id is not None:
            self.selected.emit(conversation_id)

    def _menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        if not index.isValid():
            return
        menu = QMenu(self)
        menu.addAction("Rename", self.rename_current)
        menu.addAction("Delete", self._delete_current)
        menu.exec(self.view.viewport().mapToGlobal(pos))
