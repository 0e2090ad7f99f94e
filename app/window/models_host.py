"""Where the window hosts the model manager: a page in the chat's place, beside the sidebar (as LM Studio's and
Jan's Models pages), not a dialog over it. The sidebar stays: a chat picked there, New chat, Back or Esc bring
the chat back, with the keyboard in the message box; an answer being written goes on meanwhile."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from app.engine.connections import source_words
from app.models.manager import ModelManager, model_pair_name
from app.settings.schema import AppSettings
from core.system.locations import models_dir


class ModelsHostMixin:
    """MainWindow's Models page (a mixin: it reads the window's content stack, sidebar, bridge and settings)."""

    def open_model_manager(self) -> ModelManager:
        """The Models page in the chat's place (the one already open, if it is), its switch focused."""
        page = self.model_manager
        if page is None:
            page = ModelManager(self.settings, models_dir(), own_api_url=self.api_server.url, parent=self)
            page.switched.connect(self.switch_models)
            page.endpoints_changed.connect(self.apply_settings)
            page.download_requested.connect(lambda pair_id: (self.close_model_manager(), self.open_wizard(pair_id)))
            page.back_requested.connect(self.close_model_manager)
            self.bridge.status_changed.connect(page.show_engine_status)
            self.content.addWidget(page)
            self.model_manager = page
            chain = [self.sidebar.app_menu_button, *page.focus_order()]
            for before, after in zip(chain, chain[1:]):
                QWidget.setTabOrder(before, after)
        if self.settings_page is not None:  # it covers the whole window: left as Cancel leaves it (theme too)
            self.settings_page.cancelled.emit()
        self.content.setCurrentWidget(page)
        self.sidebar.show_models_open(True)
        page.sections.current_button().setFocus()
        return page

    def close_model_manager(self) -> None:
        """Back to the chat, the keyboard in the message box; the page goes (a later open scans again)."""
        page, self.model_manager = self.model_manager, None
        self.sidebar.show_models_open(False)
        if page is None:
            return
        self.content.setCurrentIndex(0)
        self.content.removeWidget(page)
        page.deleteLater()
        self.input.setFocus()

    def toggle_model_manager(self) -> None:
        """The sidebar's Models button: opens the page, or goes back to the chat from it."""
        if self.model_manager is None:
            self.open_model_manager()
        else:
            self.close_model_manager()

    def switch_models(self, settings: AppSettings) -> None:
        """Use another (already checked) pair: saved, the engine reloads it, the chat says so; conversations stay."""
        self.apply_settings(settings)
        self.controller.stats.reset()  # the last answer's speed was the other model's
        if settings.remote_endpoint() is not None:
            self.toast.show_message(f"Switched to {source_words(settings)}: connecting", 6000)
        else:
            self.toast.show_message(f"Switched to {model_pair_name(settings)}: loading it", 6000)
