"""The window's menus: one name for each thing, the same as on the buttons, with its shortcut.

They live in the sidebar's *Menu* button (the app's menu, as in the chat apps of 2026), not in a menu bar:
the bar is built (its menus are the button's submenus) but hidden, and every action is also the window's
own, so its shortcut works with no bar on screen.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from app.window.shortcuts_sheet import ShortcutsSheet


class MenusMixin:
    """MainWindow's menus (a mixin: the actions call the window's own methods)."""

    def _action(self, menu, text: str, slot, shortcut: str | QKeySequence.StandardKey | None = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        self.addAction(action)  # the window's own: the shortcut works while the menu bar is hidden
        return action

    def _build_menus(self) -> None:
        """One name for each thing, the same as on the buttons: a chat, the chat's settings, the models."""
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self.new_action = self._action(file, "&New chat", self.new_conversation, QKeySequence.StandardKey.New)
        self.settings_action = self._action(file, "&Settings…", lambda: self.open_settings(), "Ctrl+,")
        file.addSeparator()
        self.quit_action = self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        chat = bar.addMenu("&Chat")
        self._action(chat, "Search chats", lambda: self.sidebar.search.setFocus(), QKeySequence.StandardKey.Find)
        self.rename_action = self._action(chat, "&Rename chat", self.sidebar.rename_current, "F2")
        self.pin_action = self._action(chat, "&Pin chat to top", self._toggle_pin_current)
        self.delete_action = self._action(chat, "&Delete chat…", self._delete_current)
        self._action(chat, "Chat &settings", self.toggle_conversation_settings, "Ctrl+Shift+S")
        chat.addSeparator()
        self.stop_action = self._action(chat, "S&top the answer", self._escape, "Esc")
        self.regenerate_action = self._action(chat, "Re&generate the answer", self.try_again, "Ctrl+R")
        self.continue_action = self._action(
            chat, "Co&ntinue the answer", lambda: self.controller.continue_last_answer()
        )
        self._action(chat, "&Copy the last answer", self.copy_last_answer, "Ctrl+Shift+C")
        self.branch_action = self._action(chat, "&Branch in new chat", lambda: self.branch())
        self.edit_last_action = self._action(chat, "&Edit your last message", self.edit_last_message)
        self.previous_answer_action = self._action(
            chat, "Pre&vious answer", lambda: self.flip_last_answer(-1), "Alt+Left"
        )
        self.next_answer_action = self._action(chat, "Ne&xt answer", lambda: self.flip_last_answer(1), "Alt+Right")
        self._action(chat, "Export as &Markdown…", lambda: self.export_conversation_dialog("markdown"))
        self._action(chat, "Export as &JSON…", lambda: self.export_conversation_dialog("json"))
        self._action(chat, "Export &all chats…", self.export_all_dialog)
        self._action(chat, "&Import chats…", self.import_chats_dialog)
        chat.addSeparator()
        self._action(chat, "Go to the message box", lambda: self.input.setFocus(), "Ctrl+L")
        view = bar.addMenu("&View")
        bigger = self._action(view, "&Bigger text", lambda: self.step_text_size(1), QKeySequence.StandardKey.ZoomIn)
        bigger.setShortcuts([QKeySequence(QKeySequence.StandardKey.ZoomIn), QKeySequence("Ctrl+=")])  # no Shift
        self._action(view, "&Smaller text", lambda: self.step_text_size(-1), QKeySequence.StandardKey.ZoomOut)
        self._action(view, "&Default text size", lambda: self.step_text_size(0), "Ctrl+0")
        models = bar.addMenu("&Models")
        self.model_manager_action = self._action(models, "&Model manager", self.open_model_manager, "Ctrl+M")
        self._action(models, "&Set-up wizard…", lambda: self.open_wizard())
        models.addSeparator()
        self._action(models, "&Restart engine", self.restart_engine)
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&Keyboard shortcuts", self.show_shortcuts, "Ctrl+/")
        self._action(help_menu, "Open &logs folder", self.open_logs_folder)
        self._action(help_menu, "&Copy diagnostics", self.copy_diagnostics)
        self._action(help_menu, "&About SpecExec Desktop", self.about)
        bar.hide()
        self.app_menu = self._app_menu(chat, view, models, help_menu)
        self.sidebar.app_menu_button.setMenu(self.app_menu)
        self.sidebar.open_chat_listed.connect(self._open_chat_listed)
        self.sidebar.open_chat_listed.emit(self.sidebar.current_id() is not None)

    def _app_menu(self, chat: QMenu, view: QMenu, models: QMenu, help_menu: QMenu) -> QMenu:
        """The sidebar's menu: the things used most at its top, then the bar's menus, the same actions."""
        menu = QMenu(self)
        menu.setAccessibleName("App menu")
        menu.addAction(self.settings_action)
        menu.addAction(self.model_manager_action)
        menu.addSeparator()
        for submenu in (chat, view, models, help_menu):
            menu.addMenu(submenu)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        return menu

    def show_shortcuts(self) -> ShortcutsSheet:
        """The keyboard shortcuts on one sheet (shown, not waited for)."""
        sheet = ShortcutsSheet(self, self.menuBar())
        self.shortcuts_sheet = sheet
        sheet.open()
        return sheet

    def _open_chat_listed(self, listed: bool) -> None:
        """Rename, Pin and Delete act on the open chat: off while a search hides it from the list. Pin reads
        Unpin for a pinned chat."""
        self.rename_action.setEnabled(listed)
        self.delete_action.setEnabled(listed)
        self.pin_action.setEnabled(listed)
        self.pin_action.setText("Un&pin chat" if listed and self.sidebar.current_pinned() else "&Pin chat to top")

    def _toggle_pin_current(self) -> None:
        conversation_id = self.sidebar.current_id()
        if conversation_id is not None:
            self.controller.set_pinned(conversation_id, not self.sidebar.current_pinned())
