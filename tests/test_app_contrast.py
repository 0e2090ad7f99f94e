"""Every screen, in both themes, measured on its pixels: each piece of text against what is drawn behind it
reaches WCAG AA (4.5:1). Text is drawn without antialiasing here (the `themes` fixture), so every text pixel
has its exact colour (tests/app_fixtures.py, text_contrast)."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QRect  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QAbstractButton,
    QCheckBox,
    QFrame,
    QLabel,
    QLineEdit,
    QListView,
    QMenuBar,
    QPlainTextEdit,
    QTabBar,
    QTextBrowser,
)

from PySide6.QtGui import QIcon  # noqa: E402

from app.conversations.chat_rows import MENU_MARGIN_PX, ChatListView  # noqa: E402
from app.settings.schema import Theme  # noqa: E402

pytest.register_assert_rewrite("app_fixtures", "app_screens")
from app_fixtures import ARTIFACTS, grab_pixels, region_contrast, text_contrast  # noqa: E402
from app_screens import HW_FIXTURE, build_screens, settle  # noqa: E402

pytest_plugins = ["app_fixtures"]
pytestmark = [pytest.mark.qt, pytest.mark.timeout(300)]

AA = 4.5
BUTTON_INSET = 5  # inside a button's border and rounded corners


def covered(widget, top) -> bool:
    """Whether a card floating over the window (the speed details, a toast) hides part of `widget`: its
    pixels there are the card's, measured as the card's own text."""
    for card in top.findChildren(QFrame):
        if (
            card.objectName() in ("speedDetails", "toast")
            and card.isVisible()
            and card is not widget
            and not card.isAncestorOf(widget)
        ):
            here = QRect(widget.mapTo(top, widget.rect().topLeft()), widget.size())
            if here.intersects(QRect(card.mapTo(top, card.rect().topLeft()), card.size())):
                return True
    return False


def on(top, widgets: list) -> list:
    """The visible ones drawn in `top` itself (a dialog parented to the window is a window of its own)."""
    return [
        widget
        for widget in widgets
        if widget.isVisible()
        and widget.window() is top
        and widget.visibleRegion().boundingRect() == widget.rect()  # not scrolled partly out of sight
        and not covered(widget, top)
    ]


def text_widgets(top) -> list[tuple[str, object, int]]:
    """(description, widget, inset) for every visible, enabled piece of text on a top-level widget."""
    found = []
    for widget in on(top, top.findChildren(QLabel)):
        if widget.isEnabled() and widget.text().strip():
            inset = 3 if widget.objectName() in ("badge", "stepNumber") else 0  # inside the rounded corners
            found.append((f"label {widget.text()[:40]!r}", widget, inset))
    for widget in on(top, top.findChildren(QAbstractButton)):
        if widget.isEnabled() and widget.text().strip() and not isinstance(widget, QCheckBox):
            found.append((f"button {widget.text()!r}", widget, BUTTON_INSET))
    for widget in on(top, top.findChildren(QLineEdit)):
        if widget.isEnabled() and (widget.text() or widget.placeholderText()):
            found.append((f"field {widget.accessibleName() or widget.placeholderText()!r}", widget, 3))
    for widget in on(top, top.findChildren(QTextBrowser) + top.findChildren(QPlainTextEdit)):
        if widget.toPlainText().strip():
            found.append((f"text {widget.toPlainText()[:40]!r}", widget, 0))
    for widget in on(top, top.findChildren(QMenuBar) + top.findChildren(QTabBar)):
        found.append((type(widget).__name__, widget, 0))
    return found


def list_rows(top) -> list[tuple[str, object, QRect]]:
    """Rows of item views drawn by the view itself (the sidebar's chats, with their date headings):
    (description, viewport, row rect). A chat row's "…" button is an icon, drawn antialiased: left out, as
    the buttons' icons are."""
    rows = []
    for view in on(top, top.findChildren(QListView)):
        if view.objectName() == "cardList":
            continue  # cards are widgets: their labels are measured one by one
        model = view.model()
        for row in range(model.rowCount()):
            index = model.index(row, 0)
            rect = view.visualRect(index)
            if rect.isValid() and view.viewport().rect().contains(rect):
                if isinstance(view, ChatListView):
                    rect.setRight(view.menu_button_at(index).left() - MENU_MARGIN_PX - 1)
                rows.append((f"row {index.data()!r}", view.viewport(), rect.adjusted(3, 2, -3, -2)))
    return rows


@pytest.mark.slow  # every screen drawn and measured: ~10 s a theme
@pytest.mark.parametrize("theme", [Theme.LIGHT, Theme.DARK], ids=["light", "dark"])
def test_every_screen_reaches_aa_contrast(qtbot, themes, app_paths, tmp_path, monkeypatch, theme):
    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(HW_FIXTURE))
    themes.apply(theme)
    screens = build_screens(app_paths, tmp_path / "models", lambda predicate: qtbot.waitUntil(predicate, timeout=30000))
    for _, widget in screens:
        qtbot.addWidget(widget)
    settle()
    failures = []
    measured = 0
    for name, top in screens:
        top.raise_()
        for button in top.findChildren(QAbstractButton):  # icons are drawn antialiased: measure the words alone
            button.setIcon(QIcon())
        settle(2)
        grabbed = grab_pixels(top)  # measuring draws nothing: one drawing serves every region of this screen
        for what, widget, inset in text_widgets(top):
            ratio = text_contrast(top, widget, inset, grabbed)
            measured += ratio != float("inf")
            if ratio < AA:
                failures.append(f"{name}: {what}: {ratio:.2f}")
        for what, viewport, rect in list_rows(top):
            ratio = region_contrast(top, viewport, rect, grabbed)
            measured += 1
            if ratio < AA:
                failures.append(f"{name}: {what}: {ratio:.2f}")
        ARTIFACTS.mkdir(exist_ok=True)
        top.grab().save(str(ARTIFACTS / f"contrast-{theme.value}-{name}.png"))
    assert measured > 100, "too little text was found to measure"
    assert not failures, "\n".join(failures)
