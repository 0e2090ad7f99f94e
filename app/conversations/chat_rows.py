"""The sidebar's list of chats: a date heading above the first chat of each group, and a "…" button on the
hovered or selected row that opens the chat's menu (Rename, Export, Delete).

The headings are painted by the delegate in the top of their group's first row, so every row is still one
chat (ids, selection and keyboard moves stay one to one with the store); a click on a heading selects
nothing. The menu is also reached by the keyboard: the context-menu key or Shift+F10 on the selected row,
Delete asks to delete it, F2 renames it.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QKeyEvent, QMouseEvent, QPainter
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.conversations.list_models import ConversationListModel
from app.theme.icons import icon
from app.theme.tokens import current

RENAME_EXTRA_PX = 10  # the rename box: the text's height plus its own padding and border
HEADING_TOP_PX = 12  # space above a heading, between two groups
HEADING_BOTTOM_PX = 4
MENU_BUTTON_PX = 24  # the "…" button: a square at the row's right end
MENU_ICON_PX = 16
MENU_MARGIN_PX = 6

Index = QModelIndex | QPersistentModelIndex


def heading_height(option: QStyleOptionViewItem, index: Index) -> int:
    """The height of the heading painted above this row: 0 inside a group."""
    if not index.data(ConversationListModel.HeadingRole):
        return 0
    return HEADING_TOP_PX + option.fontMetrics.height() + HEADING_BOTTOM_PX


def _item_rect(option: QStyleOptionViewItem, index: Index) -> QRect:
    """The chat's own part of the row, under its heading."""
    return option.rect.adjusted(0, heading_height(option, index), 0, 0)


def menu_button_rect(item: QRect) -> QRect:
    """Where the "…" button sits in a chat's row."""
    x = item.right() - MENU_MARGIN_PX - MENU_BUTTON_PX + 1
    return QRect(x, item.center().y() - MENU_BUTTON_PX // 2 + 1, MENU_BUTTON_PX, MENU_BUTTON_PX)


class ChatRowDelegate(QStyledItemDelegate):
    """Rows as the style draws them, a heading above each group's first row, the "…" button on the hovered
    or selected row; the rename box over the row's chat part and at least a line of text tall."""

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:  # noqa: N802
        size = super().sizeHint(option, index)
        return QSize(size.width(), size.height() + heading_height(option, index))

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        colors = current()
        heading = index.data(ConversationListModel.HeadingRole)
        item = QStyleOptionViewItem(option)
        item.rect = _item_rect(option, index)
        if heading:
            painter.save()
            font = QFont(option.font)
            font.setPointSizeF(font.pointSizeF() * 0.88)
            font.setWeight(QFont.Weight.DemiBold)
            painter.setFont(font)
            painter.setPen(QColor(colors.muted_text))
            text_rect = QRect(option.rect.x() + 10, option.rect.y() + HEADING_TOP_PX, option.rect.width() - 20, 0)
            text_rect.setBottom(item.rect.top() - HEADING_BOTTOM_PX)
            painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, heading)
            painter.restore()
        super().paint(painter, item, index)
        hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        if not (hovered or selected):
            return
        button = menu_button_rect(item.rect)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colors.selected if selected else colors.surface_alt))  # over the title's end
        painter.drawRoundedRect(button.adjusted(-MENU_MARGIN_PX, 0, 0, 0), 6, 6)
        glyph = QRect(0, 0, MENU_ICON_PX, MENU_ICON_PX)
        glyph.moveCenter(button.center())
        icon("ellipsis", colors.text).paint(painter, glyph)
        painter.restore()

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: QModelIndex) -> None:  # noqa: N802
        rect = _item_rect(option, index)
        height = max(rect.height(), editor.fontMetrics().height() + RENAME_EXTRA_PX)
        editor.setGeometry(rect.x(), rect.y() + (rect.height() - height) // 2, rect.width(), height)


class ChatListView(QListView):
    """The list itself: a press on a heading selects nothing, a press on "…" asks for the row's menu (without
    opening the chat); the context-menu key and Shift+F10 ask for the selected row's, Delete to delete it."""

    menu_requested = Signal(QModelIndex, QPoint)  # the row, where to open the menu (global)
    delete_pressed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)  # the "…" button follows the pointer

    def item_rect(self, index: QModelIndex) -> QRect:
        """The chat's part of a row (under its heading), in the viewport's coordinates."""
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        option.rect = self.visualRect(index)
        return _item_rect(option, index)

    def menu_button_at(self, index: QModelIndex) -> QRect:
        return menu_button_rect(self.item_rect(index))

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        pos = event.position().toPoint()
        index = self.indexAt(pos)
        if index.isValid() and event.button() == Qt.MouseButton.LeftButton:
            if not self.item_rect(index).contains(pos):
                event.accept()  # the heading: nothing to select
                return
            button = self.menu_button_at(index)
            if button.contains(pos):
                event.accept()
                self.menu_requested.emit(index, self.viewport().mapToGlobal(button.bottomLeft()))
                return
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        """A release on a heading or on "…" neither selects nor starts a rename (the click-to-rename of a
        selected row)."""
        pos = event.position().toPoint()
        index = self.indexAt(pos)
        if index.isValid() and (not self.item_rect(index).contains(pos) or self.menu_button_at(index).contains(pos)):
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        editing = self.state() == QAbstractItemView.State.EditingState
        menu_key = event.key() == Qt.Key.Key_Menu or (
            event.key() == Qt.Key.Key_F10 and event.modifiers() == Qt.KeyboardModifier.ShiftModifier
        )
        if not editing and menu_key and self.currentIndex().isValid():
            index = self.currentIndex()
            self.scrollTo(index)
            self.menu_requested.emit(index, self.viewport().mapToGlobal(self.menu_button_at(index).bottomLeft()))
            event.accept()
            return
        if event.key() == Qt.Key.Key_Delete and not editing:
            self.delete_pressed.emit()
            event.accept()
            return
        super().keyPressEvent(event)
