"""Dialogs for the app-wide settings (model pair, offloading, VRAM budget, context length, theme) and for one
conversation's settings (system prompt presets, sampling, answer length; method and tree budget under
Advanced)."""

from __future__ import annotations

import dataclasses

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout, QGroupBox,
    QHBoxLayout, QLabel, QLineEdit, QMenu, QPlainTextEdit, QSpinBox, QToolButton, QVBoxLayout, QWidget,
)

from app.api.settings_row import ApiServerSettingsRow
from app.settings.presets import SYSTEM_PRESETS, preset_for
from app.settings.schema import AppSettings, BudgetMode, ConversationSettings, Method, Offload, Theme
from core.model_spec import spec_problem
from core.models.locations import models_dir
from core.offload.residency import PLANNED_CONTEXT

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
    """A model: "builtin", a Hugging Face repo id in the local cache, a .gguf file or a model folder. Browse
    offers both a file and a folder (one native dialog cannot pick either), starting in the models folder."""

    def __init__(self, value: str, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(value)
        self.edit.setAccessibleName(name)
        self.edit.setPlaceholderText("builtin, a .gguf file, a model folder or a Hugging Face repo id")
        browse = QToolButton()
        browse.setText("Browse…")
        browse.setAccessibleName(f"Browse for the {name.lower()}")
        browse.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(browse)
        menu.addAction("A model file (.gguf)…", lambda: self._browse(folder=False))
        menu.addAction("A model folder…", lambda: self._browse(folder=True))
        browse.setMenu(menu)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def start_folder(self) -> str:
        """Where Browse opens: beside the current model if it is on disk, else the models folder, else home."""
        current = Path(self.text()).expanduser() if self.text() else None
        for folder in ((current.parent if current is not None and current.exists() else None), models_dir()):
            if folder is not None and folder.is_dir():
                return str(folder)
        return str(Path.home())

    def file_dialog(self, folder: bool) -> QFileDialog:
        dialog = QFileDialog(self, f"{self.name}: pick a model {'folder' if folder else 'file'}", self.start_folder())
        if folder:
            dialog.setFileMode(QFileDialog.FileMode.Directory)
            dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        else:
            dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
            dialog.setNameFilters(["GGUF models (*.gguf)", "All files (*)"])
        return dialog

    def take(self, dialog: QFileDialog) -> None:
        chosen = dialog.selectedFiles()
        if chosen:
            self.edit.setText(chosen[0])

    def _browse(self, folder: bool) -> None:
        dialog = self.file_dialog(folder)
        if dialog.exec():
            self.take(dialog)

    def text(self) -> str:
        return self.edit.text().strip()


class AppSettingsDialog(QDialog):
    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setMinimumWidth(600)
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
        self.context_length = _spin("Context length in tokens", 0, 1_048_576, settings.context_length, 1024,
                                    special=f"Automatic ({PLANNED_CONTEXT:,} tokens)",
                                    tip="How much of the conversation the model keeps in mind. Its memory is set "
                                        "aside when the model loads: a longer context takes more, a shorter one "
                                        "leaves out older messages sooner")
        for label, widget in (("&Model:", self.target), ("&Draft model:", self.draft), ("&Offloading:", self.offload),
                              ("GPU &memory budget:", self.vram), ("&Context length:", self.context_length),
                              ("&Theme:", self.theme)):
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
        self.error = QLabel()
        self.error.setObjectName("fieldError")
        self.error.setWordWrap(True)
        self.error.setAccessibleName("Settings error")
        self.error.hide()
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.error)
        layout.addWidget(_buttons(self))

    def problems(self) -> list[str]:
        """What is wrong with the model fields (a path that does not exist is caught here, not at load)."""
        found = []
        for label, field, optional in (("Model", self.target, False), ("Draft model", self.draft, True)):
            if optional and not field.text():
                continue
            problem = spec_problem(field.text() or "builtin")
            if problem:
                found.append(f"{label}: {problem}.")
        return found

    def accept(self) -> None:
        problems = self.problems()
        if problems:
            self.error.setText(" ".join(problems) + " Pick it with Browse, or type builtin.")
            self.error.show()
            return
        self.error.hide()
        super().accept()

    def values(self) -> AppSettings:
        return dataclasses.replace(
            self.original,
            target=self.target.text() or "builtin",
            draft=self.draft.text(),
            offload=Offload(self.offload.currentData()),
            vram_budget_gb=float(self.vram.value()),
            context_length=int(self.context_length.value()),
            theme=Theme(self.theme.currentData()),
            **self.api_server.values(),
        )


METHOD_LABELS = {
    Method.AUTO: "Automatic (SpecExec with a draft)", Method.SPECEXEC: "SpecExec", Method.SPECINFER: "SpecInfer",
    Method.SEQUENTIAL: "Plain decoding (no draft)",
}


def _spin(name: str, low: float, high: float, value: float, step: float = 1.0, decimals: int = 0,
          special: str = "", tip: str = ""):
    spin = QDoubleSpinBox() if decimals else QSpinBox()
    spin.setAccessibleName(name)
    spin.setRange(low, high)
    spin.setSingleStep(step)
    if decimals:
        spin.setDecimals(decimals)
    if special:
        spin.setSpecialValueText(special)  # shown at the minimum
    spin.setValue(value)
    spin.setToolTip(tip)
    return spin


class ConversationSettingsDialog(QDialog):
    """One conversation's settings: a system prompt (from a preset or typed), temperature, top-p, answer
    length; under Advanced: top-k, repetition penalty, seed, method and tree budget."""

    def __init__(self, settings: ConversationSettings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Conversation settings")
        self.setMinimumWidth(520)
        form = QFormLayout()
        self.preset = QComboBox()
        self.preset.setAccessibleName("System prompt preset")
        self.preset.addItems(list(SYSTEM_PRESETS))
        self.preset.addItem("Custom")
        self.preset.setCurrentText(preset_for(settings.system_prompt) or "Custom")
        self.preset.activated.connect(self._preset_chosen)
        self.system_prompt = QPlainTextEdit(settings.system_prompt)
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText("For example: You are a helpful assistant. Answer briefly.")
        self.system_prompt.setTabChangesFocus(True)
        self.system_prompt.setMaximumHeight(110)
        self.system_prompt.textChanged.connect(
            lambda: self.preset.setCurrentText(preset_for(self.system_prompt.toPlainText()) or "Custom"))
        self.temperature = _spin("Temperature", 0.0, 2.0, settings.temperature, 0.05, 2,
                                 tip="0 = always the most likely word; higher = more varied")
        self.top_p = _spin("Top-p", 0.01, 1.0, settings.top_p, 0.05, 2,
                           tip="Sample only from the most likely words that together have this probability")
        self.max_tokens = _spin("Maximum answer length in tokens", 1, 32768, settings.max_tokens)
        for label, widget in (("Pre&set:", self.preset), ("&System prompt:", self.system_prompt),
                              ("T&emperature:", self.temperature), ("Top-&p:", self.top_p),
                              ("Max &tokens:", self.max_tokens)):
            form.addRow(label, widget)
            buddy = form.labelForField(widget)
            if isinstance(buddy, QLabel):
                buddy.setBuddy(widget)

        self.advanced = QGroupBox("Advanced")
        self.advanced.setCheckable(True)
        self.advanced.setChecked(False)
        self.advanced.setAccessibleName("Advanced settings")
        advanced = QFormLayout(self.advanced)
        self.top_k = _spin("Top-k", 0, 1000, settings.top_k, special="Off",
                           tip="Sample only from the k most likely words (Off: no limit)")
        self.repetition_penalty = _spin("Repetition penalty", 1.0, 2.0, settings.repetition_penalty, 0.05, 2,
                                        special="Off", tip="Above 1 makes repeating earlier words less likely")
        self.seed = _spin("Seed", -1, 2**31 - 1, settings.seed, special="Random",
                          tip="A fixed seed gives the same answer again, with or without speculation")
        self.method = _combo(METHOD_LABELS, settings.method, "Decoding method")
        self.auto_budget = QCheckBox("Automatic")
        self.auto_budget.setAccessibleName("Automatic tree budget")
        self.auto_budget.setChecked(settings.budget_mode == BudgetMode.AUTO)
        self.budget = _spin("Tree budget", 1, 4096, settings.budget,
                            tip="Draft tokens the big model checks per pass")
        self.budget.setEnabled(not self.auto_budget.isChecked())
        self.auto_budget.toggled.connect(lambda on: self.budget.setEnabled(not on))
        budget_row = QWidget()
        row = QHBoxLayout(budget_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.auto_budget)
        row.addWidget(self.budget, 1)
        for label, widget in (("Top-&k:", self.top_k), ("&Repetition penalty:", self.repetition_penalty),
                              ("See&d:", self.seed), ("&Method:", self.method), ("Tree &budget:", budget_row)):
            advanced.addRow(label, widget)
            buddy = advanced.labelForField(widget)
            if isinstance(buddy, QLabel):
                buddy.setBuddy(self.auto_budget if widget is budget_row else widget)
        self._advanced_fields = [self.top_k, self.repetition_penalty, self.seed, self.method, budget_row]
        self.advanced.toggled.connect(self._show_advanced)
        self._show_advanced(False)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.advanced)
        layout.addWidget(_buttons(self))

    def _show_advanced(self, shown: bool) -> None:
        layout = self.advanced.layout()
        for widget in self._advanced_fields:
            widget.setVisible(shown)
            label = layout.labelForField(widget)
            if label is not None:
                label.setVisible(shown)

    def _preset_chosen(self, index: int) -> None:
        name = self.preset.itemText(index)
        if name in SYSTEM_PRESETS:
            self.system_prompt.setPlainText(SYSTEM_PRESETS[name])

    def values(self) -> ConversationSettings:
        return ConversationSettings(
            system_prompt=self.system_prompt.toPlainText(),
            temperature=float(self.temperature.value()),
            top_p=float(self.top_p.value()),
            max_tokens=int(self.max_tokens.value()),
            budget_mode=BudgetMode.AUTO if self.auto_budget.isChecked() else BudgetMode.MANUAL,
            budget=int(self.budget.value()),
            top_k=int(self.top_k.value()),
            repetition_penalty=float(self.repetition_penalty.value()),
            seed=int(self.seed.value()),
            method=Method(self.method.currentData()),
        ).validated()
