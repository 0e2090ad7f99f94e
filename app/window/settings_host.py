"""Where the window hosts settings: the Settings page over the chat, the chat settings panel at its right
(edits saved to the open chat at once, the Think switch beside the message box being one of them), and the
text size the View menu's keys step through."""

from __future__ import annotations

import dataclasses
import logging

from PySide6.QtWidgets import QApplication

from app.engine.bridge import CRASHED, FAILED
from app.engine.connections import connection_factory, connection_key
from app.settings.schema import (
    DEFAULT_TEXT_SIZE,
    TEXT_SIZES,
    AppSettings,
    ConversationSettings,
    SettingsNotSaved,
    Theme,
    save_settings,
)
from app.chat.tool_turns import TOOLS_CONFIG_NAME
from app.settings.settings_page import SettingsPage
from app.settings.tool_servers_section import ToolServersSection
from app.system.models_folder import apply_models_folder
from core.system.locations import models_dir

log = logging.getLogger(__name__)


class SettingsHostMixin:
    """MainWindow's settings hosting (a mixin: it reads the window's controller, bridge and panels)."""

    def open_settings(self, has_gpu: bool | None = None) -> SettingsPage:
        """Settings as a page over the chat (Save or Cancel brings the chat back); `has_gpu`: shown as on a
        computer with (True) or without an NVIDIA GPU, instead of asking the driver."""
        if self.settings_page is not None:
            return self.settings_page
        tools = ToolServersSection(self.paths.config_dir / TOOLS_CONFIG_NAME, self.controller.toolbox)
        remote = self.settings.remote_endpoint() is not None  # a server keeps its own context
        model_context = 0 if remote else int(self.bridge.status.models.get("model_context") or 0)
        page = SettingsPage(self.settings, self, has_gpu, tools, model_context)
        page.saved.connect(
            lambda settings: (self.close_settings(), self.apply_settings(settings), self._restart_tools(tools))
        )
        page.cancelled.connect(lambda: (self._preview_theme(self.settings.theme), self.close_settings()))
        page.theme_previewed.connect(self._preview_theme)
        page.models_requested.connect(lambda: (self.close_settings(), self.open_model_manager()))
        self.pages.addWidget(page)
        self.pages.setCurrentWidget(page)
        page.target.edit.setFocus()
        self.settings_page = page
        return page

    def _restart_tools(self, section: ToolServersSection) -> None:
        """After Save: the MCP servers as saved (added and changed ones start, removed ones stop, the others
        go on); a secret that could not go to the keyring is said."""
        self.tool_servers.start(section.path)
        if section.warnings:
            self.toast.show_message(" ".join(section.warnings), 8000)

    def _preview_theme(self, theme: Theme) -> None:
        if self.theme is not None and self.theme.theme != theme:
            self.theme.apply(theme)

    def close_settings(self) -> None:
        page, self.settings_page = self.settings_page, None
        if page is not None:
            self.pages.setCurrentIndex(0)
            self.pages.removeWidget(page)
            page.deleteLater()

    def store_settings(self, settings: AppSettings) -> None:
        """Save `settings` to the settings file; where it cannot be written (a full disk), say so and go on:
        they are in force until the app quits."""
        try:
            save_settings(settings, self.paths.settings_file)
        except SettingsNotSaved as error:
            log.warning("%s (%s)", error, error.__cause__)
            self.toast.show_message(str(error), 12000)

    def apply_settings(self, settings: AppSettings) -> None:
        """Save new app settings; reload the models if the pair or memory settings changed."""
        old, before = self.settings, models_dir()
        self.settings = settings
        self.controller.app_settings = settings
        self.store_settings(settings)
        if settings.models_folder != old.models_folder:  # (the page found moved models there already)
            apply_models_folder(settings.models_folder)
            if models_dir() != before:
                self.toast.show_message(
                    f"Models are now kept in {models_dir()}. Those downloaded before stay in {before}: move their "
                    "folders into the new one, with the app closed, to see them in your list again.",
                    15000,
                )
        self.api_server.apply(settings)
        self._show_model_pair()
        # this computer <-> a server, or another server; or an engine that stopped: a new one, with these settings
        if connection_key(settings) != connection_key(old) or self.bridge.status.state == CRASHED:
            self.bridge.connect(connection_factory(settings), settings.load_request())
        elif settings.load_request() != old.load_request() or self.bridge.status.state == FAILED:
            self.bridge.load(settings.load_request())
        if self.theme is not None and settings.theme != self.theme.theme:  # Settings previewed it already
            self.theme.apply(settings.theme)
        if self.theme is not None:
            self.theme.set_text_size(settings.text_percent())

    def step_text_size(self, step: int) -> None:
        """View > Bigger text (step 1, Ctrl+=), Smaller text (-1, Ctrl+-), Default text size (0, Ctrl+0): the
        next of TEXT_SIZES, saved like any setting and said; at either end it says so and changes nothing."""
        now = self.settings.text_percent()
        index = TEXT_SIZES.index(now) + step
        size = DEFAULT_TEXT_SIZE if step == 0 else TEXT_SIZES[min(max(index, 0), len(TEXT_SIZES) - 1)]
        if size == now and step:
            self.toast.show_message(f"The text is as {'large' if step > 0 else 'small'} as it goes ({now}%)", 3000)
            return
        self.apply_settings(dataclasses.replace(self.settings, text_size=size))
        self.toast.show_message(f"Text size {size}%" + (" (the default)" if size == DEFAULT_TEXT_SIZE else ""), 3000)

    def open_conversation_settings(self) -> None:
        self.show_conversation_settings(True)

    def toggle_conversation_settings(self) -> None:
        self.show_conversation_settings(not self.chat_settings.isVisible())

    def show_conversation_settings(self, shown: bool) -> None:
        """The chat settings panel at the window's right, open or closed; the header's button says which."""
        if not shown:
            self.chat_settings.flush()
            if self.chat_settings.isAncestorOf(QApplication.focusWidget()):
                self.input.setFocus()  # the keyboard goes back to the message box, not to the next control
        self.chat_settings.setVisible(shown)
        self.conversation_settings_button.setChecked(shown)
        if shown:
            self.chat_settings.temperature.slider.setFocus()

    def _conversation_settings_changed(self, conversation_id: int | None, settings: ConversationSettings) -> None:
        """An edit in the panel or the Think switch: saved to its chat at once (a chat is made if there is
        none yet; opening it showed the defaults, so the panel and the switch then show what was saved)."""
        self.controller.set_conversation_settings(settings, conversation_id)
        if conversation_id is None:
            self.chat_settings.set_settings(self.controller.conversation_settings(), self.controller.conversation_id)
        self._show_think_switch()
        self._show_speculation_items()
        self.draft_counter.refresh()  # the system prompt or the Think switch shape the message's prompt

    def _reset_conversation_settings(self) -> None:
        defaults = self.controller.conversation_defaults()
        self.chat_settings.set_settings(defaults, self.controller.conversation_id)
        self._conversation_settings_changed(self.controller.conversation_id, defaults)
        self.toast.show_message("This chat's settings are back to the defaults", 3000)

    def _think_changed(self, on: bool) -> None:
        """The Think switch beside the message box: one of the chat's settings (the panel shows the others)."""
        self.chat_settings.flush()  # a system prompt still being typed is saved first, not lost
        settings = dataclasses.replace(self.controller.conversation_settings(), thinking=on)
        self.chat_settings.set_settings(settings, self.controller.conversation_id)
        self._conversation_settings_changed(self.controller.conversation_id, settings)

    def _show_think_switch(self) -> None:
        """The Think switch only for a model whose template can turn thinking off, in the open chat's position."""
        self.composer.set_think_switch(
            self.controller.thinking_control() == "switchable", self.controller.conversation_settings().thinking
        )
