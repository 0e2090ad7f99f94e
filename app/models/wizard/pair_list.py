"""The catalog's pairs as cards: name, fit mark (green / amber / red) with its reason, predicted speed in
words and numbers, download size, licence and gated note. The recommended pair comes first. Used by the
wizard's "Choose a model" page and the model manager's catalog tab."""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from app.models.wizard.words import FIT_COLOURS, FIT_WORDS, download_words, licence_words, speed_words
from core.models.fit import PairFit, Recommendation

# Rows drawn as cards: the selected one outlined, never filled with the dark selection colour (grey text stays
# readable).
CARD_STYLE = ("QListWidget::item { border: 1px solid #d0d4da; border-radius: 8px; }"
              "QListWidget::item:selected { border: 2px solid #2e6fd8; background: #eef4ff; }")


class PairCard(QWidget):
    def __init__(self, fit: PairFit, recommended: bool, installed: bool) -> None:
        super().__init__()
        self.fit = fit
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.setSpacing(2)
        badges = []
        if recommended:
            badges.append("<span style='background:#2e6fd8;color:white'>&nbsp;Recommended&nbsp;</span>")
        if installed:
            word = "Built in" if fit.pair.download_bytes == 0 else "Downloaded"
            badges.append(f"<span style='background:#6b7280;color:white'>&nbsp;{word}&nbsp;</span>")
        title = QLabel(f"<b>{fit.pair.name}</b> &nbsp; {' '.join(badges)}")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        title.setFont(font)
        colour = FIT_COLOURS[fit.fit]
        self.mark = QLabel(f"<span style='color:{colour}'>●</span> "
                           f"<b style='color:{colour}'>{FIT_WORDS[fit.fit]}</b>: {fit.reason.removeprefix('fits: ')}")
        self.mark.setWordWrap(True)
        self.mark.setAccessibleName(f"Fit: {FIT_WORDS[fit.fit]}")
        facts = QLabel(f"{speed_words(fit).capitalize()} · {download_words(fit)} · {licence_words(fit)}")
        facts.setWordWrap(True)
        summary = QLabel(f"<span style='color:#6b7280'>{fit.pair.summary}</span>")
        summary.setWordWrap(True)
        for label in (title, summary, self.mark, facts):
            layout.addWidget(label)


class PairList(QListWidget):
    """Pick one pair; `chosen` carries its PairFit (or None when nothing is selected)."""

    chosen = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("Model pairs")
        self.setSpacing(2)
        self.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.setStyleSheet(CARD_STYLE)
        self.fits: list[PairFit] = []
        self.currentRowChanged.connect(lambda row: self.chosen.emit(self.fits[row] if 0 <= row < len(self.fits) else None))

    def show_recommendation(self, recommendation: Recommendation, installed: set[str]) -> None:
        self.clear()
        self.fits = list(recommendation.pairs)
        for fit in self.fits:
            card = PairCard(fit, fit.pair.id == recommendation.recommended, fit.pair.id in installed)
            item = QListWidgetItem()
            width = max(self.viewport().width(), 560) - 16
            item.setSizeHint(QSize(width, card.layout().totalHeightForWidth(width)))
            self.addItem(item)
            self.setItemWidget(item, card)
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
