"""The main window: conversation list | banner, chat, input row; menus; status bar.

It wires the pieces together and owns nothing clever: chat logic is in ChatController, the engine in
EngineBridge, persistence in Store. A window may be given a running bridge and an open store (tests share
one engine between windows); it then leaves them running when it closes.
"""

from __future__ import annotations

import dataclasses
import logging
from html import escape

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QMainWindow,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.system import resources
from app.api.server import ApiServerHost
from app.window.banner import Banner, engine_stopped_text, too_little_memory_text
from app.chat.context_room import draft_too_long
from app.chat.controller import ChatController
from app.chat.draft_count import DraftCounter
from app.chat.header import ChatHeader
from app.chat.tool_servers import ToolServers
from app.chat.tool_turns import TOOLS_CONFIG_NAME
from app.chat.message_words import sentence
from app.chat.view import ChatView
from app.chat.composer import SEND, STOP, Composer
from app.chat.input_box import FilesDroppedNear
from app.conversations.sidebar import ConversationList
from app.engine.bridge import CRASHED, FAILED, READY, EngineBridge, EngineStatus
from app.engine.connections import connection_factory, source_words
from app.models.choice import missing_model_words
from app.models.manager import ModelManager, model_pair_name
from app.system.paths import AppPaths
from app.settings.schema import AppSettings, Method, load_settings
from app.settings.chat_panel import ChatSettingsPanel
from app.settings.settings_page import SettingsPage
from app.window.confirm import ConfirmDialog, confirm_destructive
from app.window.status_bar import NO_DRAFT_WORDS, AppStatusBar
from app.window.toast import Toast
from app.window.file_actions import FileActionsMixin
from app.window.geometry import restore_geometry, save_geometry
from app.window.shortcuts_sheet import ShortcutsSheet
from app.window.menus import MenusMixin
from app.window.models_host import ModelsHostMixin
from app.window.room_host import RoomHostMixin
from app.window.settings_host import SettingsHostMixin
from app.conversations.store import STREAMING, Store
from app.models.wizard.wizard import FirstRunWizard
from core.engine import protocol as P
from core.engine.client import LOAD_DIED_HINT
from core.models.model_spec import BUILTIN
from core.system.locations import models_dir

log = logging.getLogger(__name__)

SIDEBAR_MIN_PX = 180


def default_size(available: QSize | None) -> tuple[int, int]:
    """The window's first size: roomy enough for a chat's title beside the header's buttons, and never more
    than 90% of the screen (a 1280 x 800 laptop gets a window that fits)."""
    width, height = 1240, 800
    if available is None:
        return width, height
    return min(width, int(available.width() * 0.9)), min(height, int(available.height() * 0.9))


class MainWindow(MenusMixin, SettingsHostMixin, RoomHostMixin, ModelsHostMixin, FileActionsMixin, QMainWindow):
    """The sidebar, the chat, the status bar; menus (menus.py), settings (settings_host.py), Make room
    (room_host.py), the Models page (models_host.py) and file actions (file_actions.py) come from their mixins."""

    def __init__(
        self,
        paths: AppPaths | None = None,
        settings: AppSettings | None = None,
        store: Store | None = None,
        bridge: EngineBridge | None = None,
        theme=None,  # app.theme.manager.ThemeManager | None
        start_engine: bool = True,
        confirm_delete: bool = True,
    ) -> None:
        super().__init__()
        self.paths = (paths or AppPaths.from_env()).ensure()
        self.settings = settings if settings is not None else load_settings(self.paths.settings_file)
        self.owns_store = store is None
        self.store = store if store is not None else Store(self.paths.database)
        self.owns_bridge = bridge is None
        self.bridge = bridge if bridge is not None else EngineBridge(connection_factory(self.settings))
        self.bridge.gpu_report_dir = self.paths.log_dir
        self.theme = theme
        self.confirm_delete = confirm_delete
        self.controller = ChatController(self.store, self.bridge, self.settings, self)
        self.draft_counter = DraftCounter(self.bridge, self.controller.draft_prompt, self)
        self.logs_dialog: ConfirmDialog | None = None
        self.about_dialog: ConfirmDialog | None = None
        self.shortcuts_sheet: ShortcutsSheet | None = None
        self._gpu_banner: str | None = None  # the banner's text while it reports a GPU that failed its check
        self._context_said: tuple | None = None  # the models and setting whose shorter context was said
        self.setWindowTitle("SpecExec Desktop")
        self.setWindowIcon(resources.icon("app"))
        self.resize(*default_size(self.screen().availableGeometry().size() if self.screen() else None))
        restore_geometry(self, self.paths.window_file)  # where it was last time, if that is known
        self._build()
        self._build_menus()
        self._connect()
        self.tool_servers = ToolServers(self)
        self.tool_servers.ready.connect(self._tools_ready)
        self.tool_servers.failed.connect(lambda text: self.toast.show_message(f"MCP servers not started: {text}", 8000))
        self.tool_servers.start(self.paths.config_dir / TOOLS_CONFIG_NAME)
        if start_engine and self.bridge.worker is None:
            self.bridge.start(self.settings.load_request())
        self.api_server = ApiServerHost(self.bridge, self)
        self.api_server.notice.connect(self._notice)
        self.api_server.serving.connect(self.status_line.show_api_server)
        self.api_server.apply(self.settings)
        self._show_model_pair()
        self._engine_status(self.bridge.status)
        self._show_gpu_check()
        self.controller.open_conversation(self.controller.conversations.id_at(0))
        if self.store.recovered:
            self.toast.show_message(
                f"{self.store.recovered} answer(s) cut off by a crash were kept, marked interrupted", 10000
            )
        self.input.setFocus()  # the first words typed go into the message box (given once the window shows)

    # -- layout --------------------------------------------------------------------------------------------

    def _build(self) -> None:
        c = self.controller
        self.sidebar = ConversationList(c.conversations)
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setMinimumWidth(max(SIDEBAR_MIN_PX, self.sidebar.minimumSizeHint().width()))  # no clipped button
        chat = QWidget()
        chat.setObjectName("chatPane")
        column = QVBoxLayout(chat)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.header = ChatHeader()
        self.title_label = self.header.title_label
        self.conversation_settings_button = self.header.settings_button
        column.addWidget(self.header)
        self.model_button = self.header.model_button  # shows the model; a click opens the model manager
        self.banner = Banner()
        column.addWidget(self.banner)
        self.chat_view = ChatView(c.messages)
        column.addWidget(self.chat_view, 1)
        self.composer = Composer()
        self.input = self.composer.input
        self.chat_drops = FilesDroppedNear(self.chat_view, self.input)  # files let go over the chat join the box
        self.send_button = self.composer.button  # sends; while an answer streams, stops it
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(20, 4, 20, 12)
        composer_row.addStretch(1)
        composer_row.addWidget(self.composer, 100)  # as wide as the conversation column, at most
        composer_row.addStretch(1)
        self.composer.setMaximumWidth(880)
        self.composer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        column.addLayout(composer_row)
        self.chat_settings = ChatSettingsPanel(c.conversation_settings(), c.conversation_id)
        self.chat_settings.hide()
        main = QWidget()
        row = QHBoxLayout(main)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(chat, 1)
        row.addWidget(self.chat_settings)
        self.content = QStackedWidget()  # beside the sidebar: the chat; the Models page in its place while open
        self.content.addWidget(main)
        self.model_manager: ModelManager | None = None
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.sidebar)
        splitter.addWidget(self.content)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([250, 950])
        splitter.setChildrenCollapsible(False)
        splitter.setHandleWidth(1)
        self.pages = QStackedWidget()  # the chat; Settings over it while open
        self.pages.addWidget(splitter)
        self.setCentralWidget(self.pages)
        self.settings_page: SettingsPage | None = None
        self.status_line = AppStatusBar(self.bridge, c.stats, self)
        self.setStatusBar(self.status_line)
        self.pages.currentChanged.connect(lambda _page: self.status_line.close_details())  # Settings covers it
        self.content.currentChanged.connect(lambda _page: self.status_line.close_details())  # so does Models
        self.toast = Toast(chat)  # transient feedback, over the bottom of the chat
        # Keyboard order: sidebar (new, search, list, menu) -> header -> input -> add files -> send
        QWidget.setTabOrder(self.sidebar.app_menu_button, self.header.model_button)
        QWidget.setTabOrder(self.header.model_button, self.conversation_settings_button)
        QWidget.setTabOrder(self.conversation_settings_button, self.header.export_button)
        QWidget.setTabOrder(self.header.export_button, self.input)
        QWidget.setTabOrder(self.input, self.composer.attach_button)
        QWidget.setTabOrder(self.composer.attach_button, self.send_button)
        QWidget.setTabOrder(self.send_button, self.composer.room_button)  # Make room and send, when offered
        QWidget.setTabOrder(self.composer.room_button, self.composer.think_button)

    def _connect(self) -> None:
        c, b = self.controller, self.bridge
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(c.stop)
        self.composer.think_changed.connect(self._think_changed)
        self.input.textChanged.connect(lambda: self.draft_counter.set_text(self.input.toPlainText()))
        self.draft_counter.changed.connect(self._show_draft_count)
        self.composer.make_room_requested.connect(self.make_room_and_send)
        for box in (self.input, self.chat_view):  # the message box, and a message edited in place
            box.files_refused.connect(lambda why: self.toast.show_message(why, 8000))
            box.files_reading.connect(lambda what: self.toast.show_message(what, 4000))
        self.header.settings_requested.connect(self.toggle_conversation_settings)
        self.chat_settings.changed.connect(self._conversation_settings_changed)
        self.chat_settings.closed.connect(lambda: self.show_conversation_settings(False))
        self.chat_settings.reset_requested.connect(self._reset_conversation_settings)
        self.header.model_switch_requested.connect(self.open_model_manager)
        self.header.export_requested.connect(self.export_conversation_dialog)
        self.sidebar.new_requested.connect(self.new_conversation)
        self.sidebar.selected.connect(lambda cid: (self.close_model_manager(), c.open_conversation(cid)))
        self.sidebar.models_requested.connect(self.toggle_model_manager)
        self.sidebar.delete_requested.connect(self.delete_conversation)
        self.sidebar.pin_requested.connect(c.set_pinned)
        self.sidebar.export_requested.connect(lambda cid, kind: self.export_conversation_dialog(kind, cid))
        self.sidebar.search_changed.connect(c.search)
        c.conversations.modelReset.connect(lambda: self.sidebar.select(c.conversation_id))
        c.conversations.renamed.connect(lambda *_: self._show_title())
        c.title_changed.connect(lambda *_: self._show_title())
        c.conversation_opened.connect(self._conversation_opened)
        c.generating_changed.connect(lambda _on: self._update_actions())
        c.prompt_started.connect(lambda tokens: self._show_context(tokens))
        c.stats.changed.connect(self._show_live_context)
        c.answer_finished.connect(lambda *_: self._show_context())
        c.answer_finished.connect(self._room_answered)
        c.message.connect(lambda text: self.toast.show_message(text, 12000))  # (a full disk: not saved, not sent)
        c.messages.modelReset.connect(self._update_actions)
        c.messages.rowsInserted.connect(self._update_actions)
        c.messages.rowsRemoved.connect(self._update_actions)
        c.messages.dataChanged.connect(self._update_actions)
        self.chat_view.edit_submitted.connect(c.edit_and_resend)
        self.chat_view.answer_edited.connect(c.edit_answer)
        self.chat_view.regenerate_requested.connect(c.regenerate)
        self.chat_view.branch_requested.connect(self.branch)
        self.chat_view.editing_stopped.connect(self.input.setFocus)
        self.input.edit_last_requested.connect(self.edit_last_message)
        self.chat_view.make_room_requested.connect(self.make_room)
        self.chat_view.continue_requested.connect(c.continue_last_answer)
        self.chat_view.alternative_requested.connect(
            lambda mid, step: (c.show_alternative(mid, step), self._show_context())
        )
        self.chat_view.suggestion_clicked.connect(self._use_suggestion)
        self.chat_view.tool_decided.connect(c.decide)
        c.tool_call_waiting.connect(self.chat_view.focus_tool_call)
        self.chat_view.models_requested.connect(lambda: self.open_model_manager().show_catalog())
        self.chat_view.copied.connect(lambda what: self.toast.show_message(f"Copied {what} to the clipboard", 3000))
        b.status_changed.connect(self._engine_status)
        b.engine_failed.connect(self._engine_failed)
        b.notice.connect(self._notice)
        self.banner.action_clicked.connect(self._banner_action)

    # -- chat actions --------------------------------------------------------------------------------------

    def send(self, text: str) -> None:
        remote = self.settings.remote_endpoint()
        if remote is not None and self.bridge.status.state in (CRASHED, FAILED):
            self.toast.show_message(
                f"Not sent: {remote.name} cannot be reached. Press Retry above the chat, or pick another connection.",
                6000,
            )
            return
        if self.bridge.status.state == CRASHED:
            self.toast.show_message(
                "Not sent: the engine is not running. Press Restart engine above the chat, then send again.", 6000
            )
            return
        if self.bridge.status.state == FAILED:
            self.toast.show_message(
                "Not sent: no model is loaded. Press Retry above the chat, or pick a model under Models in the sidebar.",
                6000,
            )
            return
        if self.controller.send(text):
            self.input.clear()

    def new_conversation(self) -> None:
        self.close_model_manager()  # a chat is asked for: the Models page gives it its place back
        self.controller.new_conversation()
        self.input.setFocus()

    def delete_conversation(self, conversation_id: int) -> None:
        row = self.store.conversation(conversation_id)
        if row is None:
            return
        if self.confirm_delete and not confirm_destructive(
            self,
            "Delete this chat?",
            f"“{row.title}” and all its messages will be deleted. This cannot be undone.",
            "Delete chat",
        ):
            return
        self.controller.delete_conversation(conversation_id)

    def _delete_current(self) -> None:
        if self.controller.conversation_id is not None:
            self.delete_conversation(self.controller.conversation_id)

    def branch(self, message_id: int | None = None) -> None:
        """Branch in new chat from answer `message_id` (the last answer of the open chat when None: the Chat
        menu's item); the new chat opens with the keyboard in the message box, to go on another way."""
        if message_id is None:
            answers = [m for m in self.controller.messages.rows if m.role == "assistant"]
            if not answers:
                return
            message_id = answers[-1].id
        if self.controller.branch(message_id) is not None:
            self.close_model_manager()
            self.input.setFocus()
            self.toast.show_message("A new chat, to go on from this answer another way", 4000)

    def edit_last_message(self) -> None:
        """Up in the empty message box, or Chat > Edit your last message: it opens in place, the keyboard in
        it (Enter resends, Esc cancels; either way the keyboard comes back to the message box)."""
        self.chat_view.edit_last_message()

    def flip_last_answer(self, step: int) -> None:
        """Chat > Previous answer (Alt+Left) / Next answer (Alt+Right): the last answer's ‹ › from the keyboard."""
        last = self.controller.messages.rows[-1] if self.controller.messages.rows else None
        if last is not None and last.role == "assistant" and self.controller.show_alternative(last.id, step):
            self._show_context()

    def copy_last_answer(self) -> None:
        answers = [m for m in self.controller.messages.rows if m.role == "assistant" and m.content]
        if answers:
            QGuiApplication.clipboard().setText(answers[-1].content)
            self.toast.show_message("Copied the last answer to the clipboard", 3000)

    def _show_model_pair(self) -> None:
        """The model's name above the chat, where answers come from in the status line, and the empty chat's
        words: what this model is good for (the built-in one is a tiny demo), details one click away."""
        s = self.settings
        remote = s.remote_endpoint()
        self._show_speculation_items()
        if remote is not None:
            where = source_words(s)
            self.status_line.set_source(
                where, f"Answers come from {where}: an OpenAI-compatible server at {remote.url}."
            )
            self.header.set_model(where, f"Model: {remote.model}\nServer: {remote.name} ({remote.url})")
            self.chat_view.set_welcome(f"You are chatting with {where}, a server on another computer.")
            return
        name = model_pair_name(s)  # the catalog's name for an installed pair
        self.status_line.set_source(
            f"{name} on this computer", "Answers come from this computer: the model runs in an engine process here."
        )
        self.header.set_model(name, f"Model: {s.target}\nDraft model: {s.draft or 'none'}\nClick to change")
        if s.target == BUILTIN:
            self.chat_view.set_welcome(
                f"{name} is a tiny demo model that comes with the app: it answers at once, but often wrongly. "
                "For real answers, get a bigger model.",
                offer_models=True,
            )
        else:
            self.chat_view.set_welcome(f"{name} runs on this computer: nothing you type leaves it.")

    def _use_suggestion(self, text: str) -> None:
        """A suggestion is a message: sent at once, as chat apps do (it stays in the box if it cannot be)."""
        self.input.setPlainText(text)
        self.input.setFocus()
        self.send(text)

    def _show_speculation_items(self) -> None:
        """The tree budget, tokens per pass and their chart only where answers are speculative: a draft is
        set and this chat has not chosen plain decoding."""
        plain = self.controller.conversation_settings().method == Method.SEQUENTIAL
        remote = self.settings.remote_endpoint() is not None  # a server decodes its own way
        if remote:
            why = "Answers come from a server, which decodes its own way: there are no passes to show here."
        elif plain:
            why = "Plain decoding, as this chat's settings ask: one token per pass of the big model, so no chart."
        else:
            why = NO_DRAFT_WORDS
        self.status_line.details.set_uses_draft(bool(self.settings.draft) and not plain and not remote, why)

    def _conversation_opened(self, conversation_id: int | None) -> None:
        self.chat_settings.set_settings(self.controller.conversation_settings(conversation_id), conversation_id)
        self._show_think_switch()
        self._show_speculation_items()
        self.sidebar.select(conversation_id)
        self._show_title()
        self._show_context()
        self._update_actions()
        self.draft_counter.refresh()  # another chat: another history before the message

    def _show_title(self) -> None:
        cid = self.controller.conversation_id
        row = self.store.conversation(cid) if cid is not None else None
        self.header.set_title(row.title if row else "New chat")

    def _show_context(self, reading: int | None = None) -> None:
        """The context meter: the prompt being read, else the chat with the message being written (counted
        by the engine), else the last answer's prompt plus its tokens."""
        limit = self.bridge.status.max_context
        used = reading
        draft = self.draft_counter.count if reading is None else None
        if draft is not None:
            self.header.context_meter.set_usage(draft.prompt_tokens, limit, True, draft.dropped_messages)
            return
        if used is None:
            answers = [
                m for m in self.controller.messages.rows if m.role == "assistant" and m.stats.get("prompt_tokens")
            ]
            used = (answers[-1].stats["prompt_tokens"] + answers[-1].stats.get("generated_tokens", 0)) if answers else 0
        self.header.context_meter.set_usage(used, limit)

    def _show_draft_count(self) -> None:
        """The message being written was counted (or no longer is): the meter shows the chat with it, and a
        message too long for the model says so under the message box while it can still be shortened, with
        Make room and send where that helps (RoomHostMixin), and what it is doing once pressed."""
        self._show_context()
        attempt = self._room_attempt
        if attempt is not None and attempt.message_id is None:
            tokens = f"{attempt.tokens:,}"
            self.composer.set_note(f"Loading the model again with room for {tokens} tokens; then the message is sent.")
            return
        count = self.draft_counter.count
        if count is None or count.fits:
            self.composer.set_note("")
            return
        room = self.draft_room_offered()
        max_tokens = self.controller.conversation_settings().max_tokens
        refused = self.controller.refused_room()
        remote = self.settings.remote_endpoint() is not None
        note = draft_too_long(room, count.prompt_tokens, max_tokens, self.bridge.status.models, refused, remote)
        self.composer.set_note(note, f"{room.words()}, then sends the message." if room is not None else "")

    def _show_live_context(self) -> None:
        """While an answer streams, the meter counts its tokens too (the prompt read, plus what is written)."""
        active = self.controller.active
        if active is not None and active.conversation_id == self.controller.conversation_id and active.reading:
            self._show_context(active.reading["prompt_tokens"] + self.controller.stats.tokens)

    def _update_actions(self, *_: object) -> None:
        generating = self.controller.generating
        crashed = self.bridge.status.state in (CRASHED, FAILED)
        self.composer.set_mode(STOP if generating else SEND)
        self.send_button.setEnabled(generating or not crashed)
        self.stop_action.setEnabled(generating)
        can_regenerate = self.controller.can_regenerate() and not crashed
        room = self.room_offered() is not None
        self.regenerate_action.setEnabled(can_regenerate or room)  # Ctrl+R makes room where that is the way
        self.regenerate_action.setText(
            "Make r&oom and try again" if room and not can_regenerate else "Re&generate the answer"
        )
        self.chat_view.set_regenerate_enabled(can_regenerate)
        self.chat_view.set_continue_offered(self.controller.app_settings.remote_endpoint() is None and not crashed)
        self.continue_action.setEnabled(self.controller.can_continue_last_answer() and not crashed)
        self.chat_view.set_room_enabled(room)
        self.chat_view.set_actions_enabled(not generating)
        last = self.controller.messages.rows[-1] if self.controller.messages.rows else None
        answer = last if last is not None and last.role == "assistant" else None
        self.branch_action.setEnabled(answer is not None and answer.status != STREAMING)
        self.edit_last_action.setEnabled(
            not generating and any(m.role == "user" for m in self.controller.messages.rows)
        )
        self.previous_answer_action.setEnabled(not generating and answer is not None and answer.alt_index > 0)
        self.next_answer_action.setEnabled(
            not generating and answer is not None and answer.alt_index < answer.alt_count - 1
        )

    # -- engine --------------------------------------------------------------------------------------------

    def _engine_status(self, status: EngineStatus) -> None:
        if status.state not in (CRASHED, FAILED) and self.banner.isVisible() and self.banner.text() != self._gpu_banner:
            self.banner.hide()
        if status.state == CRASHED and not self.banner.isVisible():
            kind = "engine_died_loading" if status.hint == LOAD_DIED_HINT else "engine_died"
            self._engine_failed(P.Error(None, kind, status.message, status.hint))
        if self.controller.conversation_id is None:  # no chat yet: its defaults follow the model (a thinking one's)
            self.chat_settings.set_settings(self.controller.conversation_settings(), None)
        self._show_think_switch()
        self._show_context()
        self.draft_counter.refresh()  # another model, another context, an answer's end: counted again
        self._say_shorter_context(status)
        self._update_actions()
        self._room_progress(status)

    def _say_shorter_context(self, status: EngineStatus) -> None:
        """A model that keeps less of a chat than the context length in Settings keeps all it can (the app's
        Load says fit_context): said once per load, since the meter alone would look like a setting ignored."""
        wanted, kept = self.settings.context_length, status.max_context
        loaded = (status.models.get("target"), status.models.get("draft"), kept, wanted)
        if status.state != READY or not kept or kept >= wanted or loaded == self._context_said:
            return
        if self.settings.remote_endpoint() is not None:
            return  # a server keeps its own context; Settings' length is not sent to it
        self._context_said = loaded
        self.toast.show_message(
            f"This model keeps at most {kept:,} tokens of a chat, so it uses that instead of the "
            f"{wanted:,} set in Settings.",
            8000,
        )

    def _show_gpu_check(self) -> None:
        """A GPU that failed its check is not used (the engine bridge loads on the processor instead): say so
        once, at start, with the check's findings one click away."""
        from app.system.gpu_check import banner_text, read_report

        report = read_report(self.paths.log_dir)
        self._gpu_banner = banner_text(report)
        if self._gpu_banner is not None:
            self.banner.show_message(self._gpu_banner, details="\n".join(report.lines()))

    def _engine_failed(self, error: P.Error) -> None:
        remote = self.settings.remote_endpoint()
        if remote is not None:
            self._connection_failed(remote.name, error)
        elif error.kind == "engine_died_loading":  # most often out of memory: a smaller model is the way on
            text = (
                f"<b>The models could not be loaded.</b> The engine stopped while loading them. "
                f"{engine_stopped_text(error.message)} {escape(sentence(error.hint))}."
            )
            self.banner.show_message(text, ("restart", "settings"), details=error.message)
        elif error.kind in ("engine_died", "engine_start"):
            text = (
                f"<b>The engine stopped.</b> {engine_stopped_text(error.message)} Your conversation is kept; "
                "the answer in progress was marked interrupted."
            )
            self.banner.show_message(text, ("restart",), details=error.message)
        elif error.kind == "insufficient_memory":  # the plan's figures and flags under Details
            text = too_little_memory_text(self.settings.context_length)
            self.banner.show_message(text, ("models", "settings", "retry"), details=f"{error.kind}: {error.message}")
        elif error.kind == "model_not_found" and (missing := missing_model_words(self.settings)):
            self.banner.show_message(  # a drive unplugged, a folder moved: the way back in the app's words
                f"<b>The models could not be loaded.</b> {escape(missing)}",
                ("retry", "settings"),
                details=f"{error.kind}: {error.message}",
            )
        else:
            hint = f" {sentence(error.hint)}." if error.hint else ""
            self.banner.show_message(
                f"<b>The models could not be loaded.</b> {escape(sentence(error.message))}.{escape(hint)}",
                ("settings", "retry"),
                details=f"{error.kind}: {error.message}",
            )

    def _connection_failed(self, name: str, error: P.Error) -> None:
        """The banner for a remote server: the connection was lost mid-use (Retry connects again and answers
        the last message again, keeping the cut-off answer), or it could not be used at all."""
        hint = f" {sentence(error.hint)}." if error.hint else ""
        if error.kind == "engine_died":
            text = (
                f"<b>Lost the connection to {escape(name)}.</b> Your conversation is kept, and so is the answer "
                "so far, marked interrupted. Retry answers again once the server is back."
            )
            self.banner.show_message(text, ("retry_answer", "connections"), details=error.message)
        else:
            self.banner.show_message(
                f"<b>{escape(name)} cannot be used.</b> {escape(sentence(error.message))}.{escape(hint)}",
                ("retry", "connections"),
                details=f"{error.kind}: {error.message}",
            )

    def _banner_action(self, name: str) -> None:
        if name == "retry_answer":
            self.banner.hide()
            self.bridge.restart()
            self.controller.regenerate()
        elif name == "connections":
            self.open_model_manager().show_connections()
        elif name == "restart":
            self.restart_engine()
        elif name == "retry":
            self.banner.hide()
            self.bridge.load(self.settings.load_request())
        elif name == "settings":
            self.open_settings()
        elif name == "models":
            self.open_model_manager()

    def _notice(self, text: str) -> None:
        self.toast.show_message(text, 8000)

    def restart_engine(self) -> None:
        self.banner.hide()
        if self.bridge.worker is None:
            self.bridge.start(self.settings.load_request())
        else:
            self.bridge.restart()

    # -- models (app/models/manager.py, app/models/wizard/) ---------------------------------------------------------

    def open_wizard(self, resume_pair: str | None = None) -> FirstRunWizard:
        """The set-up wizard from the menu: it borrows this window's engine for its last page."""
        if self.settings.remote_endpoint() is not None:  # it sets up and loads a model on this computer
            self.apply_settings(dataclasses.replace(self.settings, connection=""))
        wizard = FirstRunWizard(self.settings, models_dir(), resume_pair=resume_pair, bridge=self.bridge, parent=self)
        wizard.finished.connect(lambda result: self._wizard_finished(wizard, result))
        wizard.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        wizard.show()
        return wizard

    def _wizard_finished(self, wizard: FirstRunWizard, result: int) -> None:
        chosen = wizard.chosen_settings
        wizard.take_bridge()
        if result and chosen is not None:
            self.settings = chosen  # already loaded by the wizard: save without a second load
            self.controller.app_settings = chosen
            self.store_settings(chosen)
            self._show_model_pair()
        elif wizard.done_page.loaded:  # cancelled after it loaded another pair: back to the saved one
            self.bridge.load(self.settings.load_request())
        if not (result and chosen is not None) and wizard.state.settings.models_folder != self.settings.models_folder:
            # cancelled after picking another models folder: it stays picked (the app already looks there)
            self.settings = dataclasses.replace(self.settings, models_folder=wizard.state.settings.models_folder)
            self.controller.app_settings = self.settings
            self.store_settings(self.settings)

    # -- closing -------------------------------------------------------------------------------------------

    def _escape(self) -> None:
        """Esc: back to the chat from the Models page, else deny the tool call a card asks about, else stop the
        answer."""
        if self.model_manager is not None and self.content.currentWidget() is self.model_manager:
            self.close_model_manager()
            return
        call_id = self.controller.open_question()
        if call_id is not None:
            self.controller.decide(call_id, "deny")
        else:
            self.controller.stop()

    def _tools_ready(self, toolbox, failures: dict) -> None:
        """The MCP servers are up: the next answers are offered their tools; the ones that failed are named."""
        self.controller.set_toolbox(toolbox)
        self.chat_settings.set_tool_servers([name for name in toolbox.connections if name not in failures])
        if failures:
            self.toast.show_message("MCP servers not started: " + "; ".join(failures.values()), 8000)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.status_line.close_details()  # its Esc / click-outside watch ends with it
        save_geometry(self, self.paths.window_file)
        self.api_server.stop(quiet=True)
        self.input.stop_reading()
        self.controller.detach()
        self.tool_servers.close()
        for signal, slot in (
            (self.bridge.status_changed, self._engine_status),
            (self.bridge.engine_failed, self._engine_failed),
            (self.bridge.notice, self._notice),
            (self.bridge.status_changed, self.status_line.show_status),
            (self.bridge.status_changed, self.status_line.details.show_status),
            (self.bridge.auto_choice, self.status_line.details.show_choice),
        ):
            try:
                signal.disconnect(slot)
            except (RuntimeError, TypeError):
                pass
        if self.owns_bridge:
            self.bridge.shutdown()
        if self.owns_store:
            self.store.close()
        super().closeEvent(event)
