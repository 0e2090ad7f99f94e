"""A wizard page of 2026: its title in plain words at the top of the page, the explanation under it in muted
words, and no header band. QWizard draws its band for any page with a title(), so these pages never set one:
the title is a label of the page's own (`heading`), which also keeps it beside the page's content."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWizardPage

from app.theme.tokens import SPACE
from app.window.labels import Label


class PlainPage(QWizardPage):
    """`body`: the page's layout, under its heading and subheading."""

    def __init__(self, title: str, subtitle: str = "") -> None:
        super().__init__()
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(SPACE.l, SPACE.l, SPACE.l, 0)
        self.body.setSpacing(SPACE.s)
        self.heading = Label()
        self.heading.setObjectName("pageTitle")
        self.heading.setWordWrap(True)
        self.subheading = Label()
        self.subheading.setWordWrap(True)
        self.subheading.setProperty("muted", True)
        self.body.addWidget(self.heading)
        self.body.addWidget(self.subheading)
        self.body.addSpacing(SPACE.s)
        self.set_heading(title, subtitle)

    def set_heading(self, title: str, subtitle: str | None = None) -> None:
        """The page's title (and, unless None, the words under it; "" hides them)."""
        self.heading.setText(title)
        self.heading.setAccessibleName(title)
        if subtitle is not None:
            self.subheading.setText(subtitle)
            self.subheading.setVisible(bool(subtitle))
