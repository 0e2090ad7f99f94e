"""The sidebar: search box, conversation list (bound to ConversationListModel), New / Rename / Delete."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QLineEdit, QListView, QMenu, QPushButton, QVBoxLayout, QWidget

from app.conversations.list_models import ConversationListModel


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
        layout.setContentsMargins(8, 8, 4, 8)
        self.new_button = QPushButton("&New chat")
        self.new_button.setAccessibleName("New conversation")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        layout.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setAccessibleName("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed)
        layout.addWidget(self.search)
        self.view = _ListView()
        self.view.setModel(model)
        self.view.setAccessibleName("Conversations")
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setUniformItemSizes(True)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed | QAbstractItemView.EditTrigger.SelectedClicked)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._menu)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        self.view.delete_pressed.connect(self._delete_current)
        layout.addWidget(self.view, 1)
        row = QHBoxLayout()
        self.rename_button = QPushButton("Rena&me")
        self.rename_button.setAccessibleName("Rename conversation")
        self.rename_button.setToolTip("Rename the selected conversation (F2)")
        self.rename_button.clicked.connect(self.rename_current)
        self.delete_button = QPushButton("&Delete")
        self.delete_button.setAccessibleName("Delete conversation")
        self.delete_button.setToolTip("Delete the selected conversation (Del)")
        self.delete_button.clicked.connect(self._delete_current)
        row.addWidget(self.rename_button)
        row.addWidget(self.delete_button)
        layout.addLayout(row)
        self._quiet = False

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
                    self.model.index(row), QItemSelectionModel.SelectionFlag.ClearAndSelect)
            else:
                self.view.selectionModel().clear()
        finally:
            self._quiet = False

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
