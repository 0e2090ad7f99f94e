"""Settings, as a page in the window (as Jan and LM Studio show theirs), not a modal dialog: the model and its
draft, memory (offloading and GPU memory where there is an NVIDIA GPU; how much of a chat the model keeps in
mind), the theme, the local API server, and the MCP servers whose tools the model may call. Save applies them (reloading the model if it changed), Cancel
leaves them as they were; a path that does not exist is refused here, not when the engine fails to load it.

Every setting says in words what it does, the built-in models are called by their names rather than their
ids, and what cannot apply here (GPU memory on a computer without an NVIDIA GPU) is not shown.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.api.settings_row import ApiServerSettingsRow
from app.settings.fields import ChoiceField, Field, SliderField, help_line, scrolled_body
from app.settings.schema import CONTEXT_LENGTHS, DEFAULT_TEXT_SIZE, TEXT_SIZES, AppSettings, Offload, Theme
from app.settings.tool_servers_section import ToolServersSection
from app.models.choice import moved_into
from app.system.model_chooser import chosen_path, model_chooser
from app.system.models_folder import folder_problem, set_outside
from app.theme.icons import themed
from app.theme.tokens import SPACE
from app.window.buttons import LINK, PRIMARY, SECONDARY, button, footer
from app.window.labels import Label
from core.models.model_spec import BUILTIN, BUILTIN_DRAFT, spec_problem
from core.system.file_names import unquoted
from core.system.locations import default_models_dir, models_dir
from core.planning.residency import PLANNED_CONTEXT

# The built-in models as people read them; the ids stay what is saved and typed.
BUILTIN_NAMES = {BUILTIN: "SmolLM2 135M (built-in)", BUILTIN_DRAFT: "SmolLM2 135M, 4-bit (built-in draft)"}
OFFLOAD_CHOICES = (
    ("Automatic", Offload.AUTO),
    ("Always (stream the weights from RAM)", Offload.ON),
    ("Never (everything in GPU memory)", Offload.OFF),
)
THEME_CHOICES = (("Follow the system", Theme.SYSTEM), ("Light", Theme.LIGHT), ("Dark", Theme.DARK))
TEXT_SIZE_CHOICES = tuple(
    (f"{size}%" + (" (the system's size)" if size == DEFAULT_TEXT_SIZE else ""), size) for size in TEXT_SIZES
)
PAGE_WIDTH_PX = 720


def has_nvidia_gpu() -> bool:
    """Whether NVML finds an NVIDIA GPU (no torch; quick, and False wherever the driver is missing)."""
    from core.hardware.nvidia import read_nvidia_gpus

    try:
        return bool(read_nvidia_gpus()[0])
    except Exception:  # noqa: BLE001 - any NVML failure means: no usable GPU here
        return False


def context_choices(current: int) -> list[tuple[str, int]]:
    lengths = sorted(set(CONTEXT_LENGTHS) | ({current} if current > 0 else set()))
    return [(f"Automatic ({PLANNED_CONTEXT:,} tokens, or the model's limit)", 0)] + [
        (f"{length:,} tokens", length) for length in lengths
    ]


class PathField(QWidget):
    """A path typed in a line (`edit`, named `name` for screen readers), beside a Browse… button (`browse`)
    that a subclass gives its chooser."""

    def __init__(self, value: str, name: str, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(value)
        self.edit.setAccessibleName(name)
        self.edit.setPlaceholderText(placeholder)
        self.browse = QToolButton()
        self.browse.setObjectName("fieldButton")
        self.browse.setText("Browse…")
        self.browse.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        themed(self.browse, "folder-open", size=16)
        self.browse.setAccessibleName(f"Browse for the {name.lower()}")
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.browse)


class ModelField(PathField):
    """A model: the built-in one (shown by its name), a Hugging Face repo id in the local cache, a .gguf file or
    a model folder. Browse offers both a file and a folder (one chooser cannot pick either), starting in the
    models folder; the system's own file chooser where the desktop has one."""

    def __init__(self, value: str, name: str, parent: QWidget | None = None) -> None:
        super().__init__(
            BUILTIN_NAMES.get(value, value), name, "A .gguf file, a model folder or a Hugging Face repo id", parent
        )
        self.browse.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.browse)
        menu.addAction("A model file (.gguf)…", lambda: self._browse(folder=False))
        menu.addAction("A model folder…", lambda: self._browse(folder=True))
        self.browse.setMenu(menu)

    def start_folder(self) -> Path:
        """Where Browse opens: beside the current model if it is on disk, else the models folder."""
        current = Path(self.text()).expanduser() if self.text() else None
        return current.parent if current is not None and current.exists() else models_dir()

    def file_dialog(self, folder: bool) -> QFileDialog:
        return model_chooser(
            self, f"{self.name}: pick a model {'folder' if folder else 'file'}", self.start_folder(), folder
        )

    def take(self, dialog: QFileDialog) -> None:
        chosen = chosen_path(dialog)
        if chosen is not None:
            self.edit.setText(str(chosen))

    def _browse(self, folder: bool) -> None:
        dialog = self.file_dialog(folder)
        if dialog.exec():
            self.take(dialog)

    def text(self) -> str:
        """What is saved: a built-in model's id for its name, else the path or repo id as typed (`unquoted`),
        and a model folder for its config.json."""
        typed = unquoted(self.edit.text())
        if Path(typed).name == "config.json" and Path(typed).expanduser().is_file():
            typed = str(Path(typed).parent)
        return next((spec for spec, name in BUILTIN_NAMES.items() if typed == name), typed)


class FolderField(PathField):
    """A folder: typed, or picked with Browse (the system's own chooser where the desktop has one); empty
    shows `placeholder`, the folder used when none is set."""

    def __init__(self, value: str, name: str, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(value, name, placeholder, parent)
        self.browse.clicked.connect(self._browse)

    def file_dialog(self) -> QFileDialog:
        start = Path(self.text() or self.edit.placeholderText()).expanduser()
        return model_chooser(self, f"{self.name}: pick a folder", start, folder=True)

    def _browse(self) -> None:
        dialog = self.file_dialog()
        if dialog.exec():
            chosen = chosen_path(dialog)
            if chosen is not None:
                self.edit.setText(str(chosen))

    def text(self) -> str:
        """The folder as typed (`unquoted`)."""
        return unquoted(self.edit.text())


def section(title: str) -> QLabel:
    label = Label(title)
    label.setObjectName("sectionTitle")
    return label


class SettingsPage(QFrame):
    """`saved` carries the new settings after Save (checked first); `cancelled` leaves them as they were."""

    saved = Signal(object)  # AppSettings
    cancelled = Signal()
    theme_previewed = Signal(object)  # Theme: shown at once, kept by Save, undone by Cancel
    models_requested = Signal()  # "Model manager" in the Model section

    def __init__(
        self,
        settings: AppSettings,
        parent: QWidget | None = None,
        has_gpu: bool | None = None,
        tools: ToolServersSection | None = None,
        model_context: int = 0,
    ) -> None:
        """`model_context`: how many tokens the models in use keep at most (StatusReport.models), said under
        Context length; 0 where that is not known (no model loaded, a server)."""
        super().__init__(parent)
        self.setObjectName("settingsPage")
        self.setAccessibleName("Settings")
        self.original = settings
        self.has_gpu = has_nvidia_gpu() if has_gpu is None else has_gpu
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        scroll, body = scrolled_body("pageScroll", "pageBody")
        centre = QHBoxLayout(body)
        centre.setContentsMargins(SPACE.xl, SPACE.xl, SPACE.xl, SPACE.xl)
        page = QWidget()
        page.setMaximumWidth(PAGE_WIDTH_PX)
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(SPACE.l)
        centre.addStretch(1)
        centre.addWidget(page, 100)
        centre.addStretch(1)
        outer.addWidget(scroll, 1)

        title = Label("Settings")
        title.setObjectName("pageTitle")
        column.addWidget(title)

        column.addWidget(section("Model"))
        self.target = ModelField(settings.target, "Model")
        self.draft = ModelField(settings.draft, "Draft model")
        for name, field, words in (
            ("&Model", self.target, "The model that writes the answers."),
            (
                "&Draft model",
                self.draft,
                "A small model that guesses ahead so answers come faster (optional: leave it empty for none).",
            ),
        ):
            row = Field(name, field, words)
            row.name_label.setBuddy(field.edit)
            column.addWidget(row)
        outside = set_outside()
        self.models_folder = FolderField(
            outside or settings.models_folder, "Models folder", str(default_models_dir()) if outside is None else ""
        )
        self.models_folder.setEnabled(outside is None)
        folder_row = Field(
            "Models &folder",
            self.models_folder,
            "Where downloaded models are kept: another drive if this one is too full. Models already downloaded "
            "stay where they are; move their folders into the new one (with the app closed) to keep them listed."
            if outside is None
            else "Set for this app by SPECEXEC_MODELS_DIR when it was started, so it cannot be changed here.",
        )
        folder_row.name_label.setBuddy(self.models_folder.edit)
        column.addWidget(folder_row)
        manager = button("Open the Models page", LINK, "Installed models, downloads and servers on other computers")
        manager.clicked.connect(self.models_requested)
        column.addWidget(manager, 0, Qt.AlignmentFlag.AlignLeft)

        column.addWidget(section("Memory"))
        self.offload = ChoiceField(
            "&Offloading",
            OFFLOAD_CHOICES,
            settings.offload,
            "Keep what does not fit on the graphics card in RAM, and stream it in.",
        )
        self.vram = SliderField(
            "GPU &memory",
            0,
            max(80.0, settings.vram_budget_gb),
            settings.vram_budget_gb,
            scale=2,
            step=0.5,
            words=lambda gb: "Automatic" if gb == 0 else f"{gb:.1f} GiB",
            help_text="How much of the graphics card's memory the models may use.",
        )
        self.context_length = ChoiceField(
            "&Context length",
            context_choices(settings.context_length),
            settings.context_length,
            "How much of a chat the model keeps in mind. Its memory is set aside when "
            "the model loads: longer takes more, shorter forgets older messages sooner. "
            "A model that keeps less keeps all it can"
            + (f" (the one in use keeps up to {model_context:,})." if model_context else "."),
        )
        for field in (self.offload, self.vram, self.context_length):
            column.addWidget(field)
        for field in (self.offload, self.vram):
            field.setVisible(self.has_gpu)  # no NVIDIA GPU here: the models run in the computer's memory

        column.addWidget(section("Appearance"))
        self.theme = ChoiceField("&Theme", THEME_CHOICES, settings.theme)
        column.addWidget(self.theme)
        self.text_size = ChoiceField(
            "Te&xt size",
            TEXT_SIZE_CHOICES,
            settings.text_percent(),
            "How large the words are, everywhere in the app. Ctrl+= and Ctrl+- change it from anywhere, Ctrl+0 "
            "puts it back.",
        )
        column.addWidget(self.text_size)

        column.addWidget(section("Local API server"))
        self.api_server = ApiServerSettingsRow(settings)
        column.addWidget(self.api_server)
        column.addWidget(
            help_line(
                "Other programs on this computer (editors, coding agents, other chat apps) can use "
                "the model through the OpenAI API; their requests wait in line with your chats."
            )
        )
        self.tools = tools
        if tools is not None:
            column.addWidget(section("Tools (MCP servers)"))
            column.addWidget(tools)
        column.addStretch(1)

        self.error = Label()
        self.error.setObjectName("fieldError")
        self.error.setWordWrap(True)
        self.error.setAccessibleName("Settings error")
        self.error.hide()
        self.cancel_button = button("Cancel", SECONDARY)
        self.save_button = button("Save", PRIMARY)
        self.cancel_button.clicked.connect(self.cancelled)
        self.save_button.clicked.connect(self.accept)
        self.save_button.setToolTip("Save (Ctrl+S or Enter)")
        save = QShortcut(QKeySequence.StandardKey.Save, self, self.accept)
        save.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.theme.changed.connect(lambda: self.theme_previewed.emit(Theme(self.theme.value())))
        bar = QFrame()
        bar.setObjectName("pageFooter")
        bar_column = QVBoxLayout(bar)
        bar_column.setContentsMargins(SPACE.xl, SPACE.m, SPACE.xl, SPACE.m)
        bar_column.addWidget(self.error)
        bar_column.addWidget(footer(bar, self.cancel_button, self.save_button))
        outer.addWidget(bar)

    def models_root(self) -> Path:
        """The models folder these settings would keep models in (the field shows one set from outside too)."""
        text = self.models_folder.text()
        return Path(text).expanduser() if text else default_models_dir()

    def model_spec(self, field: ModelField) -> str:
        """A model field's value, found again in the models folder when its folder was moved there."""
        return moved_into(field.text(), self.models_root())

    def problems(self) -> list[str]:
        """What is wrong with the model fields (a path that does not exist is caught here, not at load)."""
        found = []
        for label, field, optional in (("Model", self.target, False), ("Draft model", self.draft, True)):
            if optional and not field.text():
                continue
            problem = spec_problem(self.model_spec(field) or "builtin")
            if problem:
                found.append(f"{label}: {problem}.")
        if self.models_folder.isEnabled() and self.models_folder.text() != self.original.models_folder:
            problem = folder_problem(self.models_folder.text())
            if problem:
                found.append(f"Models folder: {problem}.")
        return found

    def accept(self) -> bool:
        """Save, if the models can be found; else say why and keep the page open."""
        problems = self.problems()
        if problems:
            self.error.setText(" ".join(problems) + " Pick it with Browse, or choose a model in the model manager.")
            self.error.show()
            return False
        self.error.hide()
        if self.tools is not None:
            try:
                self.tools.apply()
            except OSError as error:
                self.error.setText(f"The MCP servers could not be saved: {error}")
                self.error.show()
                return False
        self.saved.emit(self.values())
        return True

    def keyPressEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        """Esc cancels; Enter (outside a button, which Enter presses) saves, as Ctrl+S does."""
        if event.key() == Qt.Key.Key_Escape:
            self.cancelled.emit()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            focus = QApplication.focusWidget()
            if isinstance(focus, QAbstractButton):  # Enter on Cancel cancels
                focus.click()
            else:
                self.accept()
            return
        super().keyPressEvent(event)

    def values(self) -> AppSettings:
        return dataclasses.replace(
            self.original,
            target=self.model_spec(self.target) or "builtin",
            draft=self.model_spec(self.draft),
            offload=Offload(self.offload.value()),
            vram_budget_gb=float(self.vram.value()),
            context_length=int(self.context_length.value()),
            theme=Theme(self.theme.value()),
            text_size=int(self.text_size.value()),
            models_folder=self.models_folder.text() if self.models_folder.isEnabled() else self.original.models_folder,
            **self.api_server.values(),
        )
