"""The settings page's section for the local API server: on/off, port, whether a key is required, the key
itself with Copy and New key buttons (a key is made when the server is first turned on with a key), and the
websites allowed to call it from a browser (none by default; a malformed entry is explained under it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIntValidator
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QVBoxLayout, QWidget

from app.api.server import HOST
from app.settings.schema import AppSettings
from app.window.buttons import SECONDARY, button
from app.window.labels import Label
from core.errors import ServerError
from core.server.keys import new_api_key
from core.server.origins import parse_origins


class ApiServerSettingsRow(QWidget):
    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.enabled = QCheckBox("Serve an OpenAI-compatible API on this computer")
        self.enabled.setAccessibleName("Local API server")
        self.enabled.setToolTip(
            "Other programs on this computer can use the model at http://127.0.0.1:PORT/v1; "
            "their requests wait in line with your chats"
        )
        self.enabled.setChecked(settings.api_server)
        self.port = QLineEdit(str(min(max(settings.api_server_port, 1024), 65535)))
        self.port.setAccessibleName("API server port")
        self.port.setValidator(QIntValidator(1024, 65535, self.port))
        self.port.setMaximumWidth(self.port.fontMetrics().horizontalAdvance("655350") + 20)
        self._port = int(self.port.text())
        self.require_key = QCheckBox("Require an API key")
        self.require_key.setAccessibleName("Require an API key")
        self.require_key.setChecked(settings.api_server_require_key)
        self.key = QLineEdit(settings.api_server_key)
        self.key.setAccessibleName("API key")
        self.key.setReadOnly(True)
        self.key.setPlaceholderText("made when you turn the server on")
        self.key.setMinimumWidth(self.key.fontMetrics().horizontalAdvance(new_api_key()) + 16)
        self.origins = QLineEdit(settings.api_server_allowed_origins)
        self.origins.setAccessibleName("Websites allowed to use the local server")
        self.origins.setPlaceholderText("none (for example http://localhost:3000)")
        self.origins.setToolTip(
            "Browser front ends at these addresses may call the API (CORS allowed origins: comma-separated; "
            "* for any website). Leave empty unless you use one: other websites are refused."
        )
        self.origins_problem = Label()
        self.origins_problem.setAccessibleName("Allowed websites problem")
        self.origins_problem.setWordWrap(True)
        self.address = Label()
        self.address.setAccessibleName("API server address")
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = button("Copy", SECONDARY)
        self.copy_button.setAccessibleName("Copy the API key")
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        self.new_key_button = button("New key", SECONDARY)
        self.new_key_button.setAccessibleName("Make a new API key")
        self.new_key_button.setToolTip("Programs using the old key will need the new one")
        self.new_key_button.clicked.connect(lambda: self.key.setText(new_api_key()))

        port_row = QHBoxLayout()
        port_row.addWidget(Label("Port:"))
        port_row.addWidget(self.port)
        port_row.addWidget(self.require_key)
        port_row.addStretch(1)
        key_row = QHBoxLayout()
        key_row.addWidget(Label("Key:"))
        key_row.addWidget(self.key, 1)
        key_row.addWidget(self.copy_button)
        key_row.addWidget(self.new_key_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.enabled)
        layout.addLayout(port_row)
        layout.addLayout(key_row)
        origins_row = QHBoxLayout()
        origins_label = Label("Websites allowed to use the server:")
        origins_label.setToolTip(self.origins.toolTip())
        origins_label.setBuddy(self.origins)
        origins_row.addWidget(origins_label)
        origins_row.addWidget(self.origins, 1)
        layout.addLayout(origins_row)
        layout.addWidget(self.origins_problem)
        layout.addWidget(self.address)
        self.enabled.toggled.connect(self._update)
        self.require_key.toggled.connect(self._update)
        self.port.textChanged.connect(self._update)
        self.origins.textChanged.connect(self._update)
        self._update()

    def _update(self) -> None:
        on = self.enabled.isChecked()
        if on and self.require_key.isChecked() and not self.key.text():
            self.key.setText(new_api_key())
        if self.port.hasAcceptableInput():
            self._port = int(self.port.text())
        self.address.setText(f"Programs connect to http://{HOST}:{self._port}/v1 (OpenAI API)")
        self.address.setEnabled(on)
        self.port.setEnabled(on)
        self.require_key.setEnabled(on)
        self.origins.setEnabled(on)
        try:
            parse_origins(self.origins.text())
            self.origins_problem.setText("")
        except ServerError as error:
            self.origins_problem.setText(str(error))
        self.origins_problem.setVisible(bool(self.origins_problem.text()))
        for widget in (self.key, self.copy_button, self.new_key_button):
            widget.setEnabled(on and self.require_key.isChecked())

    def values(self) -> dict[str, Any]:
        """The AppSettings fields this row edits."""
        return dict(
            api_server=self.enabled.isChecked(),
            api_server_port=self._port,
            api_server_require_key=self.require_key.isChecked(),
            api_server_key=self.key.text(),
            api_server_allowed_origins=self.origins.text().strip(),
        )
