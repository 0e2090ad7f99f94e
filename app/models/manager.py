"""The model manager: the installed pairs (size on disk, where they are), switching the active pair, deleting
with confirmation, importing a model folder or a .gguf file, and the catalog for adding more.

Every choice is checked before it is saved (app.models.choice), so a missing or broken folder is reported
here, not after a failed load. Scans, imports and fit predictions run off the GUI thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMessageBox,
    QPushButton, QTabWidget, QVBoxLayout, QWidget,
)

from app.system.background import BackgroundCall
from app.models.choice import choose, imported_models, installed_pairs, pair_paths
from app.settings.schema import AppSettings
from app.models.wizard.pair_list import CARD_STYLE, PairList
from app.models.wizard.words import size_words
from core.errors import SpecExecError
from core.models.catalog import BUILTIN_PAIR_ID, Catalog, load_catalog
from core.models.installed import folder_bytes, pair_folders


@dataclass(frozen=True)
class InstalledEntry:
    """A row of the Installed tab: a catalog pair, or one imported model (used without a draft)."""

    key: str  # a pair id, or "model:<folder name>"
    name: str
    target: str
    draft: str
    size_bytes: int | None  # None: ships with the app
    location: str
    paths: tuple[Path, ...]  # what Delete removes


def installed_entries(catalog: Catalog, root: Path) -> list[InstalledEntry]:
    """Blocking (it sums file sizes): everything the user can switch to."""
    entries = []
    for pair_id in installed_pairs(catalog, root):
        pair = catalog.pair(pair_id)
        target, draft = pair_paths(catalog, pair_id, root)
        if pair_id == BUILTIN_PAIR_ID:
            entries.append(InstalledEntry(pair_id, pair.name, target, draft, None, "ships with the app", ()))
            continue
        folders = tuple(root / folder for folder in pair_folders(catalog, pair_id))
        entries.append(InstalledEntry(pair_id, pair.name, target, draft, sum(map(folder_bytes, folders)),
                                      str(root), folders))
    for model in imported_models(catalog, root):
        ggufs = sorted(model.path.glob("*.gguf"))
        target = str(ggufs[0]) if len(ggufs) == 1 and not (model.path / "config.json").exists() else str(model.path)
        where = f"{model.path.resolve()} (linked)" if model.linked else str(model.path)
        entries.append(InstalledEntry(f"model:{model.name}", f"{model.name} (imported, no draft model)", target, "",
                                      model.done_bytes, where, (model.path,)))
    return entries


class ModelFileDialog(QFileDialog):
    """Opens in the user's home and accepts both a model folder and a .gguf file: pressing Open on a folder
    that holds a model takes it, instead of going into it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, "Import a model folder or a .gguf file", str(Path.home()),
                         "Models (*.gguf config.json);;All files (*)")
        self.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        self.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.setLabelText(QFileDialog.DialogLabel.Accept, "Import")
        self.chosen: Path | None = None

    def accept(self) -> None:
        selected = [Path(path) for path in self.selectedFiles()]
        if selected and selected[0].is_dir() and (
                (selected[0] / "config.json").exists() or any(selected[0].glob("*.gguf"))):
            self.chosen = selected[0]
            QDialog.accept(self)
            return
        if selected and selected[0].name == "config.json":  # picked the folder's config.json: the folder is meant
            self.chosen = selected[0].parent
            QDialog.accept(self)
            return
        super().accept()
        if self.result() == QDialog.DialogCode.Accepted and self.selectedFiles():
            self.chosen = Path(self.selectedFiles()[0])


class ModelManager(QDialog):
    """Emits `switched` with the new settings after the user picked another pair and it passed the checks."""

    switched = Signal(object)  # AppSettings
    download_requested = Signal(str)  # a catalog pair id: the app opens the wizard on its download

    def __init__(self, settings: AppSettings, models_dir: Path, catalog: Catalog | None = None,
                 confirm: Callable[[str, str], bool] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.models_dir = models_dir
        self.catalog = catalog or load_catalog()
        self.confirm = confirm or self._ask
        self.entries: list[InstalledEntry] = []
        self._calls: list[BackgroundCall] = []
        self.setWindowTitle("Models")
        self.resize(760, 560)
        layout = QVBoxLayout(self)
        self.tabs = QTabWidget()
        layout.addWidget(self.tabs, 1)
        self.message = QLabel()
        self.message.setObjectName("managerMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.message)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        layout.addWidget(close)
        self._build_installed()
        self._build_catalog()
        self.refresh()

    # -- installed tab -------------------------------------------------------------------------------------

    def _build_installed(self) -> None:
        page = QWidget()
        column = QVBoxLayout(page)
        self.installed = QListWidget()
        self.installed.setAccessibleName("Installed models")
        self.installed.setSpacing(2)
        self.installed.setStyleSheet(CARD_STYLE)
        self.installed.currentRowChanged.connect(lambda _row: self._update_buttons())
        row = QHBoxLayout()
        self.use_button = QPushButton("Use this model")
        self.delete_button = QPushButton("Delete…")
        self.import_button = QPushButton("Import a folder or .gguf file…")
        row.addWidget(self.use_button)
        row.addWidget(self.delete_button)
        row.addStretch()
        row.addWidget(self.import_button)
        self.use_button.clicked.connect(self.use_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        self.import_button.clicked.connect(self.import_dialog)
        column.addWidget(QLabel(f"Models are kept in {self.models_dir}"))
        column.addWidget(self.installed, 1)
        column.addLayout(row)
        self.tabs.addTab(page, "Installed")

    def refresh(self) -> None:
        call = BackgroundCall(lambda: installed_entries(self.catalog, self.models_dir), self)
        call.done.connect(self._show_entries)
        call.failed.connect(lambda text: self.message.setText(f"Could not read the models folder: {text}"))
        self._calls.append(call.start())

    def _show_entries(self, entries: list[InstalledEntry]) -> None:
        self.entries = entries
        self.installed.clear()
        active_row = 0
        for row, entry in enumerate(entries):
            active = entry.target == self.settings.target and entry.draft == self.settings.draft
            active_row = row if active else active_row
            size = "built in" if entry.size_bytes is None else size_words(entry.size_bytes)
            badge = " &nbsp;<span style='background:#2e9d4f;color:white'>&nbsp;In use&nbsp;</span>" if active else ""
            card = QLabel(f"<b>{entry.name}</b>{badge}<br><span style='color:#6b7280'>{size} · {entry.location}</span>")
            card.setContentsMargins(10, 6, 10, 6)
            card.setToolTip(f"target: {entry.target}\ndraft: {entry.draft or 'none'}")
            item = QListWidgetItem()
            item.setSizeHint(card.sizeHint() + QSize(0, 6))  # room for the outline; descenders are not clipped
            self.installed.addItem(item)
            self.installed.setItemWidget(item, card)
        self.installed.setCurrentRow(active_row if entries else -1)
        self._update_buttons()

    def selected_entry(self) -> InstalledEntry | None:
        row = self.installed.currentRow()
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def select(self, key: str) -> None:
        self.installed.setCurrentRow(next(i for i, entry in enumerate(self.entries) if entry.key == key))

    def _update_buttons(self) -> None:
        entry = self.selected_entry()
        self.use_button.setEnabled(entry is not None)
        self.delete_button.setEnabled(entry is not None and bool(entry.paths))

    def use_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        pair_id = entry.key if not entry.key.startswith("model:") else ""
        try:
            settings = choose(self.settings, entry.target, entry.draft, pair_id)
        except SpecExecError as error:  # checked before it is saved: nothing changes
            self.message.setText(f"<b>{entry.name} cannot be used:</b> {error}")
            return
        self.settings = settings
        self.message.setText(f"Switching to {entry.name}: the engine is loading it.")
        self._show_entries(self.entries)
        self.switched.emit(settings)

    def delete_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None or not entry.paths:
            return
        if entry.target == self.settings.target:
            self.message.setText(f"{entry.name} is in use: switch to another model before deleting it.")
            return
        size = "" if entry.size_bytes is None else f" ({size_words(entry.size_bytes)})"
        if not self.confirm("Delete model", f"Delete {entry.name}{size} from this computer? "
                                            "You would have to download or import it again."):
            return
        from core.models.installed import delete_model

        for path in entry.paths:
            delete_model(path)
        self.message.setText(f"Deleted {entry.name}.")
        self.refresh()

    def import_dialog(self) -> None:
        dialog = ModelFileDialog(self)
        if dialog.exec() and dialog.chosen is not None:
            self.import_path(dialog.chosen)

    def import_path(self, source: Path) -> None:
        """Check and copy `source` into the models folder off the GUI thread; a bad one is refused here."""
        from core.models.importing import import_model

        self.message.setText(f"Importing {source}…")
        call = BackgroundCall(lambda: import_model(source, self.models_dir), self)
        call.done.connect(lambda path: (self.message.setText(f"Imported {Path(path).name}."), self.refresh()))
        call.failed.connect(lambda text: self.message.setText(f"<b>Not imported:</b> {text}"))
        self._calls.append(call.start())

    # -- catalog tab ---------------------------------------------------------------------------------------

    def _build_catalog(self) -> None:
        page = QWidget()
        column = QVBoxLayout(page)
        self.catalog_list = PairList()
        self.catalog_status = QLabel("Checking which models fit this computer…")
        self.download_button = QPushButton("Download…")
        self.download_button.clicked.connect(self._download)
        row = QHBoxLayout()
        row.addWidget(self.catalog_status, 1)
        row.addWidget(self.download_button)
        column.addWidget(self.catalog_list, 1)
        column.addLayout(row)
        self.tabs.addTab(page, "Get more models")
        from app.models.wizard.state import WizardState

        self._catalog_state = WizardState(self.settings, self.models_dir, self.catalog)
        call = BackgroundCall(self._catalog_state.probe, self)
        call.done.connect(self._show_catalog)
        call.failed.connect(lambda text: self.catalog_status.setText(f"Could not check this computer: {text}"))
        self._calls.append(call.start())

    def _show_catalog(self, prediction) -> None:
        state = self._catalog_state
        state.apply(prediction)
        self.catalog_list.show_recommendation(state.recommendation, state.installed)
        self.catalog_status.setText("Pick a model and press Download; the set-up wizard takes it from there.")

    def _download(self) -> None:
        fit = self.catalog_list.current_fit()
        if fit is None:
            return
        if fit.fit == "no" and not self.confirm(
                "Download anyway?", f"{fit.pair.name} will probably not run on this computer: {fit.reason}. "
                                    "Download it anyway?"):
            return
        self.download_requested.emit(fit.pair.id)

    def _ask(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(self, title, text)
        return answer == QMessageBox.StandardButton.Yes




def model_pair_name(settings: AppSettings) -> str:
    """The pair in use as a person calls it: the catalog's name, else the target folder's name."""
    if settings.active_pair:
        try:
            return load_catalog().pair(settings.active_pair).name
        except SpecExecError:
            pass
    if settings.target in ("builtin", ""):
        return "SmolLM2 135M (built in)"
    return Path(settings.target).name
