"""Dialogs for the app-wide settings (model pair, offloading, VRAM budget, theme) and for one conversation's
settings (system prompt, temperature, top-p, max tokens, tree budget auto / manual)."""

from __future__ import annotations

import dataclasses

from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout,
    QLabel, QLineEdit, QPlainTextEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget,
)

from app.api_server_settings import ApiServerSettingsRow
from app.settings import AppSettings, BudgetMode, ConversationSettings, Offload, Theme

OFFLOAD_LABELS = {Offload.AUTO: "Automatic", Offload.ON: "Always (stream weights from RAM)", Offload.OFF: "Never (all in GPU memory)"}
THEME_LABELS = {Theme.SYSTEM: "Follow the system", Theme.LIGHT: "Light", Theme.DARK: "Dark"}


def _combo(labels: dict, current, name: str) -> QComboBox:
    combo = QComboBox()
    combo.setAccessibleName(name)
    for value, label in labels.items():
        combo.addItem(label, value.value)
    combo.setCurrentIndex(max(0, combo.findData(current.value)))
    return combo


def _buttons(dialog: QDialog) -> QDialogButtonBox:
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
    box.accepted.connect(dialog.accept)
    box.rejected.connect(dialog.reject)
    return box


class _ModelField(QWidget):
    """A model name ("builtin", a Hugging Face id, a .gguf file) or a folder picked with Browse."""

    def __init__(self, value: str, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(value)
        self.edit.setAccessibleName(name)
        browse = QPushButton("Browse…")
        browse.setAccessibleName(f"Browse for the {name.lower()} folder")
        browse.clicked.connect(self._browse)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Model folder", self.edit.text())
        if folder:
            self.edit.setText(folder)

    def text(self) -> str:
        return self.edit.text().strip()


class AppSettingsDialog(QDialog):
    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.original = settings
        form = QFormLayout()
        self.target = _ModelField(settings.target, "Model")
        self.draft = _ModelField(settings.draft, "Draft model")
        self.offload = _combo(OFFLOAD_LABELS, settings.offload, "Offloading")
        self.vram = QDoubleSpinBox()
        self.vram.setAccessibleName("GPU memory budget in GiB")
        self.vram.setRange(0.0, 1024.0)
        self.vram.setDecimals(1)
        self.vram.setSingleStep(0.5)
        self.vram.setSpecialValueText("Automatic")
        self.vram.setSuffix(" GiB")
        self.vram.setValue(settings.vram_budget_gb)
        self.theme = _combo(THEME_LABELS, settings.theme, "Theme")
        for label, widget in (("&Model:", self.target), ("&Draft model:", self.draft), ("&Offloading:", self.offload),
                              ("GPU &memory budget:", self.vram), ("&Theme:", self.theme)):
            form.addRow(label, widget)
            buddy = form.labelForField(widget)
            if isinstance(buddy, QLabel):
                buddy.setBuddy(widget.edit if isinstance(widget, _ModelField) else widget)
        self.api_server = ApiServerSettingsRow(settings)
        form.addRow("Local &API server:", self.api_server)
        buddy = form.labelForField(self.api_server)
        if isinstance(buddy, QLabel):
            buddy.setBuddy(self.api_server.enabled)
        note = QLabel("“builtin” / “builtin-draft” is the small model pair that comes with the app. "
                      "Leave the draft empty to decode without speculation.")
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(_buttons(self))

    def values(self) -> AppSettings:
        return dataclasses.replace(
            self.original,
            target=self.target.text() or "builtin",
            draft=self.draft.text(),
            offload=Offload(self.offload.currentData()),
            vram_budget_gb=float(self.vram.value()),
            theme=Theme(self.theme.currentData()),
            **self.api_server.values(),
        )


class ConversationSettingsDialog(QDialog):
    def __init__(self, settings: ConversationSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Conversation settings")
        form = QFormLayout()
        self.system_prompt = QPlainTextEdit(settings.system_prompt)
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("For example: You are a helpful assistant. Answer briefly.")
        self.system_prompt.setTabChangesFocus(True)
        self.temperature = QDoubleSpinBox()
        self.temperature.setAccessibleName("Temperature")
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.05)
        self.temperature.setValue(settings.temperature)
        self.temperature.setToolTip("0 = always the most likely word; higher = more varied")
        self.top_p = QDoubleSpinBox()
        self.top_p.setAccessibleName("Top-p")
        self.top_p.setRange(0.01, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(settings.top_p)
        self.max_tokens = QSpinBox()
        self.max_tokens.setAccessibleName("Maximum answer length in tokens")
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(settings.max_tokens)
        self.auto_budget = QCheckBox("Automatic")
        self.auto_budget.setAccessibleName("Automatic tree budget")
        self.auto_budget.setChecked(settings.budget_mode == BudgetMode.AUTO)
        self.budget = QSpinBox()
        self.budget.setAccessibleName("Tree budget")
        self.budget.setRange(1, 4096)
        self.budget.setValue(settings.budget)
        self.budget.setEnabled(not self.auto_budget.isChecked())
        self.auto_budget.toggled.connect(lambda on: self.budget.setEnabled(not on))
        budget_row = QWidget()
        row = QHBoxLayout(budget_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.auto_budget)
        row.addWidget(self.budget, 1)
        for label, widget in (("&System prompt:", self.system_prompt), ("T&emperature:", self.temperature),
                              ("Top-&p:", self.top_p), ("Max &tokens:", self.max_tokens),
                              ("Tree &budget:", budget_row)):
            form.addRow(label, widget)
            buddy = form.labelForField(widget)
            if isinstance(buddy, QLabel):
                buddy.setBuddy(self.auto_budget if widget is budget_row else widget)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(_buttons(self))

    def values(self) -> ConversationSettings:
        return ConversationSettings(
            system_prompt=self.system_prompt.toPlainText(),
            temperature=float(self.temperature.value()),
            top_p=float(self.top_p.value()),
            max_tokens=int(self.max_tokens.value()),
            budget_mode=BudgetMode.AUTO if self.auto_budget.isChecked() else BudgetMode.MANUAL,
            budget=int(self.budget.value()),
        ).validated()
