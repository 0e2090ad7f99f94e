"""Live statistics of the answer being generated (a state object the status widgets subscribe to)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from core.engine import protocol as P

CHANGED_INTERVAL_MS = 100  # views repaint at most ~10 times a second


class AnswerStats(QObject):
    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tokens_per_pass: list[int] = []
        self.tokens = 0
        self.engine_seconds = 0.0
        self.budget = 0
        self.tree_size = 0
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(CHANGED_INTERVAL_MS)
        self._timer.timeout.connect(self.changed)

    def reset(self) -> None:
        self.tokens_per_pass = []
        self.tokens = 0
        self.engine_seconds = 0.0
        self.tree_size = 0
        self.changed.emit()

    def add(self, stats: P.PassStats) -> None:
        self.tokens_per_pass.append(stats.tokens)
        self.tokens += stats.tokens
        self.engine_seconds += (stats.draft_ms + stats.target_ms) / 1000.0
        self.budget = stats.budget
        self.tree_size = stats.tree_size
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Emit `changed` now (the answer ended: show the final numbers)."""
        self._timer.stop()
        self.changed.emit()

    @property
    def passes(self) -> int:
        return len(self.tokens_per_pass)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.engine_seconds if self.engine_seconds > 0 else 0.0

    @property
    def mean_tokens_per_pass(self) -> float:
        return self.tokens / self.passes if self.passes else 0.0

    def finish(self, generated_tokens: int | None = None) -> dict[str, Any]:
        """The answer ended: the engine's count of its tokens (`generated_tokens`, when it sent one) replaces
        the sum of the passes, so the status bar and the figures under the answer say the same speed; emits
        `changed` now and returns the summary saved with the answer."""
        if generated_tokens:
            self.tokens = generated_tokens
        self.flush()
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """Saved with the answer (messages.stats)."""
        tokens = self.tokens
        return {
            "tokens": tokens,
            "passes": self.passes,
            "tokens_per_s": round(tokens / self.engine_seconds, 2) if self.engine_seconds > 0 else 0.0,
            "tokens_per_pass": round(tokens / self.passes, 3) if self.passes else 0.0,
            "budget": self.budget,
        }
