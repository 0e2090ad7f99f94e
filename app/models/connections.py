"""The Models page's Connections section: where answers come from. "This computer" (the engine process, as
always) and any number of OpenAI-compatible servers on other computers: `specexec serve` on a desktop with
the GPU, vLLM, Ollama, LM Studio... Each server has a name, an address and an API key, which is kept in the
OS keyring (core.remote.key_store), never in the settings file.

A server is saved only after it passed core.remote.check: its models were listed and one of them streamed a
short answer. What goes wrong is said in plain words (nothing answers, the key was refused, not an
OpenAI-compatible server, a TLS problem), with the technical details one click away. Network calls run off
the GUI thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from app.chat.message_words import sentence
from app.engine.connections import endpoint_of, own_api_server_words
from app.models.wizard.pair_list import Card, CardList, badge, label
from app.settings.schema import AppSettings, RemoteEndpoint
from app.system.background import BackgroundCall
from app.theme.icons import themed
from app.window.buttons import LINK, PRIMARY, SECONDARY, button, footer
from app.window.wheel_guard import NoWheelComboBox
from app.window.labels import Label, plain_tip
from core.errors import InvalidSettingError, RemoteError
from core.remote.check import EndpointCheck, check_endpoint, list_models
from core.remote.endpoint import Endpoint
from core.remote.key_store import delete_key, save_key

# One address a line: a label wraps at the slashes of an address that does not fit beside another.
ADDRESS_EXAMPLES = (
    "Another computer running specexec serve: the address and key it prints.\n"
    "Ollama: http://HOST:11434/v1\nLM Studio: http://HOST:1234/v1\nvLLM: http://HOST:8000/v1"
)


def returning_errors(function: Callable[[], Any]) -> Callable[[], Any]:
    """`function` with a RemoteError returned as its result instead of raised: BackgroundCall's `failed`
    carries only text, and the window shows the error's hint and details too."""

    def call() -> Any:
        try:
            return function()
        except RemoteError as error:
            return error

    return call


def error_words(error: RemoteError) -> str:
    """What went wrong and what to do, as sentences."""
    return f"{sentence(str(error))}." + (f" {sentence(error.hint)}." if error.hint else "")


class Outcome(QWidget):
    """A line saying how a check went, with its technical details behind a Details button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.text = label("", "connectionOutcome")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details_button = button("Details", LINK)
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._show)
        row.addWidget(self.text, 1)
        row.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        self._words = self._details = ""
        self.say("")

    def say(self, words: str, details: str = "") -> None:
        self._words, self._details = words, details
        self.details_button.setVisible(bool(details))
        self.details_button.setChecked(False)
        self.text.setText(words)

    def _show(self, shown: bool) -> None:
        self.text.setText(self._words + (f"\nDetails: {self._details}" if shown else ""))


class EndpointDialog(QDialog):
    """Add a server: name, address, key; Check connection; then Save (only after a check that passed, of
    exactly what is in the fields)."""

    def __init__(
        self, saved: list[RemoteEndpoint], own_api_url: str | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a server")
        self.setObjectName("endpointDialog")
        self.saved = saved
        self.own_api_url = own_api_url  # this app's API server, refused as a connection
        self.checked: EndpointCheck | None = None
        self.endpoint: Endpoint | None = None
        self._calls: list[BackgroundCall] = []
        column = QVBoxLayout(self)
        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("GPU box")
        self.address_edit = QLineEdit()
        self.address_edit.setPlaceholderText("http://192.168.1.20:8765/v1")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("leave empty if the server needs none")
        form.addRow("Name", self.name_edit)
        form.addRow("Address", self.address_edit)
        form.addRow("API key", self.key_edit)
        column.addLayout(form)
        column.addWidget(label(ADDRESS_EXAMPLES, muted=True))
        check_row = QHBoxLayout()
        self.check_button = button("Check connection", SECONDARY)
        themed(self.check_button, "refresh-cw", size=16)
        self.check_button.clicked.connect(self.check)
        check_row.addWidget(self.check_button)
        check_row.addStretch()
        column.addLayout(check_row)
        self.outcome = Outcome()
        column.addWidget(self.outcome)
        self.model_row = QWidget()
        model_form = QFormLayout(self.model_row)
        model_form.setContentsMargins(0, 0, 0, 0)
        self.model_box = NoWheelComboBox()
        self.model_box.setAccessibleName("Model on this server")
        model_form.addRow("Model", self.model_box)
        self.model_row.hide()
        column.addWidget(self.model_row)
        column.addStretch()
        self.save_button = button("Save", PRIMARY)
        self.save_button.setEnabled(False)
        self.save_button.setToolTip("Check the connection first")
        self.cancel_button = button("Cancel", SECONDARY)
        self.save_button.clicked.connect(self.accept)
        self.cancel_button.clicked.connect(self.reject)
        column.addWidget(footer(self, self.cancel_button, self.save_button))
        for edit in (self.name_edit, self.address_edit, self.key_edit):
            edit.textChanged.connect(self._edited)
        self.resize(560, 360)

    def _edited(self) -> None:
        """What was checked is no longer what is in the fields: check again before saving."""
        if self.checked is not None:
            self.checked = None
            self.save_button.setEnabled(False)
            self.model_row.hide()
            self.outcome.say("Changed: check the connection again before saving.")

    def check(self) -> None:
        name = " ".join(self.name_edit.text().split())
        if not name:
            self.outcome.say("Give the server a name (for example “GPU box”): it shows where answers come from.")
            return
        if any(e.name == name for e in self.saved):
            self.outcome.say(f"There is already a connection called “{name}”: pick another name.")
            return
        try:
            endpoint = Endpoint.from_address(self.address_edit.text(), self.key_edit.text(), name)
        except InvalidSettingError as error:
            self.outcome.say(f"{sentence(str(error))}.")
            return
        twin = next((e for e in self.saved if e.url == endpoint.base_url), None)
        if twin is not None:
            self.outcome.say(f"{endpoint.base_url} is saved already, as “{twin.name}”.")
            return
        own = own_api_server_words(endpoint.base_url, self.own_api_url)
        if own is not None:
            self.outcome.say(own)
            return
        self.endpoint = endpoint
        self.check_button.setEnabled(False)
        self.outcome.say(f"Connecting to {endpoint.base_url}: listing its models and asking one for a short answer…")
        call = BackgroundCall(returning_errors(lambda: check_endpoint(endpoint)), self)
        call.done.connect(lambda result: self._checked(endpoint, result))
        call.failed.connect(lambda text: self._checked(endpoint, RemoteError(text)))
        self._calls.append(call.start())

    def _checked(self, endpoint: Endpoint, result: EndpointCheck | RemoteError) -> None:
        self.check_button.setEnabled(True)
        if endpoint != self.endpoint:
            return  # an older check: the fields changed since
        if isinstance(result, RemoteError):
            self.outcome.say(error_words(result), result.details)
            return
        self.checked = result
        self.model_box.clear()
        self.model_box.addItems([m.id for m in result.models])
        self.model_box.setCurrentText(result.model)
        self.model_row.show()
        count = len(result.models)
        words = (
            f"Connected: {count} model{'s' if count != 1 else ''}. {result.model} answered "
            f"“{result.reply[:60]}” in {result.seconds:.1f} s."
        )
        if "seed" in result.refused:
            words += " This server does not take a seed, so a fixed seed will not repeat an answer there."
        if endpoint.key_in_clear:
            words += " Careful: the key travels unencrypted (http, not https) over the network."
        self.outcome.say(words)
        self.save_button.setEnabled(True)
        self.save_button.setToolTip("")

    def values(self) -> tuple[RemoteEndpoint, str]:
        """The checked server (with the model picked) and its key."""
        assert self.endpoint is not None and self.checked is not None
        saved = RemoteEndpoint(self.endpoint.name, self.endpoint.base_url, self.model_box.currentText())
        return saved, self.endpoint.api_key or ""


class ConnectionsPage(QWidget):
    """The section. `use_requested`: settings that answer from another place (checked); `endpoints_changed`:
    settings with a server added or removed (nothing to reload)."""

    use_requested = Signal(object)  # AppSettings
    endpoints_changed = Signal(object)  # AppSettings

    def __init__(
        self,
        settings: AppSettings,
        local_name: str,
        say: Callable[[str], None],
        confirm: Callable[[str, str, str], bool],
        own_api_url: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.local_name = local_name
        self.say = say
        self.confirm = confirm
        self.own_api_url = own_api_url  # this app's API server (None while off): not a connection
        self.dialog: EndpointDialog | None = None
        self._calls: list[BackgroundCall] = []
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)  # in line with the Models page's switch
        column.addWidget(
            label(
                "Answers can come from this computer or from an OpenAI-compatible server on "
                "another one (a desktop with a big GPU, or a team's vLLM).",
                muted=True,
            )
        )
        self.cards = CardList()
        self.cards.setAccessibleName("Connections")
        self.cards.currentRowChanged.connect(lambda _row: self._selected())
        column.addWidget(self.cards, 1)
        self.model_row = QWidget()
        model_line = QHBoxLayout(self.model_row)
        model_line.setContentsMargins(0, 0, 0, 0)
        self.model_box = NoWheelComboBox()
        self.model_box.setAccessibleName("Model on this server")
        self.model_box.setMinimumWidth(260)
        self.model_status = label("", muted=True)
        model_line.addWidget(Label("Model on this server:"))
        model_line.addWidget(self.model_box)
        model_line.addWidget(self.model_status, 1)
        column.addWidget(self.model_row)
        row = QHBoxLayout()
        self.use_button = button("Use this connection", PRIMARY)
        self.remove_button = button("Remove…", SECONDARY, "Forget the selected server and its API key")
        themed(self.remove_button, "trash-2", size=16)
        self.add_button = button("Add a server…", SECONDARY)
        themed(self.add_button, "square-pen", size=16)
        row.addWidget(self.use_button)
        row.addWidget(self.remove_button)
        row.addStretch()
        row.addWidget(self.add_button)
        column.addLayout(row)
        self.use_button.clicked.connect(self.use_selected)
        self.remove_button.clicked.connect(self.remove_selected)
        self.add_button.clicked.connect(self.add_dialog)
        self.model_box.currentTextChanged.connect(lambda _text: self._update_buttons())
        self.refresh()

    # -- the list ------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The connections in list order: "" for this computer, then the servers' names."""
        return [""] + [e.name for e in self.settings.endpoints]

    def refresh(self, select: str | None = None) -> None:
        self.cards.clear()
        for name in self.names():
            in_use = [badge("In use", "success")] if name == self.settings.connection else []
            if not name:
                card = Card(
                    "This computer",
                    in_use,
                    [label(f"{self.local_name} · runs here, in the engine process", muted=True)],
                )
            else:
                endpoint = next(e for e in self.settings.endpoints if e.name == name)
                card = Card(
                    name, in_use, [label(f"{endpoint.model or 'no model picked'} · {endpoint.url}", muted=True)]
                )
                card.setToolTip(plain_tip(f"An OpenAI-compatible server at {endpoint.url}"))
            self.cards.add_card(card)
        names = self.names()
        wanted = self.settings.connection if select is None else select
        self.cards.setCurrentRow(names.index(wanted) if wanted in names else 0)

    def selected_name(self) -> str | None:
        row = self.cards.currentRow()
        names = self.names()
        return names[row] if 0 <= row < len(names) else None

    def selected_endpoint(self) -> RemoteEndpoint | None:
        name = self.selected_name()
        return next((e for e in self.settings.endpoints if e.name == name), None) if name else None

    def _selected(self) -> None:
        """A server: list its models (off the GUI thread) to pick from; this computer: no model row."""
        endpoint = self.selected_endpoint()
        self.model_row.setVisible(endpoint is not None)
        self.model_box.clear()
        if endpoint is not None:
            self.model_box.addItem(endpoint.model)
            self.model_status.setText("Listing its models…")
            call = BackgroundCall(returning_errors(lambda: list_models(endpoint_of(endpoint))), self)
            call.done.connect(lambda result: self._listed(endpoint, result))
            self._calls.append(call.start())
        self._update_buttons()

    def _listed(self, endpoint: RemoteEndpoint, result: list | RemoteError) -> None:
        if self.selected_endpoint() != endpoint:
            return
        if isinstance(result, RemoteError):
            self.model_status.setText(error_words(result))
            self.model_status.setToolTip(plain_tip(result.details))
            return
        ids = [m.id for m in result]
        self.model_box.clear()
        self.model_box.addItems(ids)
        if endpoint.model in ids:
            self.model_box.setCurrentText(endpoint.model)
        self.model_status.setText(f"{len(ids)} model{'s' if len(ids) != 1 else ''} on this server")
        self.model_status.setToolTip("")
        self._update_buttons()

    def _in_use(self, name: str | None, model: str) -> bool:
        endpoint = self.settings.remote_endpoint()
        if not name:
            return endpoint is None
        return endpoint is not None and endpoint.name == name and endpoint.model == model

    def _update_buttons(self) -> None:
        name = self.selected_name()
        in_use = self._in_use(name, self.model_box.currentText())
        self.use_button.setEnabled(name is not None and not in_use and (not name or bool(self.model_box.currentText())))
        self.use_button.setText("In use" if in_use else "Use this connection")
        self.remove_button.setEnabled(bool(name) and name != self.settings.connection)
        self.remove_button.setToolTip(
            "The connection in use cannot be removed: switch to another first"
            if name and name == self.settings.connection
            else ""
        )

    # -- actions -------------------------------------------------------------------------------------------

    def use_selected(self) -> None:
        name = self.selected_name()
        if name is None or self._in_use(name, self.model_box.currentText()):
            return
        own = own_api_server_words(self.selected_endpoint().url, self.own_api_url) if name else None
        if own is not None:
            self.say(own)
            return
        if not name:
            settings = dataclasses.replace(self.settings, connection="")
            self.say("Switching to this computer: the engine is loading the model.")
        else:
            model = self.model_box.currentText()
            endpoints = [dataclasses.replace(e, model=model) if e.name == name else e for e in self.settings.endpoints]
            settings = dataclasses.replace(self.settings, connection=name, endpoints=endpoints)
            self.say(f"Answers now come from {model} on {name}.")
        self.settings = settings
        self.refresh()
        self.use_requested.emit(settings)

    def remove_selected(self) -> None:
        endpoint = self.selected_endpoint()
        if endpoint is None or endpoint.name == self.settings.connection:
            return
        if not self.confirm(
            "Remove this server?",
            f"{endpoint.name} ({endpoint.url}) and its API key will be forgotten. Conversations are kept.",
            "Remove server",
        ):
            return
        delete_key(endpoint.url)
        self._change(
            dataclasses.replace(self.settings, endpoints=[e for e in self.settings.endpoints if e != endpoint])
        )
        self.say(f"Removed {endpoint.name}.")

    def add_dialog(self) -> EndpointDialog:
        """Open the Add a server dialog (not modal: tests and people can both drive it)."""
        self.dialog = EndpointDialog(self.settings.endpoints, self.own_api_url, self)
        self.dialog.accepted.connect(lambda: self.add(*self.dialog.values()))
        self.dialog.open()
        return self.dialog

    def add(self, endpoint: RemoteEndpoint, key: str) -> None:
        where = save_key(endpoint.url, key) if key else "no key"
        self._change(
            dataclasses.replace(self.settings, endpoints=[*self.settings.endpoints, endpoint]), select=endpoint.name
        )
        self.say(
            f"Saved {endpoint.name}"
            + (f" (its key is kept in {where})." if key else ".")
            + " Press “Use this connection” to chat with it."
        )

    def _change(self, settings: AppSettings, select: str | None = None) -> None:
        self.settings = settings
        self.refresh(select)
        self.endpoints_changed.emit(settings)
