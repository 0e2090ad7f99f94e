"""The first-run wizard: Your computer -> Choose a model -> Download (skipped when nothing is missing) ->
Done (the engine loads the pair). Shown on a first start and from Models > Set-up wizard; with `resume_pair`
it opens on the download of a pair left unfinished by a closed app or a reboot (or one picked in the model
manager). On a first start it starts the engine itself and hands it to the main window (`take_bridge`);
from the menu it borrows the app's running engine (`bridge`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QWidget, QWizard

from app.engine.bridge import EngineBridge
from app.settings.schema import AppSettings
from app.models.wizard.choose_page import ChoosePage
from app.models.wizard.done_page import DonePage
from app.models.wizard.download_page import DownloadPage
from app.models.wizard.hardware_page import HardwarePage
from app.models.wizard.state import WizardState
from app.window.buttons import PRIMARY, SECONDARY, set_role
from app.window.geometry import scaled_size
from core.models.catalog import Catalog

HARDWARE, CHOOSE, DOWNLOAD, DONE = range(4)


def default_bridge(settings: AppSettings) -> EngineBridge:
    from core.engine.client import EngineClient

    threads = settings.thread_count()
    return EngineBridge(lambda: EngineClient(torch_threads=threads))


class FirstRunWizard(QWizard):
    def __init__(
        self,
        settings: AppSettings,
        models_dir: Path,
        catalog: Catalog | None = None,
        make_bridge: Callable[[AppSettings], EngineBridge] = default_bridge,
        resume_pair: str | None = None,
        bridge: EngineBridge | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.state = (
            WizardState(settings, models_dir) if catalog is None else WizardState(settings, models_dir, catalog)
        )
        self.setWindowTitle("Set up SpecExec Desktop")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, True)
        self.setButtonText(QWizard.WizardButton.FinishButton, "Start chatting")
        self.setButtonText(QWizard.WizardButton.NextButton, "Next")
        self.setButtonText(QWizard.WizardButton.BackButton, "Back")
        for kind, role in (
            (QWizard.WizardButton.NextButton, PRIMARY),
            (QWizard.WizardButton.FinishButton, PRIMARY),
            (QWizard.WizardButton.BackButton, SECONDARY),
            (QWizard.WizardButton.CancelButton, SECONDARY),
        ):
            set_role(self.button(kind), role)  # the way on looks like the main action; no stock icons
        self.resize(scaled_size(self, 760, 560))
        self.hardware_page = HardwarePage(self.state)
        self.choose_page = ChoosePage(self.state)
        self.download_page = DownloadPage(self.state)
        self.done_page = DonePage(self.state, make_bridge, bridge)
        for page_id, page in (
            (HARDWARE, self.hardware_page),
            (CHOOSE, self.choose_page),
            (DOWNLOAD, self.download_page),
            (DONE, self.done_page),
        ):
            self.setPage(page_id, page)
        self.currentIdChanged.connect(self._page_shown)
        self.resume_pair = resume_pair
        if resume_pair is not None:  # after the hardware page has found the pair's fit, go straight on
            self.hardware_page.completeChanged.connect(self._resume)

    def _page_shown(self, page_id: int) -> None:
        """Back to the list (QWizard then skips initializePage) shows the cards as the state now predicts them:
        a download may have found the drive fuller than the first look did."""
        if page_id == CHOOSE:
            self.choose_page.initializePage()

    def nextId(self) -> int:
        page = self.currentId()
        if page == CHOOSE:
            return DOWNLOAD if self.state.needs_download() else DONE
        return super().nextId()

    def _resume(self) -> None:
        if self.resume_pair is None or self.state.recommendation is None:
            return
        pair_id, self.resume_pair = self.resume_pair, None
        self.state.chosen = next(fit for fit in self.state.recommendation.pairs if fit.pair.id == pair_id)
        self.next()
        self.next()

    @property
    def chosen_settings(self) -> AppSettings | None:
        """The settings with the chosen pair, once the engine has loaded it (None before)."""
        return self.done_page.chosen_settings if self.done_page.isComplete() else None

    def take_bridge(self) -> EngineBridge | None:
        return self.done_page.release_bridge()

    def done(self, result: int) -> None:
        self.download_page.stop_for_close()
        page = self.done_page
        if result != QWizard.DialogCode.Accepted and page.bridge is not None and not page.borrowed:
            page.release_bridge().shutdown()  # an engine this wizard started and nobody took
        super().done(result)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.download_page.stop_for_close()
        super().closeEvent(event)
