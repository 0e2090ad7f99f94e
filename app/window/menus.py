"""The window's menu bar: one name for each thing, the same as on the buttons, with its shortcut."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence


class MenusMixin:
    """MainWindow's menus (a mixin: the actions call the window's own methods)."""

    def _action(self, menu, text: str, slot, shortcut: str | QKeySequence.StandardKey | None = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        """One name for each thing, the same as on the buttons: a chat, the chat's settings, the models."""
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self.new_action = self._action(file, "&New chat", self.new_conversation, QKeySequence.StandardKey.New)
        self._action(file, "&Settings…", lambda: self.open_settings(), "Ctrl+,")
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        chat = bar.addMenu("&Chat")
        self._action(chat, "Search chats", lambda: self.sidebar.search.setFocus(), QKeySequence.StandardKey.Find)
        self._action(chat, "&Rename chat", self.sidebar.rename_current, "F2")
        self._action(chat, "&Delete chat…", self._delete_current)
        self._action(chat, "Chat &settings", self.toggle_conversation_settings, "Ctrl+Shift+S")
        chat.addSeparator()
        self.stop_action = self._action(chat, "S&top the answer", self._escape, "Esc")
        self.regenerate_action = self._action(chat, "Re&generate the answer", self.controller.regenerate, "Ctrl+R")
        self._action(chat, "&Copy the last answer", self.copy_last_answer, "Ctrl+Shift+C")
        self._action(chat, "Export as &Markdown…", lambda: self.export_conversation_dialog("markdown"))
        self._action(chat, "Export as &JSON…", lambda: self.export_conversation_dialog("json"))
        chat.addSeparator()
        self._action(chat, "Go to the message box", lambda: self.input.setFocus(), "Ctrl+L")
        models = bar.addMenu("&Models")
        self._action(models, "&Model manager…", self.open_model_manager, "Ctrl+M")
        self._action(models, "&Set-up wizard…", lambda: self.open_wizard())
        models.addSeparator()
        self._action(models, "&Restart engine", self.restart_engine)
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "Open &logs folder", self.open_logs_folder)
        self._action(help_menu, "&Copy diagnostics", self.copy_diagnostics)
        self._action(help_menu, "&About SpecExec Desktop", self.about)
