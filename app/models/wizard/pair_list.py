"""The catalog's pairs as cards: name, what the model is good for, fit mark (green / amber / red) with its reason, a
drive too full for its download (amber, with the sizes), predicted speed in words and numbers, download size,
licence and gated note; the technical details (draft model, quantisation, tokens per pass) are in the tooltip and
the page's Details. The recommended pair comes first. Used by the wizard's "Choose a model" page and the Models
page's Download section; `CardList` also lists the manager's installed models.

Cards are plain labels on the list's item background, coloured by role in resources/style.qss (the selected
card tinted and outlined, in both themes); each card's height follows the list's width, so no line is cut.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from app.models.format_words import catalog_format
from app.models.wizard.words import (
    FIT_WORDS,
    disk_words,
    download_words,
    licence_words,
    quality_words,
    speed_words,
    technical_lines,
)
from app.theme.tokens import SPACE
from app.window.labels import Label, plain_tip
from core.models.fit import PairFit, Recommendation

CARD_CHROME_PX = 12  # the item's margin and border around a card (style.qss: QListWidget#cardList::item)


def label(text: str, name: str = "", muted: bool = False, wrap: bool = True) -> QLabel:
    widget = Label(text)
    if name:
        widget.setObjectName(name)
    widget.setProperty("muted", muted)
    widget.setWordWrap(wrap)
    return widget


def badge(text: str, kind: str) -> QLabel:
    """A small pill: "Recommended" (accent), "In use" (success), "Downloaded" (neutral)."""
    widget = label(text, "badge", wrap=False)
    widget.setProperty("kind", kind)
    return widget


class Card(QWidget):
    """A card's body: a title row (title and badges), then lines of text."""

    def __init__(self, title: str, badges: list[QLabel], lines: list[QLabel]) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACE.m + 2, SPACE.s + 2, SPACE.m + 2, SPACE.s + 2)
        layout.setSpacing(SPACE.xs)
        row = QHBoxLayout()
        row.setSpacing(SPACE.s)
        self.title = label(title, "cardTitle", wrap=False)
        row.addWidget(self.title)
        for pill in badges:
            row.addWidget(pill)
        row.addStretch(1)
        layout.addLayout(row)
        for line in lines:
            layout.addWidget(line)


class MarkRow(QWidget):
    """A coloured mark ("● Fits, just") and the sentence that explains it, side by side."""

    def __init__(self, mark: str, kind: str, words: str, spoken_prefix: str = "") -> None:
        super().__init__()
        self.mark = label(f"● {mark}", "fitMark", wrap=False)
        self.mark.setProperty("fit", kind)
        self.mark.setAccessibleName(f"{spoken_prefix}{mark}")
        self.words = label(words)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(SPACE.s)
        row.addWidget(self.mark, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.words, 1)


DISK_MARK = "Drive too full"


class PairCard(Card):
    def __init__(self, fit: PairFit, recommended: bool, installed: bool, free_disk: int | None = None) -> None:
        self.fit = fit
        badges = [badge("Recommended", "accent")] if recommended else []
        if installed:
            badges.append(badge("Built-in" if fit.pair.download_bytes == 0 else "Downloaded", "neutral"))
        if fit.pair.download_bytes:  # how the big model is stored: what its download and memory are made of
            badges.append(badge(catalog_format(fit.pair.target.quantization), "neutral"))
        fit_row = MarkRow(FIT_WORDS[fit.fit], fit.fit, fit.reason.removeprefix("fits: ").rstrip(".") + ".", "Fit: ")
        self.mark = fit_row.mark
        facts = label(f"{speed_words(fit).capitalize()} · {download_words(fit)} · {licence_words(fit)}", muted=True)
        lines = [label(quality_words(fit)), fit_row]
        disk = None if installed else disk_words(fit, free_disk)
        if disk is not None:  # amber: a drive can be cleared, where the hardware cannot change
            lines.append(MarkRow(DISK_MARK, "tight", disk))
        super().__init__(fit.pair.name, badges, [*lines, facts])
        self.setToolTip(plain_tip("\n".join(technical_lines(fit))))


class CardList(QListWidget):
    """Cards, one per row, as tall as their text needs at the list's current width."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("cardList")
        self.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def add_card(self, card: QWidget) -> None:
        item = QListWidgetItem()
        self.addItem(item)
        self.setItemWidget(item, card)
        self._fit(item, card)

    def _fit(self, item: QListWidgetItem, card: QWidget) -> None:
        width = max(self.viewport().width(), 320) - CARD_CHROME_PX
        height = card.heightForWidth(width) if card.hasHeightForWidth() else card.sizeHint().height()
        item.setSizeHint(QSize(width, height + CARD_CHROME_PX))

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt signature
        super().resizeEvent(event)
        for row in range(self.count()):
            item = self.item(row)
            card = self.itemWidget(item)
            if card is not None:  # None while the list is being cleared
                self._fit(item, card)


class PairList(CardList):
    """Pick one pair; `chosen` carries its PairFit (or None when nothing is selected)."""

    chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Model pairs")
        self.fits: list[PairFit] = []
        self.currentRowChanged.connect(
            lambda row: self.chosen.emit(self.fits[row] if 0 <= row < len(self.fits) else None)
        )

    def show_recommendation(self, recommendation: Recommendation, installed: set[str]) -> None:
        """The catalog's pairs in the recommendation's order; the SpecExec paper's calibration pair (Llama 2
        70B, 2023) only where it is installed already: newer models answer better (`specexec models list`
        still lists it)."""
        self.clear()
        self.fits = [fit for fit in recommendation.pairs if not fit.pair.calibration or fit.pair.id in installed]
        for fit in self.fits:
            self.add_card(
                PairCard(
                    fit,
                    fit.pair.id == recommendation.recommended,
                    fit.pair.id in installed,
                    recommendation.hardware.disk.free_bytes,
                )
            )
        self.setCurrentRow(0)

    def select(self, pair_id: str) -> None:
        for row, fit in enumerate(self.fits):
            if fit.pair.id == pair_id:
                self.setCurrentRow(row)
                return
        raise KeyError(f"no pair {pair_id!r} in the list")

    def current_fit(self) -> PairFit | None:
        row = self.currentRow()
        return self.fits[row] if 0 <= row < len(self.fits) else None
