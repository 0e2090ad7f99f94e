"""The sidebar: New chat, search box, the chats (pinned ones first, then grouped by date; bound to
ConversationListModel) with a menu per chat (Rename, Pin to top or Unpin, Export, Delete), an empty state in
the list's place when there is nothing to show ("No chats match …"), and at the bottom *Models* (the Models
page, in the chat's place) and the app's menu (settings, models, help: the menu bar's actions)."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QLineEdit, QMenu, QPushButton, QVBoxLayout, QWidget

from app.conversations.chat_rows import ChatListView, ChatRowDelegate
from app.conversations.list_models import ConversationListModel
from app.theme.icons import themed
from app.theme.tokens import SPACE
from app.window.labels import Label


class ConversationList(QWidget):
    new_requested = Signal()
    selected = Signal(int)  # conversation id
    delete_requested = Signal(int)
    pin_requested = Signal(int, bool)  # conversation id, pinned (True) or unpinned
    export_requested = Signal(int, str)  # conversation id, "markdown" | "json"
    search_changed = Signal(str)
    open_chat_listed = Signal(bool)  # whether the open chat is in the list (a search can hide it)
    models_requested = Signal()  # the Models button: the Models page opens (or closes, if it is open)

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
        self.view = ChatListView()
        self.view.setModel(model)
        self.view.setItemDelegate(ChatRowDelegate(self.view))
        self.view.setAccessibleName("Conversations")
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setEditTriggers(
            QAbstractItemView.EditTrigger.EditKeyPressed | QAbstractItemView.EditTrigger.SelectedClicked
        )
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.view.menu_requested.connect(self.open_chat_menu)
        self.view.selectionModel().currentChanged.connect(self._current_changed)
        self.view.delete_pressed.connect(self._delete_current)
        layout.addWidget(self.view, 1)
        self.empty = Label()
        self.empty.setObjectName("emptyState")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.empty.setAccessibleName("No chats")
        layout.addWidget(self.empty, 1)
        model.modelReset.connect(self._show_empty_state)
        model.rowsInserted.connect(self._show_empty_state)
        model.rowsRemoved.connect(self._show_empty_state)
        self.models_button = QPushButton("Models")
        self.models_button.setObjectName("sidebarModels")
        self.models_button.setCheckable(True)  # on while the Models page is shown
        themed(self.models_button, "cpu")
        self.models_button.setAccessibleName("Models")
        self.models_button.setToolTip("Your models, downloads and servers on other computers (Ctrl+M)")
        self.models_button.clicked.connect(self.models_requested)
        layout.addWidget(self.models_button)
        self.app_menu_button = QPushButton("Menu")  # the app's menu: the menu bar's actions (MainWindow fills it)
        self.app_menu_button.setObjectName("appMenu")
        themed(self.app_menu_button, "menu")
        self.app_menu_button.setAccessibleName("App menu")
        self.app_menu_button.setToolTip("Settings, models, chats and help")
        layout.addWidget(self.app_menu_button)
        self.chat_menu: QMenu | None = None  # the menu of one chat, while it is open
        self._quiet = False
        self._show_empty_state()

    def show_models_open(self, shown: bool) -> None:
        """The Models button is on while the Models page is in the chat's place."""
        self.models_button.setChecked(shown)

    def _show_empty_state(self, *_: object) -> None:
        """In the list's place when it is empty: why, and what to do."""
        empty = self.model.rowCount() == 0
        search = self.model.search.strip()
        self.empty.setText(f"No chats match “{search}”." if search else "No chats yet. Type a message to start one.")
        self.empty.setVisible(empty)
        self.view.setVisible(not empty)
        self._enable_actions()

    def _enable_actions(self) -> None:
        """The window's Rename and Delete act on the open chat: off while it is not in the list (a search
        hides it)."""
        self.open_chat_listed.emit(self.current_id() is not None and self.view.isVisibleTo(self))

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

    def current_pinned(self) -> bool:
        """Whether the selected chat is pinned to the top of the list."""
        return self.model.pinned_at_row(self.view.currentIndex().row())

    def rename_current(self) -> None:
        self._rename(self.view.currentIndex())

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

    def _context_menu(self, pos: QPoint) -> None:
        index = self.view.indexAt(pos)
        if index.isValid():
            self.open_chat_menu(index, self.view.viewport().mapToGlobal(pos))

    def open_chat_menu(self, index: QModelIndex, where: QPoint) -> None:
        """The menu of the chat in row `index` (not necessarily the open one): Rename, Pin to top or Unpin,
        Export, Delete."""
        conversation_id = self.model.id_at(index.row())
        if conversation_id is None:
            return
        menu = QMenu(self)
        menu.setAccessibleName("Chat menu")
        rename = menu.addAction("Rename", lambda: self._rename(index))
        rename.setShortcut("F2")
        pinned = self.model.pinned_at_row(index.row())
        menu.addAction(
            "Unpin" if pinned else "Pin to top", lambda: self.pin_requested.emit(conversation_id, not pinned)
        )
        menu.addAction("Export as Markdown…", lambda: self.export_requested.emit(conversation_id, "markdown"))
        menu.addAction("Export as JSON…", lambda: self.export_requested.emit(conversation_id, "json"))
        menu.addSeparator()
        delete = menu.addAction("Delete…", lambda: self.delete_requested.emit(conversation_id))
        delete.setShortcut("Del")
        self.chat_menu = menu
        menu.aboutToHide.connect(menu.deleteLater)
        menu.popup(where)

    def _rename(self, index: QModelIndex) -> None:
        if index.isValid():
            self.view.setFocus()
            self.view.edit(index)
