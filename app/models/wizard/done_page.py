"""Wizard page 4, "Done": the chosen pair is checked (a missing or broken folder is reported here, before
anything is saved), then the engine loads it with a progress bar that moves with the engine's real progress
(bytes or tensors read and dequantised); once loaded the page says so, and only "Start chatting" is left."""

from __future__ import annotations

import time
from html import escape
from typing import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QProgressBar, QWizard

from app.engine.bridge import CRASHED, FAILED, READY, EngineBridge, EngineStatus
from app.models.choice import choose
from app.settings.schema import AppSettings
from app.models.wizard.plain_page import PlainPage
from app.models.wizard.state import WizardState
from app.window.buttons import PRIMARY, button
from app.models.wizard.words import MEASURED_HERE, speed_words
from app.window.labels import Label, plain_tip
from core.errors import SpecExecError
from core.models.fit import predict_pair


def stage_words(stage: str) -> str:
    """The engine's loading step for people (its own words, with paths and dtypes, go in the tooltip)."""
    lowered = stage.lower()
    if "convert" in lowered or "dequantis" in lowered:
        return "Unpacking the model's weights (the first start only)"
    if "measuring" in lowered:
        return "Measuring this computer's speed"
    if "tokenizer" in lowered or "metadata" in lowered:
        return "Reading the model's files"
    return "Loading the model into memory"


class DonePage(PlainPage):
    def __init__(
        self, state: WizardState, make_bridge: Callable[[AppSettings], EngineBridge], bridge: EngineBridge | None = None
    ) -> None:
        super().__init__("Almost there", "The model is checked, then loaded into memory.")
        self.state = state
        self.make_bridge = make_bridge
        self.bridge: EngineBridge | None = bridge  # given: the app's running engine, borrowed (never shut down)
        self.borrowed = bridge is not None
        self.loaded = False  # a Load was sent (a borrowed engine then holds the new pair)
        self.chosen_settings: AppSettings | None = None
        layout = self.body
        self.headline = Label(rich=True)
        self.headline.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setObjectName("loadBar")
        self.bar.setRange(0, 100)
        self.bar.setTextVisible(False)  # the words are under it, never squeezed into the bar
        self.bar.setAccessibleName("Loading the model")
        self._started = time.monotonic()
        self._last_status: EngineStatus | None = None
        self._clock = QTimer(self)  # the seconds count up while the load shows no percentage to move
        self._clock.setInterval(1000)
        self._clock.timeout.connect(lambda: self._last_status is not None and self._status(self._last_status))
        self.stage = Label(" ", rich=True)
        self.stage.setObjectName("loadStage")
        self.stage.setWordWrap(True)
        self.retry_button = button("Try loading again", PRIMARY)
        self.retry_button.setVisible(False)
        self.retry_button.clicked.connect(self._load)
        for widget in (self.headline, self.bar, self.stage, self.retry_button):
            layout.addWidget(widget)
        layout.addStretch()

    def _show_cancel(self, shown: bool) -> None:
        wizard = self.wizard()
        if wizard is not None:
            wizard.setOption(QWizard.WizardOption.NoCancelButtonOnLastPage, not shown)

    def initializePage(self) -> None:
        fit = self.state.chosen
        self._show_cancel(True)
        self.set_heading("Almost there")
        first = (
            "The first start unpacks its weights once: about half a minute on an idle computer, a few "
            "minutes on a busy one."
            if fit.pair.download_bytes == 0
            else "The first start of a big model takes a while."
        )
        self.headline.setText(f"Loading <b>{escape(fit.pair.name)}</b>. {first}")
        target, draft = self.state.chosen_paths()
        try:
            self.chosen_settings = choose(self.state.settings, target, draft, fit.pair.id)
        except SpecExecError as error:  # checked before it is saved: the load is never tried
            self.chosen_settings = None
            self.stage.setText(
                f"<b>This model cannot be used:</b> {escape(str(error))}. Go back and choose or download it again."
            )
            self.bar.setValue(0)
            return
        self._load()

    def _load(self) -> None:
        self.retry_button.setVisible(False)
        settings = self.chosen_settings
        if self.bridge is None:
            self.bridge = self.make_bridge(settings)
        if not self.loaded:
            self.bridge.status_changed.connect(self._status)
        self.loaded = True
        self._started = time.monotonic()
        self._clock.start()
        if self.bridge.worker is None:
            self.bridge.start(settings.load_request())
        else:
            self.bridge.load(settings.load_request())

    def _status(self, status: EngineStatus) -> None:
        self._last_status = status
        if status.state in (READY, FAILED, CRASHED):
            self._clock.stop()
        if status.state == READY:
            self.bar.setRange(0, 100)
            self.bar.setValue(100)
            name = self.state.chosen.pair.name if self.state.chosen else "The model"
            self.headline.setText(f"<b>{escape(name)}</b> is loaded and ready.")
            self.stage.setText(f"{self._speed_here()}Press Start chatting.")
            self.stage.setToolTip("")
            self.set_heading("Done", "Everything is set up.")
            self._show_cancel(False)  # nothing left to cancel: the one way on is Start chatting
        elif status.state in (FAILED, CRASHED):
            self.stage.setText(f"<b>The model did not load:</b> {escape(status.message)}. {escape(status.hint)}")
            self.retry_button.setVisible(True)
        else:  # an honest bar: it moves as the engine says (a busy bar while it says nothing measurable)
            busy = not status.progress
            self.bar.setRange(0, 0 if busy else 100)
            if not busy:
                self.bar.setValue(int(status.progress * 100))
            percent = "" if busy else f" {status.progress * 100:.0f}%"
            elapsed = int(time.monotonic() - self._started)
            self.stage.setText(
                (stage_words(status.stage) if status.stage else "Starting the engine") + f"…{percent} · {elapsed} s"
            )
            self.stage.setToolTip(plain_tip(status.stage))
        self.completeChanged.emit()

    def _speed_here(self) -> str:
        """The speed measured while the model loaded, where there is one (the built-in pair's), as a sentence."""
        fit, hardware = self.state.chosen, self.state.hardware
        if fit is None or hardware is None:
            return ""
        measured = predict_pair(fit.pair, hardware)
        if not measured.rate_source.startswith("measured") or measured.tokens_per_second is None:
            return ""
        return f"On this computer it writes {speed_words(measured).removesuffix(MEASURED_HERE)}. "

    def isComplete(self) -> bool:
        return self.loaded and self.bridge is not None and self.bridge.status.state == READY

    def release_bridge(self) -> EngineBridge | None:
        """Hand the running engine to the main window (the page no longer watches it)."""
        bridge, self.bridge = self.bridge, None
        if bridge is not None and self.loaded:
            bridge.status_changed.disconnect(self._status)
        return bridge
