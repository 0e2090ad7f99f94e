"""Faults of the machine and of a careless user, on real files (issue 41): a damaged or newer conversation database
(kept aside, a fresh one offered in words, the app starts), the modes of the user's files (0600 in 0700 folders),
and a second app on the same data."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.conversations.store import Store, StoreError
from conftest import fill_disk
from app.main import open_store
from app.system.logging_setup import remove_logging, setup_logging
from app.system.paths import AppPaths

POSIX = os.name == "posix"


def _filled_store(path: Path) -> None:
    store = Store(path)
    for n in range(40):
        cid = store.create_conversation(f"chat {n}")
        store.add_message(cid, "user", "a question " * 200)
        store.add_message(cid, "assistant", "an answer " * 200)
    store.close()


def _damage_last_page(path: Path) -> bytes:
    """Overwrite the database file's last page with noise, as a disk or a crash can; returns the file before."""
    before = path.read_bytes()
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as handle:
        handle.seek(len(before) - page)
        handle.write(bytes((n * 151 + 7) % 256 for n in range(page)))
    return before


def test_a_damaged_database_is_kept_aside_and_a_fresh_one_offered(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    _filled_store(path)
    _damage_last_page(path)
    damaged = path.read_bytes()
    with pytest.raises(StoreError) as caught:  # not a raw sqlite3.DatabaseError
        Store(path)
    assert caught.value.reason == "damaged" and "is damaged: SQLite says" in str(caught.value)
    questions: list[str] = []
    store = open_store(path, lambda question: questions.append(question) or True)
    assert store is not None and store.conversations() == []  # a fresh, working database
    store.add_message(store.create_conversation(), "user", "hello again")
    store.close()
    assert "it is damaged and cannot be read" in questions[0] and "move it aside, untouched" in questions[0]
    [aside] = tmp_path.glob("conversations.sqlite3.unreadable-*[0-9]")
    assert aside.read_bytes() == damaged  # kept as it was


def test_a_newer_database_is_refused_unless_the_person_agrees(tmp_path, capsys):
    path = tmp_path / "conversations.sqlite3"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    asked: list[str] = []
    assert open_store(path, lambda question: asked.append(question) or False) is None
    assert "written by a newer version" in asked[0] and "cannot start" in capsys.readouterr().err
    assert path.exists() and not list(tmp_path.glob("*.unreadable-*"))  # refused: nothing moved
    store = open_store(path, lambda question: True)
    assert store is not None and store.conversations() == []
    store.close()


@pytest.mark.skipif(not POSIX, reason="file modes are POSIX")
def test_conversations_and_logs_are_the_users_alone(tmp_path):
    """Folders 0700 (tightened when an older version made them 0755), the database, its WAL files and the log
    0600, a rotated log too."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)
    paths = AppPaths(data, tmp_path / "config", tmp_path / "logs").ensure()
    for folder in (paths.data_dir, paths.config_dir, paths.log_dir):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    store = Store(paths.database)
    store.add_message(store.create_conversation(), "user", "private")
    for file in (paths.database, *paths.data_dir.glob("conversations.sqlite3-*")):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    store.close()
    handler = setup_logging(paths.log_file)
    try:
        handler.maxBytes = 200
        for n in range(10):
            logging.getLogger("app.test").warning("a line long enough to roll the log over %d %s", n, "x" * 50)
        logs = list(paths.log_dir.glob("specexec-desktop.log*"))
        assert len(logs) >= 2
        assert all(stat.S_IMODE(log.stat().st_mode) == 0o600 for log in logs), logs
    finally:
        remove_logging(handler)


FIRST_APP = """
import sys
from pathlib import Path
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from app.system.single_instance import SingleInstance

app = QApplication([])
instance = SingleInstance(Path(sys.argv[1]), app)
assert instance.acquire()
instance.activated.connect(lambda: (print("asked to show its window", flush=True), app.quit()))
QTimer.singleShot(120_000, app.quit)
print("ready", flush=True)
sys.exit(app.exec())
"""


def test_a_second_app_on_the_same_data_brings_the_first_to_front_and_says_so(tmp_path, qapp):
    """A real first app (another process) holds the data folder's lock: a second start cannot take it, names
    the first's process, asks it to show its window (the first hears it), and can start once the first is gone."""
    from app.system.single_instance import SingleInstance

    first = subprocess.Popen(
        [sys.executable, "-c", FIRST_APP, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    try:
        assert first.stdout.readline().strip() == "ready"
        second = SingleInstance(tmp_path)
        assert not second.acquire()
        assert second.owner() == first.pid
        shown = second.bring_first_to_front()
        assert shown and first.stdout.readline().strip() == "asked to show its window"
        message = second.message(shown)
        assert message == (
            f"SpecExec Desktop is already running with these conversations (process {first.pid}): "
            "its window was brought to the front."
        )
        assert first.wait(timeout=60) == 0
        assert second.acquire()  # the first is gone: its lock is taken over
        second.release()
    finally:
        if first.poll() is None:
            first.kill()


def test_the_window_says_what_a_full_disk_kept_from_being_saved_or_sent(qtbot, small_disk, tmp_path, monkeypatch):
    """The chat's sentences reach the person: a toast over the chat, not a signal nobody listens to."""
    from PySide6.QtCore import Qt

    from app_fixtures import ready, recording_bridge_class

    from app.system.paths import DATA_DIR_ENV
    from app.window.main_window import MainWindow
    from core.engine import protocol as P

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))  # settings, logs: on the roomy disk
    store = Store(small_disk / "conversations.sqlite3")
    paths = AppPaths.from_env().ensure()
    window = MainWindow(paths, store=store, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    try:
        ready(window.bridge)
        window.send("Tell me a long story.")
        request_id = window.bridge.calls[-1][1]
        filler = fill_disk(small_disk)
        answer = "Once upon a time " * 20_000
        window.bridge.handle_events([P.TokenChunk(request_id, answer, (1,)), P.Finished(request_id, "eos")])
        assert window.toast.text().startswith("The answer is shown but not saved: could not save to the conversation")
        window.input.setPlainText("And another one?")
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
        assert window.toast.text().startswith("Your message was not sent: could not save to the conversation database")
        assert window.input.toPlainText() == "And another one?"  # kept, to send again
        window.pin_action.trigger()
        assert window.toast.text().startswith("The chat was not pinned: could not save to the conversation database")
        assert (
            window.pin_action.text() == "&Pin chat to top"
            and not store.conversation(store.conversations()[0].id).pinned
        )
        filler.unlink()
        qtbot.waitUntil(
            lambda: window.toast.text() == "The answer that could not be saved is saved now.", timeout=30_000
        )
    finally:
        window.close()
        store.close()


def test_a_full_disk_loses_no_answer_and_says_so(qtbot, small_disk):
    """The disk fills while an answer streams: the answer ends (not stuck generating), is shown, the person is
    told, and it is saved once space is freed; a message sent while the disk is full is refused in words and
    stays to be sent again."""
    from app_fixtures import recording_bridge_class

    from app.chat.controller import ChatController
    from app.conversations import store as S
    from app.settings.schema import AppSettings
    from core.engine import protocol as P

    store = Store(small_disk / "conversations.sqlite3")
    bridge = recording_bridge_class()()
    controller = ChatController(store, bridge, AppSettings())
    said: list[str] = []
    controller.message.connect(said.append)
    try:
        assert controller.send("Tell me a long story.")
        request_id = bridge.calls[-1][1]
        answer = "Once upon a time " * 20_000  # 340 kB: the database must grow to hold it
        filler = fill_disk(small_disk)
        bridge.handle_events([P.TokenChunk(request_id, answer, (1,)), P.Finished(request_id, "eos")])
        assert not controller.generating and controller.active is None
        shown = controller.messages.rows[-1]
        assert (shown.content, shown.status) == (answer, S.COMPLETE)
        assert any(
            "The answer is shown but not saved: could not save to the conversation database (the disk is "
            "full: free some space)" in line
            for line in said
        ), said
        assert not controller.send("And another one?")  # refused, in words: the input keeps it
        assert said[-1].startswith("Your message was not sent: could not save to the conversation database")
        filler.unlink()
        qtbot.waitUntil(lambda: not controller.unsaved, timeout=30_000)
        saved = store.message(shown.id)
        assert (saved.content, saved.status) == (answer, S.COMPLETE)
        assert said[-1] == "The answer that could not be saved is saved now."
        assert controller.send("And another one?")
    finally:
        controller.detach()
        store.close()
