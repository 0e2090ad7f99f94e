"""Text from outside shown as written: an answer, a chat's title, a model folder's name, a tool's result or an
engine error that holds HTML or a Markdown image never makes the window read the file it names.

Qt lays an image out by reading its file, and reads a label's or a tooltip's text as HTML when it looks like
HTML: a path to a pipe or /dev/zero hangs the window, and on Windows a share on another computer is handed the
user's sign-in. The trap here is a real named pipe: opening it to read blocks until a writer comes, so a
watcher that keeps trying to open it for writing sees the first read, and then lets the reader go on with a
plain file in the pipe's place (so a failing test fails instead of hanging)."""

from __future__ import annotations

import ast
import html
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6 import QtGui  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QLabel, QWidget  # noqa: E402

from core.engine import protocol as P  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, quiet_window

APP = Path(__file__).resolve().parents[1] / "app"


WATCHER = """
import os, sys, time
path, seen = sys.argv[1], sys.argv[2]
while True:
    try:
        writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until someone opens it to read
    except OSError:
        time.sleep(0.005)
        continue
    open(seen, "w").close()
    # a plain file in its place, then the reader let go: a window that reads it goes on (and the test fails
    # on the count) instead of waiting on the pipe for ever
    with open(path + ".tmp", "wb") as plain:
        plain.write(b"x")
    os.replace(path + ".tmp", path)
    os.write(writer, b"x")
    os.close(writer)
    break
"""


class PipeTrap:
    """A named pipe that notes the first time it is opened to be read. The watcher is a process of its own:
    the window's thread blocks in Qt's open() holding Python's lock, which a thread would wait for too."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen = path.with_suffix(".seen")
        os.mkfifo(path)
        self._watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(path), str(self._seen)])

    @property
    def read(self) -> bool:
        return self._seen.exists()

    def close(self) -> None:
        self._watcher.kill()
        self._watcher.wait()


@pytest.fixture()
def trap(tmp_path):
    trap = PipeTrap(tmp_path / "trap.png")
    yield trap
    trap.close()


def shown_as_written(window, marker: str) -> list[str]:
    """Every label and tooltip under `window` that would read `marker` (an <img> tag) as HTML."""
    found = []
    for label in window.findChildren(QLabel):
        rich = label.textFormat() == Qt.TextFormat.RichText or (
            label.textFormat() == Qt.TextFormat.AutoText and QtGui.Qt.mightBeRichText(label.text())
        )
        if rich and marker in label.text():
            found.append(f"label {label.objectName() or label.accessibleName()!r}: {label.text()[:80]}")
    for widget in [window, *window.findChildren(QWidget)]:
        tip = widget.toolTip()
        if marker in tip and QtGui.Qt.mightBeRichText(tip):
            found.append(f"tooltip of {type(widget).__name__}: {tip[:80]}")
    return found


def test_hostile_text_everywhere_in_the_chat_window_is_shown_as_written(qtbot, quiet_window, trap, tmp_path):
    from app_fixtures import screenshot

    from app.conversations import store as S

    w = quiet_window
    tag = f'<img src="{trap.path}">'
    folder = tmp_path / f"R&D {tag.replace('/', '_')}"  # a folder name may hold < and > (not on Windows)
    w.settings = replace(w.settings, target=str(folder))
    w._show_model_pair()
    cid = w.store.create_conversation(f"Title {tag}")
    w.store.add_message(cid, "user", f"Look {tag} and ![a cat]({trap.path})")
    answer = w.store.add_message(
        cid, "assistant", f"Here ![a cat]({trap.path}) and {tag}, [a link](https://example.com)", S.COMPLETE
    )
    w.store.update_message(
        answer.id,
        reasoning=f"thinking {tag}",
        tool_rounds=[
            {
                "content": tag,
                "calls": [{"id": "c1", "name": tag, "arguments": {"q": tag}, "result": tag, "status": "done"}],
            }
        ],
    )
    w.controller.conversations.refresh()
    w.controller.open_conversation(cid)
    w.bridge.handle_events(
        [P.EngineStarted(pid=1), P.Error(None, "model_format", f"config.json names {tag}", f"fix {tag}")]
    )
    w.banner.details_button.setChecked(True)  # the engine's own words, one click away
    chats = w.sidebar.view.model()
    sidebar_tips = [chats.index(row, 0).data(Qt.ItemDataRole.ToolTipRole) for row in range(chats.rowCount())]
    w.resize(1100, 800)
    screenshot(w, "chat-hostile-text")  # lays out and paints everything, images included
    qtbot.waitUntil(lambda: w.banner.isVisible())

    assert not trap.read
    assert shown_as_written(w, "<img") == []
    assert w.header.model_button.text().startswith("R&&D <img")  # shown as "R&D <img…", no Alt+D shortcut
    assert any(html.escape(tag) in tip for tip in sidebar_tips)  # said, as written
    assert not any("<img" in tip and QtGui.Qt.mightBeRichText(tip) for tip in sidebar_tips)
    assert html.escape(tag) in w.banner.label.text()  # the message and its details say it, as written
    bodies = [widget.body.toPlainText() for widget in w.chat_view.widgets]
    assert any(f"[image: trap.png] and {tag}" in text for text in bodies)  # the image as a link, the tag as text


def test_an_answer_s_image_is_a_link_to_where_it_points_and_nothing_is_read(qtbot, trap):
    from app.chat.message_text import MessageBody
    from app.chat.rendering import fragments

    body = MessageBody()
    qtbot.addWidget(body)
    body.resize(500, 300)
    body.set_markdown(
        f"# Cats\n\n- one ![a cat]({trap.path})\n- two ![b](https://example.com/b.png)\n\n"
        f"| a | b |\n|---|---|\n| ![c]({trap.path}) | `![d]({trap.path})` |\n\n![ref][1]\n\n[1]: {trap.path}\n"
    )
    body.show()
    body.grab()

    assert not trap.read
    text = body.toPlainText()
    assert "one [image: trap.png]" in text and "two [image: b.png]" in text
    assert f"![d]({trap.path})" in text  # code is code: shown as written, not taken for an image
    assert text.count("[image: trap.png]") == 3
    [view] = body.parts
    runs = [fragment.charFormat() for fragment in fragments(view.document())]
    assert not any(look.isImageFormat() for look in runs)
    links = [look.anchorHref() for look in runs if look.isAnchor()]
    assert links == [str(trap.path), "https://example.com/b.png", str(trap.path), str(trap.path)]


def test_every_label_of_the_app_is_a_plain_label_unless_it_asks_for_rich_text():
    """QLabel's default reads text that looks like HTML as HTML: the app makes its labels with
    app.window.labels.Label (plain unless rich=True), never with QLabel itself."""
    made = []
    for path in APP.rglob("*.py"):
        if path.name == "labels.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "QLabel":
                made.append(f"{path.relative_to(APP)}:{node.lineno}")
    assert made == []


def test_the_wizard_s_load_says_an_error_quoting_html_as_written(qtbot, tmp_path, monkeypatch, trap):
    """The set-up's last page: the engine's loading step (its tooltip) and its error (bold words of ours,
    then the engine's own) quote the model's files, which may hold anything."""
    from app_fixtures import wizard_loading_the_builtin_pair

    tag = f'<img src="{trap.path}">'
    wizard, bridge = wizard_loading_the_builtin_pair(qtbot, tmp_path / "models", monkeypatch)
    bridge.handle_events([P.EngineStarted(pid=1), P.LoadProgress(f"Reading {tag}", fraction=0.5)])
    shown_while_loading = shown_as_written(wizard, "<img")
    bridge.handle_events([P.Error(None, "model_format", f"config.json names {tag}", f"fix {tag}")])
    wizard.grab()

    assert not trap.read
    assert shown_while_loading == [] and shown_as_written(wizard, "<img") == []
    page = wizard.done_page
    assert page.stage.text().startswith("<b>The model did not load:</b>") and html.escape(tag) in page.stage.text()


def test_a_link_under_the_pointer_says_where_it_really_goes(qtbot):
    """A link's words may name another address than its own ([https://bank.example](https://evil.example)):
    hovering it says the real one, and whether a click opens it (only web and mail addresses open)."""
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    from app.chat.message_text import MessageBody

    body = MessageBody()
    qtbot.addWidget(body)
    body.resize(600, 200)
    body.set_markdown("See [https://bank.example](https://evil.example/login) or [this](file:///etc/passwd).")
    body.show()
    qtbot.waitExposed(body)
    [view] = body.parts
    text = view.document().toPlainText()

    def hover(words: str) -> str:
        cursor = QTextCursor(view.document())
        cursor.setPosition(text.index(words) + 2)
        QTest.mouseMove(view.viewport(), view.cursorRect(cursor).center())
        qtbot.waitUntil(lambda: view.toolTip() != "")
        return view.toolTip()

    assert hover("https://bank.example") == "Opens https://evil.example/login"
    QTest.mouseMove(view.viewport(), view.cursorRect(QTextCursor(view.document())).center())  # off the link
    qtbot.waitUntil(lambda: view.toolTip() == "")
    assert hover("this") == "Not opened (not a web address): file:///etc/passwd"
