"""Wizard page 2, "Choose a model": the catalog's pairs, recommended first, each with its fit mark and reason.
A pair marked red ("does not fit") can still be chosen, but only after ticking an explicit confirmation. A pair
whose download the models' drive cannot hold offers to keep models on another drive (the Settings' Models
folder), and the cards are worked out again with that drive."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QFileDialog

from app.models.wizard.pair_list import PairList
from app.models.wizard.plain_page import PlainPage
from app.models.wizard.state import WizardState
from app.models.wizard.words import technical_lines
from app.system.model_chooser import chosen_path, model_chooser
from app.window.buttons import LINK, button
from app.window.labels import Label
from core.models.fit import PairFit


class ChoosePage(PlainPage):
    def __init__(self, state: WizardState) -> None:
        super().__init__(
            "Choose a model", "Bigger models answer better, but more slowly. The first one suits this computer best."
        )
        self.state = state
        layout = self.body
        self._shown = None
        self.pairs = PairList()
        self.pairs.chosen.connect(self._chosen)
        self.confirm_red = QCheckBox(
            "I understand this model will probably not run on this computer; download it anyway"
        )
        self.confirm_red.setObjectName("confirmRed")
        self.confirm_red.setVisible(False)
        self.confirm_red.toggled.connect(lambda _on: self.completeChanged.emit())
        self.note = Label()
        self.note.setWordWrap(True)
        self.details_button = button(
            "Show details", LINK, "The models behind it, how they are stored, how the speed was worked out"
        )
        self.details_button.setCheckable(True)
        self.details_button.toggled.connect(self._show_details)
        self.details = Label()
        self.details.setObjectName("pairDetails")
        self.details.setProperty("muted", True)
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.hide()
        self.move_button = button(
            "Keep models on another drive…", LINK, "Pick a folder on a drive with room for this model's download"
        )
        self.move_button.clicked.connect(self._change_folder)
        self.move_button.hide()
        layout.addWidget(self.pairs, 1)
        layout.addWidget(self.note)
        layout.addWidget(self.move_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.confirm_red)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.details)

    def initializePage(self) -> None:
        if self.state.recommendation is not None and self.state.recommendation is not self._shown:
            self._shown = self.state.recommendation  # refilled when a measured copy rate replaced the estimate
            wanted = self.state.chosen  # a resumed download names its pair before the list exists
            self.pairs.show_recommendation(self.state.recommendation, self.state.installed)
            if wanted is not None:
                self.pairs.select(wanted.pair.id)

    def folder_dialog(self) -> QFileDialog:
        return model_chooser(self, "Keep models in this folder", self.state.models_dir, folder=True)

    def take_folder(self, dialog: QFileDialog) -> None:
        """Models go to the folder picked in `dialog` (an accepted chooser): the cards are worked out again
        with that drive's free space, the chosen pair kept; a folder that cannot be used is said."""
        chosen = chosen_path(dialog)
        if chosen is None:
            return
        problem = self.state.keep_models_in(chosen)
        if problem is not None:
            self.note.setText(f"Models cannot be kept there: {problem}.")
            return
        self.initializePage()
        self.note.setText(" ".join(part for part in (self.note.text(), f"Models will be kept in {chosen}.") if part))

    def _change_folder(self) -> None:
        dialog = self.folder_dialog()
        if dialog.exec():
            self.take_folder(dialog)

    def _show_details(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.details_button.setText("Hide details" if shown else "Show details")

    def _chosen(self, fit: PairFit | None) -> None:
        self.state.chosen = fit
        self.details.setText("\n".join(technical_lines(fit)) if fit is not None else "")
        red = fit is not None and fit.fit == "no"
        self.confirm_red.setChecked(False)
        self.confirm_red.setVisible(red)
        self.move_button.setVisible(
            fit is not None and fit.disk_ok is False and fit.pair.id not in self.state.installed
        )
        if fit is None:
            self.note.clear()
        elif fit.pair.id in self.state.installed:
            self.note.setText("Already on this computer: no download needed.")
        elif fit.pair.gated:
            self.note.setText(
                f"{fit.pair.name} is gated: accept its licence at {fit.pair.licence_url} with a free "
                "Hugging Face account; the download asks for your access token."
            )
        else:
            self.note.clear()
        self.completeChanged.emit()

    def isComplete(self) -> bool:
        fit = self.state.chosen
        return fit is not None and (fit.fit != "no" or self.confirm_red.isChecked())
