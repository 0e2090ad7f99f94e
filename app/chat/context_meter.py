"""How much of the model's context window the chat fills: a thin bar and "15% full" in plain words; the exact
token counts, and what filling up means, in the tooltip (issue 42: figures one hover away)."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QWidget

from app.window.labels import Label

WARN_SHARE = 0.8  # from here on the bar turns amber: the oldest messages will soon be left out


class ContextMeter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.bar = QProgressBar()
        self.bar.setObjectName("contextBar")
        self.bar.setTextVisible(False)
        self.bar.setFixedSize(64, 6)
        self.label = Label()
        self.label.setObjectName("contextLabel")
        layout.addWidget(self.bar)
        layout.addWidget(self.label)
        self.setAccessibleName("Context used")
        self.used = 0
        self.limit = 0
        self.set_usage(0, 0)

    def set_compact(self, compact: bool) -> None:
        """The bar alone (the figures in the tooltip), where the header is narrow."""
        self.label.setVisible(not compact)

    def set_usage(self, used: int, limit: int, with_message: bool = False, left_out: int = 0) -> None:
        """`used` tokens of a `limit`-token window (limit 0: not known yet, e.g. no model loaded).
        `with_message`: `used` counts the message being written (app.chat.draft_count), whose sending would
        leave the `left_out` oldest messages out."""
        self.used, self.limit = used, limit
        share = used / limit if limit else 0.0
        self.bar.setRange(0, 1000)
        self.bar.setValue(int(min(share, 1.0) * 1000))
        self.bar.setProperty("warn", share >= WARN_SHARE)
        self.bar.style().unpolish(self.bar)
        self.bar.style().polish(self.bar)
        self.label.setText(f"{min(round(share * 100), 100)}% full" if limit else "–")
        if not limit:
            tip = "How much of the chat the model keeps in mind: known once a model is loaded"
        elif with_message and used > limit:
            tip = (
                f"The message you are writing needs about {used:,} tokens: more than the {limit:,} the model can keep."
            )
        elif with_message:
            tip = (
                f"With the message you are writing, this chat uses {used:,} of the {limit:,} tokens the model can keep."
            )
            if left_out:
                messages = f"{left_out:,} message{'s' if left_out != 1 else ''}"
                tip += f" Sending it leaves the oldest {messages} out of what it sees."
        else:
            tip = (
                f"This chat uses {used:,} of the {limit:,} tokens the model can keep in mind. When they are "
                "used up, the oldest messages are left out of what the model sees."
            )
        self.setToolTip(tip)
        self.setAccessibleDescription(self.label.text())
