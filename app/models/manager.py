"""The model manager, a page of the main window (as LM Studio's and Jan's Models pages; the sidebar's *Models*
opens it, Back or Esc returns to the chat): the installed pairs (size on disk, where they are), switching the active pair, deleting
with confirmation, importing a model folder or a .gguf file, the catalog for adding more, and the
connections: this computer or a server on another one (app.models.connections).

Every choice is checked before it is saved (app.models.choice), so a missing or broken folder is reported
here, not after a failed load. Scans, imports and fit predictions run off the GUI thread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QMenu,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.models.connections import ConnectionsPage
from app.models.choice import choose, imported_models, installed_pairs, pair_paths
from app.models.wizard.pair_list import Card, CardList, PairList, badge, label
from app.models.format_words import catalog_format, folder_format
from app.models.wizard.words import size_words
from app.engine.bridge import CRASHED, FAILED, READY, EngineStatus
from app.engine.connections import source_words
from app.settings.schema import AppSettings
from app.system.background import BackgroundCall
from app.system.model_chooser import chosen_path, model_chooser
from app.window.buttons import LINK, PRIMARY, SECONDARY, button
from app.window.segmented import SegmentedPages
from app.theme.tokens import SPACE
from app.theme.icons import themed
from app.window.confirm import confirm_destructive
from app.window.labels import Label, plain_tip
from core.errors import SpecExecError
from core.models.catalog import BUILTIN_PAIR_ID, Catalog, load_catalog
from core.models.installed import folder_bytes, pair_folders


DESTRUCTIVE_VERBS = ("Delete", "Remove")


@dataclass(frozen=True)
class InstalledEntry:
    """A row of My models: a catalog pair, or one imported model (used without a draft)."""

    key: str  # a pair id, or "model:<folder name>"
    name: str
    target: str
    draft: str
    size_bytes: int | None  # None: ships with the app
    location: str
    paths: tuple[Path, ...]  # what Delete removes
    weights: str = ""  # how the big model's weights are stored, in words ("4-bit GPTQ", "16-bit")


def installed_entries(catalog: Catalog, root: Path) -> list[InstalledEntry]:
    """Blocking (it sums file sizes): everything the user can switch to."""
    entries = []
    for pair_id in installed_pairs(catalog, root):
        pair = catalog.pair(pair_id)
        target, draft = pair_paths(catalog, pair_id, root)
        weights = catalog_format(pair.target.quantization)
        if pair_id == BUILTIN_PAIR_ID:
            entries.append(InstalledEntry(pair_id, pair.name, target, draft, None, "ships with the app", (), weights))
            continue
        folders = tuple(root / folder for folder in pair_folders(catalog, pair_id))
        size = sum(map(folder_bytes, folders))
        entries.append(InstalledEntry(pair_id, pair.name, target, draft, size, str(root), folders, weights))
    for model in imported_models(catalog, root):
        ggufs = sorted(model.path.glob("*.gguf"))
        target = str(ggufs[0]) if len(ggufs) == 1 and not (model.path / "config.json").exists() else str(model.path)
        where = f"{model.path.resolve()} (linked)" if model.linked else str(model.path)
        entries.append(
            InstalledEntry(
                f"model:{model.name}",
                model.name,  # the card says it was added by you and runs without a helper model
                target,
                "",
                model.done_bytes,
                where,
                (model.path,),
                folder_format(Path(target)),
            )
        )
    return entries


def card_line(entry: InstalledEntry) -> str:
    """A card's line under the name: the format first, then the size, then what the draft model means to a
    person: a helper that makes answers faster, or none (an imported model, added by you: slower)."""
    size = "ships with the app" if entry.size_bytes is None else size_words(entry.size_bytes)
    helper = (
        "with a helper model for speed"
        if entry.draft
        else "added by you · runs without a helper model, slower"
        if entry.key.startswith("model:")
        else "runs without a helper model, slower"
    )
    return " · ".join(part for part in (entry.weights, size, helper) if part)


class ModelManager(QFrame):
    """Emits `switched` with the new settings after the user picked another pair and it passed the checks;
    `back_requested` when Back or Esc asks for the chat again (the window removes the page)."""

    switched = Signal(object)  # AppSettings
    download_requested = Signal(str)  # a catalog pair id: the app opens the wizard on its download
    endpoints_changed = Signal(object)  # AppSettings with a server added or removed (saved, nothing reloads)
    back_requested = Signal()

    def __init__(
        self,
        settings: AppSettings,
        models_dir: Path,
        catalog: Catalog | None = None,
        confirm: Callable[[str, str, str], bool] | None = None,
        own_api_url: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.models_dir = models_dir
        self.catalog = catalog or load_catalog()
        self.confirm = confirm or self._ask
        self.entries: list[InstalledEntry] = []
        self.switching: str | None = None  # what a switch started here is loading, until the engine says
        self._calls: list[BackgroundCall] = []
        self.setObjectName("modelManager")
        self.setAccessibleName("Models")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.xl, SPACE.l, SPACE.xl, SPACE.l)
        layout.setSpacing(SPACE.m)
        self.back_button = button("Back to chat", LINK, "Back to the chat (Esc)")
        themed(self.back_button, "chevron-left", "link", size=16)
        title = Label("Models")
        title.setObjectName("pageTitle")
        layout.addWidget(self.back_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(title)
        self.sections = SegmentedPages("Models sections")
        layout.addWidget(self.sections, 1)
        self.message = Label()
        self.message.setObjectName("managerMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # a long path or error wraps in the width there is: it never widens the page nor moves its buttons
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        layout.addWidget(self.message)
        self.back_button.clicked.connect(self.back_requested)
        self._build_installed()
        self._build_catalog()
        self.connections = ConnectionsPage(
            settings, model_pair_name(settings), self.message.setText, self.confirm, own_api_url
        )
        self.connections.use_requested.connect(self._use_connection)
        self.connections.endpoints_changed.connect(self._endpoints_changed)
        self.sections.add_page(self.connections, "Connections")
        self.refresh()

    def show_connections(self) -> "ModelManager":
        self.sections.setCurrentWidget(self.connections)
        return self

    def show_catalog(self) -> "ModelManager":
        """The Download section (the empty chat's "Get a bigger model" opens it)."""
        self.sections.setCurrentWidget(self.catalog_page)
        return self

    def focus_order(self) -> list[QWidget]:
        """The page's controls in the order Tab visits them: Back, the switch (Tab stops on its chosen segment;
        Left and Right move between segments, as between radio buttons), then the sections' controls (Tab skips
        those of the hidden sections). The window chains them after the sidebar."""
        sections = [self.sections.widget(index) for index in range(self.sections.count())]
        controls = [
            widget
            for section in sections
            for widget in section.findChildren(QWidget)
            if widget.focusPolicy() & Qt.FocusPolicy.TabFocus and widget.window() is self.window()  # not a menu
        ]
        return [self.back_button, *self.sections.buttons, *controls]

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt signature
        """Esc: back to the chat, as Back does. (While an answer is written the window's Esc action is on and
        takes the key first: MainWindow._escape closes the page the same way.)"""
        if event.key() == Qt.Key.Key_Escape:
            self.back_requested.emit()
            return
        super().keyPressEvent(event)

    def _use_connection(self, settings: AppSettings) -> None:
        self.settings = settings
        remote = settings.remote_endpoint()
        self.switching = source_words(settings) if remote is not None else "this computer"
        self._show_entries(self.entries)
        self.switched.emit(settings)

    def show_engine_status(self, status: EngineStatus) -> None:
        """A switch the manager started: once the engine has the new model (or failed to), say so instead of
        leaving "Switching to …" on screen."""
        if self.switching is None:
            return
        if status.state == READY:
            self.message.setText(f"Now using {self.switching}.")
        elif status.state in (FAILED, CRASHED):
            self.message.setText(f"{self.switching} could not be used: the message above the chat says why.")
        else:
            return
        self.switching = None
        self.connections.refresh()
        self._update_buttons()

    def _endpoints_changed(self, settings: AppSettings) -> None:
        self.settings = settings
        self.endpoints_changed.emit(settings)

    # -- my models -----------------------------------------------------------------------------------------

    def _build_installed(self) -> None:
        page = QWidget()
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 0, 0, 0)  # in line with the switch above it
        self.installed = CardList()
        self.installed.setAccessibleName("Installed models")
        self.installed.currentRowChanged.connect(lambda _row: self._update_buttons())
        row = QHBoxLayout()
        self.use_button = button("Use this model", PRIMARY)
        self.delete_button = button("Delete…", SECONDARY, "Delete the selected model from this computer")
        themed(self.delete_button, "trash-2", size=16)
        self.import_button = button(
            "Import…", SECONDARY, "Add a model you already have: a .gguf file or a model folder"
        )
        themed(self.import_button, "folder-open", size=16)
        import_menu = QMenu(self.import_button)
        import_menu.addAction("A .gguf file…", lambda: self.import_dialog(folder=False))
        import_menu.addAction("A model folder…", lambda: self.import_dialog(folder=True))
        self.import_button.setMenu(import_menu)
        row.addWidget(self.use_button)
        row.addWidget(self.delete_button)
        row.addStretch()
        row.addWidget(self.import_button)
        self.use_button.clicked.connect(self.use_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        column.addWidget(label("The models on this computer: pick one and press Use this model."))
        column.addWidget(self.installed, 1)
        # under the list: where, not what; and where that is changed (another drive with room)
        folder = label(f"Kept in {self.models_dir} · Settings > Models folder picks another", muted=True)
        folder.setObjectName("modelsFolder")
        folder.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(folder)
        column.addLayout(row)
        self.sections.add_page(page, "My models")

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
            active = self.is_active(entry)
            active_row = row if active else active_row
            card = Card(
                entry.name, [badge("In use", "success")] if active else [], [label(card_line(entry), muted=True)]
            )
            card.setToolTip(
                plain_tip(f"Model: {entry.target}\nDraft: {entry.draft or 'none'}\nKept in {entry.location}")
            )
            self.installed.add_card(card)
        self.installed.setCurrentRow(active_row if entries else -1)
        self._update_buttons()

    def selected_entry(self) -> InstalledEntry | None:
        row = self.installed.currentRow()
        return self.entries[row] if 0 <= row < len(self.entries) else None

    def select(self, key: str) -> None:
        self.installed.setCurrentRow(next(i for i, entry in enumerate(self.entries) if entry.key == key))

    def is_active(self, entry: InstalledEntry) -> bool:
        """In use: the pair the engine on this computer runs, while answers come from this computer."""
        return (
            not self.settings.connection and entry.target == self.settings.target and entry.draft == self.settings.draft
        )

    def _update_buttons(self) -> None:
        """Each button is enabled only when pressing it does something: not Use on the model in use, not
        Delete on the built-in pair or the model in use."""
        entry = self.selected_entry()
        active = entry is not None and self.is_active(entry)
        self.use_button.setEnabled(entry is not None and not active)
        self.use_button.setText("In use" if active else "Use this model")
        self.delete_button.setEnabled(entry is not None and bool(entry.paths) and not active)
        self.delete_button.setToolTip(
            "The model in use cannot be deleted: switch to another first"
            if active
            else ""
            if entry is None or entry.paths
            else "The built-in pair ships with the app"
        )

    def use_selected(self) -> None:
        entry = self.selected_entry()
        if entry is None or self.is_active(entry):
            return
        pair_id = entry.key if not entry.key.startswith("model:") else ""
        try:  # a pair on this computer: answers come from here again
            settings = dataclasses.replace(choose(self.settings, entry.target, entry.draft, pair_id), connection="")
        except SpecExecError as error:  # checked before it is saved: nothing changes
            self.message.setText(f"{entry.name} cannot be used: {error}")
            return
        self.settings = settings
        self.connections.settings = settings
        self.connections.refresh()
        self.message.setText(f"Switching to {entry.name}: the engine is loading it.")
        self.switching = entry.name
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
        if not self.confirm(
            "Delete this model?",
            f"{entry.name}{size} will be deleted from this computer. You would have to download or import it again.",
            "Delete model",
        ):
            return
        from core.errors import DownloadBusyError, ModelDeleteError
        from core.models.installed import delete_model

        try:
            for path in entry.paths:
                delete_model(path)
        except DownloadBusyError:
            self.message.setText(f"{entry.name} is still downloading: stop its download first, then delete it.")
        except ModelDeleteError as error:  # a read-only drive, a file another program holds open
            self.message.setText(f"{entry.name} was not deleted: {error}")
        else:
            self.message.setText(f"Deleted {entry.name}.")
        self.refresh()

    def import_chooser(self, folder: bool) -> QFileDialog:
        """The chooser for an import, in the models folder (made if it is not there yet)."""
        return model_chooser(
            self, "Import a model folder" if folder else "Import a .gguf model file", self.models_dir, folder
        )

    def import_dialog(self, folder: bool) -> None:
        dialog = self.import_chooser(folder)
        if dialog.exec():
            chosen = chosen_path(dialog)
            if chosen is not None:
                self.import_path(chosen)

    def import_path(self, source: Path) -> None:
        """Check and copy `source` into the models folder off the GUI thread; a bad one is refused here."""
        from core.models.importing import import_model

        self.message.setText(f"Importing {source.name}…")
        call = BackgroundCall(lambda: import_model(source, self.models_dir), self)
        call.done.connect(lambda path: (self.message.setText(f"Imported {Path(path).name}."), self.refresh()))
        call.failed.connect(lambda text: self.message.setText(f"Not imported: {text}"))
        self._calls.append(call.start())

    # -- the catalog (Download) ----------------------------------------------------------------------------

    def _build_catalog(self) -> None:
        page = QWidget()
        column = QVBoxLayout(page)
        column.setContentsMargins(0, 0, 0, 0)  # in line with the switch above it
        self.catalog_list = PairList()
        self.catalog_status = label("Checking which models fit this computer…", muted=True)
        self.download_button = button("Download…", PRIMARY)
        themed(self.download_button, "download", "on_accent", size=16)
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self._download)
        self.catalog_list.chosen.connect(self._update_download)
        row = QHBoxLayout()
        row.addWidget(self.catalog_status, 1)
        row.addWidget(self.download_button)
        column.addWidget(self.catalog_list, 1)
        column.addLayout(row)
        self.sections.add_page(page, "Download")
        self.catalog_page = page
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
        self._update_download(self.catalog_list.current_fit())

    def _update_download(self, fit) -> None:  # noqa: ANN001 - PairFit | None
        """Download only for a pair not on this computer yet (the built-in one ships with the app)."""
        installed = fit is not None and fit.pair.id in self._catalog_state.installed
        self.download_button.setEnabled(fit is not None and not installed)
        self.download_button.setText("Already on this computer" if installed else "Download…")

    def _download(self) -> None:
        fit = self.catalog_list.current_fit()
        if fit is None or fit.pair.id in self._catalog_state.installed:
            return
        if fit.fit == "no" and not self.confirm(
            "Download anyway?",
            f"{fit.pair.name} will probably not run on this computer: {fit.reason}. Download it anyway?",
            "Download anyway",
        ):
            return
        self.download_requested.emit(fit.pair.id)

    def _ask(self, title: str, text: str, verb: str) -> bool:
        """A question; deleting or forgetting something is destructive (Cancel is the default)."""
        return confirm_destructive(self, title, text, verb, destructive=verb.split()[0] in DESTRUCTIVE_VERBS)


def model_pair_name(settings: AppSettings) -> str:
    """The pair in use as a person calls it: the catalog's name, else the target folder's name."""
    if settings.active_pair:
        try:
            return load_catalog().pair(settings.active_pair).name
        except SpecExecError:
            pass
    if settings.target in ("builtin", ""):
        return "SmolLM2 135M (built-in)"
    return Path(settings.target).name
