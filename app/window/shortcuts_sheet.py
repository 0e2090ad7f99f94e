"""The keyboard shortcuts on one sheet (Help > Keyboard shortcuts, Ctrl+/), as the chat apps of 2026 show them.

The window's own shortcuts are read from its menus' actions when the sheet opens, so the sheet names what the
menus say (and follows them when an action's words change). The keys a part of the window answers itself (the
message box, the chat list, a page) are no actions: they are the `PLACE_KEYS` below, each kept true by a test
that presses it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QGridLayout, QMenuBar, QScrollArea, QVBoxLayout, QWidget

from app.theme.tokens import SPACE
from app.window.buttons import PRIMARY, button, footer
from app.window.labels import Label

SHEET_WIDTH_PX = 520
SHEET_MAX_HEIGHT_PX = 620  # past this the list scrolls (a large text size)
SCREEN_SHARE = 0.7  # and past this share of the screen's height (a small laptop screen)

# the window's menus as the sheet names them: the File menu's actions are the app menu's own (there is no bar)
MENU_PLACES = {"File": "The app", "Chat": "Chats", "View": "Text size", "Models": "Models", "Help": "Help"}

# (where, [(keys, what they do)]): the keys no menu action has, where they work
PLACE_KEYS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "In the message box",
        (
            ("Enter", "Send the message"),
            ("Shift+Enter", "Start a new line"),
            ("Up", "Edit your last message, when the box is empty"),
            ("Tab", "Go on to the paperclip and the send button"),
        ),
    ),
    (
        "In the list of chats",
        (
            ("Up, Down", "Open the chat above or below"),
            ("Shift+F10", "The selected chat's menu (Rename, Pin, Export, Delete)"),
            ("Del", "Delete the selected chat (it asks first)"),
        ),
    ),
    (
        "On the Settings and Models pages",
        (
            ("Ctrl+S", "Save the settings"),
            ("Esc", "Back to the chat (Settings: without saving)"),
        ),
    ),
)


def key_text(keys: str | QKeySequence) -> str:
    """Keys as this system writes them (Ctrl+N; ⌘N on a Mac)."""
    return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)


def action_keys(action: QAction) -> str:
    """Every shortcut of a menu action, as this system writes them ("Ctrl++, Ctrl+=")."""
    return ", ".join(key_text(keys) for keys in action.shortcuts())


def action_words(action: QAction) -> str:
    """A menu action's words without its mnemonic's "&" and its trailing "…"."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&").removesuffix("…")


def window_shortcuts(bar: QMenuBar) -> list[tuple[str, list[tuple[str, str]]]]:
    """For each of the window's menus that has some: its name and its actions' (keys, words), in menu order."""
    groups = []
    for menu_action in bar.actions():
        menu = menu_action.menu()
        if menu is None:
            continue
        rows = [
            (action_keys(action), action_words(action))
            for action in menu.actions()
            if not action.isSeparator() and not action.shortcut().isEmpty()
        ]
        if rows:
            groups.append((action_words(menu_action), rows))
    return groups


class ShortcutsSheet(QDialog):
    """The sheet: a heading per place, each row the keys (bold, as on a key cap) and what they do."""

    def __init__(self, parent: QWidget, bar: QMenuBar) -> None:
        super().__init__(parent)
        self.setObjectName("confirmDialog")  # the card look of the app's dialogs
        self.setWindowTitle("Keyboard shortcuts")
        self.setFixedWidth(SHEET_WIDTH_PX)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.xl, SPACE.l + 4, SPACE.xl, SPACE.l)
        layout.setSpacing(SPACE.m)
        heading = Label("Keyboard shortcuts")
        heading.setObjectName("dialogTitle")
        layout.addWidget(heading)
        sheet = QWidget()
        sheet.setObjectName("shortcutsSheet")
        self.grid = QGridLayout(sheet)
        self.grid.setContentsMargins(0, 0, SPACE.s, 0)
        self.grid.setHorizontalSpacing(SPACE.l)
        self.grid.setVerticalSpacing(SPACE.xs)
        self.grid.setColumnStretch(1, 1)
        groups = [(MENU_PLACES.get(name, name), rows) for name, rows in window_shortcuts(bar)]
        groups += [(place, list(rows)) for place, rows in PLACE_KEYS]
        for place, rows in groups:
            self._add_group(place, rows)
        scroll = QScrollArea()
        scroll.setObjectName("shortcutsScroll")
        scroll.setWidget(sheet)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        screen = parent.screen().availableGeometry().height() if parent.screen() else SHEET_MAX_HEIGHT_PX
        tallest = min(SHEET_MAX_HEIGHT_PX, int(screen * SCREEN_SHARE))
        scroll.setMaximumHeight(tallest)
        scroll.setMinimumHeight(min(sheet.sizeHint().height(), tallest))
        layout.addWidget(scroll)
        close = button("Close", PRIMARY)
        close.setDefault(True)
        close.clicked.connect(self.accept)
        layout.addWidget(footer(self, close))
        close.setFocus()

    def _add_group(self, place: str, rows: list[tuple[str, str]]) -> None:
        row = self.grid.rowCount()
        title = Label(place)
        title.setObjectName("shortcutsPlace")
        title.setIndent(0)  # in line with the keys under it (a styled label indents its text by default)
        self.grid.addWidget(title, row, 0, 1, 2)
        for keys, words in rows:
            row += 1
            key = Label(keys)
            key.setObjectName("fieldName")
            key.setAccessibleName(f"{keys}: {words}")
            self.grid.addWidget(key, row, 0, Qt.AlignmentFlag.AlignTop)
            what = Label(words)
            what.setWordWrap(True)
            self.grid.addWidget(what, row, 1, Qt.AlignmentFlag.AlignTop)

    def rows(self) -> list[tuple[str, str]]:
        """The (keys, words) on the sheet, top to bottom (headings left out)."""
        found = []
        for row in range(self.grid.rowCount()):
            key, what = self.grid.itemAtPosition(row, 0), self.grid.itemAtPosition(row, 1)
            if key is not None and what is not None and key.widget() is not what.widget():
                found.append((key.widget().text(), what.widget().text()))
        return found
