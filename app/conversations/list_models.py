"""List models the views bind to: conversations (for the sidebar) and the messages of one conversation."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from app.conversations.date_groups import headings
from app.conversations.store import Conversation, Message, Store
from app.window.labels import plain_tip

Index = QModelIndex | QPersistentModelIndex


class ConversationListModel(QAbstractListModel):
    """Conversations, the pinned ones first, then the most recently active first, filtered by a search text
    (titles and message text); each row knows the heading shown above it ("" inside a group: Pinned or a date),
    fixed when the list is read."""

    IdRole = Qt.ItemDataRole.UserRole + 1
    UpdatedRole = Qt.ItemDataRole.UserRole + 2
    HeadingRole = Qt.ItemDataRole.UserRole + 3

    renamed = Signal(int, str)  # conversation id, new title

    def __init__(self, store: Store, parent: Any = None) -> None:
        super().__init__(parent)
        self.store = store
        self.search = ""
        self.rows: list[Conversation] = []
        self.headings: list[str] = []
        self.refresh()

    def refresh(self, search: str | None = None) -> None:
        if search is not None:
            self.search = search
        self.beginResetModel()
        self.rows = self.store.conversations(self.search)
        pinned = sum(row.pinned for row in self.rows)
        self.headings = headings([row.updated_at for row in self.rows], time.time(), pinned)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt signature
        return 0 if parent.isValid() else len(self.rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        row = self.rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return row.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tip(f"Conversation: {row.title}")
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return f"Conversation: {row.title}" + (", pinned" if row.pinned else "")
        if role == self.IdRole:
            return row.id
        if role == self.UpdatedRole:
            return row.updated_at
        if role == self.HeadingRole:
            return self.headings[index.row()]
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        base = super().flags(index)
        return base | Qt.ItemFlag.ItemIsEditable if index.isValid() else base

    def setData(self, index: Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:
        if role != Qt.ItemDataRole.EditRole or not index.isValid():
            return False
        title = str(value).strip()
        if not title:
            return False
        row = self.rows[index.row()]
        self.store.rename_conversation(row.id, title)
        self.rows[index.row()] = dataclasses.replace(row, title=title)
        self.dataChanged.emit(index, index, [Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole])
        self.renamed.emit(row.id, title)
        return True

    def roleNames(self) -> dict[int, bytes]:
        return {
            Qt.ItemDataRole.DisplayRole: b"title",
            self.IdRole: b"conversationId",
            self.UpdatedRole: b"updatedAt",
            self.HeadingRole: b"heading",
        }

    def row_of(self, conversation_id: int) -> int:
        for number, row in enumerate(self.rows):
            if row.id == conversation_id:
                return number
        return -1

    def id_at(self, row: int) -> int | None:
        return self.rows[row].id if 0 <= row < len(self.rows) else None

    def pinned_at_row(self, row: int) -> bool:
        return 0 <= row < len(self.rows) and self.rows[row].pinned


class MessageListModel(QAbstractListModel):
    """The messages of the conversation on screen. The chat controller writes, the chat view reads."""

    IdRole = Qt.ItemDataRole.UserRole + 1
    RoleRole = Qt.ItemDataRole.UserRole + 2
    StatusRole = Qt.ItemDataRole.UserRole + 3
    StatsRole = Qt.ItemDataRole.UserRole + 4
    ReasoningRole = Qt.ItemDataRole.UserRole + 5  # a thinking model's thinking, apart from the answer

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[Message] = []

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt signature
        return 0 if parent.isValid() else len(self.rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        message = self.rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return message.content
        if role == self.IdRole:
            return message.id
        if role == self.RoleRole:
            return message.role
        if role == self.StatusRole:
            return message.status
        if role == self.StatsRole:
            return message.stats
        if role == self.ReasoningRole:
            return message.reasoning
        return None

    def roleNames(self) -> dict[int, bytes]:
        return {
            Qt.ItemDataRole.DisplayRole: b"content",
            self.IdRole: b"messageId",
            self.RoleRole: b"role",
            self.StatusRole: b"status",
            self.StatsRole: b"stats",
            self.ReasoningRole: b"reasoning",
        }

    def set_messages(self, messages: list[Message]) -> None:
        self.beginResetModel()
        self.rows = list(messages)
        self.endResetModel()

    def append(self, message: Message) -> None:
        self.beginInsertRows(QModelIndex(), len(self.rows), len(self.rows))
        self.rows.append(message)
        self.endInsertRows()

    def row_of(self, message_id: int) -> int:
        for number in range(len(self.rows) - 1, -1, -1):
            if self.rows[number].id == message_id:
                return number
        return -1

    def update(self, message_id: int, **changes: Any) -> None:
        """Change content / reasoning / status / stats of one message (no-op if it is not on screen)."""
        row = self.row_of(message_id)
        if row < 0:
            return
        self.rows[row] = dataclasses.replace(self.rows[row], **changes)
        index = self.index(row)
        self.dataChanged.emit(index, index)

    def replace(self, row: int, message: Message) -> None:
        """Put another message in row `row` (an alternative answer chosen in its place)."""
        self.rows[row] = message
        index = self.index(row)
        self.dataChanged.emit(index, index)

    def remove_from(self, row: int) -> None:
        """Remove row `row` and every row after it."""
        if not 0 <= row < len(self.rows):
            return
        self.beginRemoveRows(QModelIndex(), row, len(self.rows) - 1)
        del self.rows[row:]
        self.endRemoveRows()
