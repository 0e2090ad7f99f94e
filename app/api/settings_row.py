"""The settings dialog's row for the local API server: on/off, port, whether a key is required, and the
key itself with Copy and New key buttons (a key is made when the server is first turned on with a key)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget

from app.api.server import HOST
from app.settings.schema import AppSettings
from core.server.keys import new_api_key


class ApiServerSettingsRow(QWidget):
    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.enabled = QCheckBox("Serve an OpenAI-compatible API on this computer")
        self.enabled.setAccessibleName("Local API server")
        self.enabled.setToolTip("Other programs on this computer can use the model at http://127.0.0.1:PORT/v1; "
                                "their requests wait in line with your chats")
        self.enabled.setChecked(settings.api_server)
        self.port = QSpinBox()
        self.port.setAccessibleName("API server port")
        self.port.setRange(1024, 65535)
        self.port.setValue(min(max(settings.api_server_port, 1024), 65535))
        self.require_key = QCheckBox("Require an API key")
        self.require_key.setAccessibleName("Require an API key")
        self.require_key.setChecked(settings.api_server_require_key)
        self.key = QLineEdit(settings.api_server_key)
        self.key.setAccessibleName("API key")
        self.key.setReadOnly(True)
        self.key.setPlaceholderText("made when you turn the server on")
        self.key.setMinimumWidth(self.key.fontMetrics().horizontalAdvance(new_api_key()) + 16)
        self.address = QLabel()
        self.address.setAccessibleName("API server address")
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setAccessibleName("Copy the API key")
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        self.new_key_button = QPushButton("New key")
        self.new_key_button.setAccessibleName("Make a new API key")
        self.new_key_button.setToolTip("Programs using the old key will need the new one")
        self.new_key_button.clicked.connect(lambda: self.key.setText(new_api_key()))

        port_row = QHBoxLayout()
        port_row.addWidget(QLabel("Port:"))
        port_row.addWidget(self.port)
        port_row.addWidget(self.require_key)
        port_row.addStretch(1)
        key_row = QHBoxLayout()
        key_row.addWidget(QLabel("Key:"))
        key_row.addWidget(self.key, 1)
        key_row.addWidget(self.copy_button)
        key_row.addWidget(self.new_key_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.enabled)
        layout.addLayout(port_row)
        layout.addLayout(key_row)
        layout.addWidget(self.address)
        self.enabled.toggled.connect(self._update)
        self.require_key.toggled.connect(self._update)
        self.port.valueChanged.connect(self._update)
        self._update()

    def _update(self) -> None:
        on = self.enabled.isChecked()
        if on and self.require_key.isChecked() and not self.key.text():
            self.key.setText(new_api_key())
        self.address.setText(f"Programs connect to http://{HOST}:{self.port.value()}/v1 (OpenAI API)")
        self.address.setEnabled(on)
        self.port.setEnabled(on)
        self.require_key.setEnabled(on)
        for widget in (self.key, self.copy_button, self.new_key_button):
            widget.setEnabled(on and self.require_key.isChecked())

    def values(self) -> dict[str, Any]:
        """The AppSettings fields this row edits."""
        return dict(api_server=self.enabled.isChecked(), api_server_port=int(self.port.value()),
                    api_server_require_key=self.require_key.isChecked(), api_server_key=self.key.text())
