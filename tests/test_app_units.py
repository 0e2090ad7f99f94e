"""The app's parts without an engine process: markdown helpers, the bridge (real QThread, fake client), the
chat controller's streaming throttle and periodic saves, first run, sidebar operations, dialogs, theme,
diagnostics and logs, accessibility, and the no-torch rule."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QPalette  # noqa: E402
from PySide6.QtWidgets import QAbstractButton, QLineEdit, QPlainTextEdit  # noqa: E402

from app.conversations import store as S  # noqa: E402
from app.engine.bridge import CRASHED, FAILED, GENERATING, LOADING, READY, EngineBridge  # noqa: E402
from app.chat.markdown import Segment, code_blocks, segments  # noqa: E402
from app.settings.schema import BudgetMode, ConversationSettings, Offload, Theme, load_settings  # noqa: E402
from app.settings.chat_panel import ChatSettingsPanel  # noqa: E402
from app.settings.settings_page import SettingsPage  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")  # it is also a plugin (pytest_plugins below)
from app_fixtures import FakeClient, screenshot  # noqa: E402
from core.engine import protocol as P  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, controller, quiet_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


@pytest.mark.slow
def test_app_never_imports_torch():
    code = "import sys, app.main, app.window.main_window; sys.exit(1 if 'torch' in sys.modules else 0)"
    env = {"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode == 0


def test_void_qt_calls_do_not_leak_references_to_none(qapp):
    """PySide6-Essentials 6.12.0 drops a reference to None per void call; on Python 3.11 that aborts the
    app ("Fatal Python error: none_dealloc") minutes into a streamed answer. The pin in pyproject.toml
    (6.11.3) has no leak; this guards it."""
    from PySide6.QtWidgets import QLabel

    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(1000):
        label.setText("x")
    assert sys.getrefcount(None) >= before


# ----------------------------------------------------------------------------------------------------------
# Markdown


def test_code_blocks_segments_and_open_fences():
    text = "Intro\n```python\nprint(1)\n```\ntext\n~~~\nraw ``` inside\n~~~\n"
    blocks = code_blocks(text)
    assert [(b.language, b.code, b.end_line is not None) for b in blocks] == [
        ("python", "print(1)", True),
        ("", "raw ``` inside", True),
    ]
    assert segments(text) == [
        Segment("prose", "Intro"),
        Segment("code", "print(1)", "python"),
        Segment("prose", "text"),
        Segment("code", "raw ``` inside", ""),
    ]
    streaming = "Look:\n```js\nlet x = 1"
    assert code_blocks(streaming)[0].end_line is None
    assert segments(streaming) == [Segment("prose", "Look:"), Segment("code", "let x = 1", "js")]  # a card already
    assert segments("") == [] and segments("no code") == [Segment("prose", "no code")]


# ----------------------------------------------------------------------------------------------------------
# Bridge: real worker thread, fake client


def test_bridge_worker_thread_turns_events_into_signals(qtbot):
    client = FakeClient()
    bridge = EngineBridge(lambda: client)
    states: list[str] = []
    bridge.status_changed.connect(lambda s: states.append(s.state))
    tokens: list[tuple[str, str]] = []
    bridge.chunk.connect(lambda chunk: tokens.append((chunk.request_id, chunk.text)))
    try:
        bridge.start(P.Load(target="t", draft="d"))
        qtbot.waitUntil(lambda: bridge.status.state == READY, timeout=5000)
        assert states[:3] == ["starting", "loading", "loading"] and bridge.status.pid == 4242
        with qtbot.waitSignal(bridge.finished, timeout=5000) as finished:
            rid = bridge.generate([{"role": "user", "content": "hi"}], max_new_tokens=5)
            assert bridge.status.state == GENERATING
        assert finished.args[0].request_id == rid and "".join(t for r, t in tokens if r == rid) == "Hello world"
        assert bridge.status.state == READY
        bridge.cancel(rid)
        qtbot.waitUntil(lambda: ("cancel", rid) in client.calls, timeout=5000)
        with qtbot.waitSignal(bridge.notice, timeout=5000) as notice:  # a worker exception: a signal, not a dead thread
            client.fail_next_poll = True
        assert "poll exploded" in notice.args[0]
        with qtbot.waitSignal(bridge.finished, timeout=5000):  # the worker lives on
            bridge.generate([{"role": "user", "content": "again"}])
        # the client was only ever used on one thread, the worker's, never the UI thread
        assert len(client.threads) == 1 and threading.get_ident() not in client.threads
    finally:
        bridge.shutdown()
    assert ("shutdown",) in client.calls and bridge.status.state == "stopped"


def test_bridge_state_machine_for_crash_and_load_failure(qtbot):
    bridge = EngineBridge()
    failed: list[P.Error] = []
    bridge.request_failed.connect(failed.append)
    bridge.in_flight.add("r1")
    bridge.handle_events([P.EngineStarted(pid=7), P.LoadProgress("x", fraction=0.25)])
    assert (bridge.status.state, bridge.status.progress, bridge.status.describe()) == (
        LOADING,
        0.25,
        "Loading models 25%",
    )
    bridge.handle_events([P.StatusReport("ready", {"budget": 32})])
    assert bridge.status.state == GENERATING  # r1 is still in flight
    with qtbot.waitSignal(bridge.engine_failed) as crashed:
        bridge.handle_events(
            [P.Error(None, "engine_died", "the engine process (pid 7) was killed by SIGKILL", "restart")]
        )
    assert bridge.status.state == CRASHED and "SIGKILL" in bridge.status.message
    assert [(e.request_id, e.kind) for e in failed] == [("r1", "engine_died")] and crashed.args[0].kind == "engine_died"
    bridge.handle_events([P.Error(None, "model_not_found", "no such model /x", "check the path")])
    assert bridge.status.state == FAILED and bridge.status.hint == "check the path"
    assert bridge.describe()["last error"] == "no such model /x (check the path)"


# ----------------------------------------------------------------------------------------------------------
# Chat controller with a recording bridge: batching, periodic saves, stop, errors


def test_stream_is_batched_for_the_view_and_saved_while_it_streams(qtbot, controller, tmp_path):
    from app.chat.view import ChatView

    view = ChatView(controller.messages)
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    assert controller.send("w1 w2")
    _, rid, messages, settings = controller.bridge.calls[-1]
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "w1 w2"}]
    assert settings["budget"] == 9 and settings["max_new_tokens"] == 512
    updates = []
    controller.messages.dataChanged.connect(lambda *a: updates.append(time.perf_counter()))
    answer_id = controller.active.message_id
    peek = sqlite3.connect(tmp_path / "c.sqlite3")  # another connection: what a crash would leave on disk
    saved_while_streaming = []
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < 1.2:  # ~1000 chunks a second, far faster than the screen needs
        controller.bridge.handle_events(
            [P.TokenChunk(rid, f" t{sent + i}", (1,)) for i in range(5)] + [P.PassStats(rid, 5, 8, 1.0, 1.0, 2500.0, 9)]
        )
        sent += 5
        qtbot.wait(5)
        row = peek.execute("SELECT content, status FROM messages WHERE id = ?", (answer_id,)).fetchone()
        if row[0]:
            saved_while_streaming.append((time.perf_counter() - start, len(row[0]), row[1]))
    elapsed = time.perf_counter() - start
    assert len(updates) <= 33 * elapsed + 3, f"{len(updates)} view updates in {elapsed:.2f} s"
    assert view.widgets[1].render_count <= 10 * elapsed + 3  # markdown re-rendered at most ~10 times a second
    assert saved_while_streaming and saved_while_streaming[0][0] < 0.8 and saved_while_streaming[-1][2] == S.STREAMING
    assert len({n for _, n, _ in saved_while_streaming}) <= elapsed / 0.5 + 2  # saved about every 0.5 s, no more
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events(
            [P.TokenChunk(rid, " end", (1,)), P.Finished(rid, "length", generated_tokens=sent + 1)]
        )
    text = "".join(f" t{i}" for i in range(sent)) + " end"
    stored = controller.store.message(answer_id)
    assert (stored.content, stored.status) == (text, S.COMPLETE)
    assert stored.stats["tokens"] == sent + 1 == stored.stats["generated_tokens"]  # the engine's count
    assert stored.stats["budget"] == 9 and stored.stats["tokens_per_pass"] == pytest.approx(
        (sent + 1) / (sent / 5), abs=1e-3
    )
    assert view.widgets[1].body.toPlainText().split() == text.split()
    peek.close()


def test_stop_request_error_and_regenerate_without_an_engine(qtbot, controller):
    controller.send("first")
    rid = controller.active.request_id
    controller.bridge.handle_events([P.TokenChunk(rid, "partial", (1,))])
    controller.stop()
    assert controller.bridge.calls[-1] == ("cancel", rid)
    with qtbot.waitSignal(controller.answer_finished) as ended:
        controller.bridge.handle_events([P.Finished(rid, "cancelled")])
    assert ended.args[1] == S.STOPPED and controller.messages.rows[-1].content == "partial"
    assert controller.regenerate()
    rid2 = controller.active.request_id
    assert [m["content"] for m in controller.bridge.calls[-1][2]] == ["Be brief.", "first"]  # the old answer is gone
    with qtbot.waitSignal(controller.answer_finished) as ended:
        controller.bridge.handle_events([P.Error(rid2, "context_length", "too long", "start a new conversation")])
    assert ended.args[1] == S.FAILED
    assert controller.messages.rows[-1].stats["error"] == "too long"
    assert "Settings > Context length" in controller.messages.rows[-1].stats["hint"]  # the app's way out too
    assert not controller.send("  ") and [m.role for m in controller.messages.rows] == ["user", "assistant"]


# ----------------------------------------------------------------------------------------------------------
# Main window without an engine: first run, sidebar, dialogs, theme, diagnostics, accessibility


def test_first_run_loads_the_builtin_pair(quiet_window, app_paths):
    assert not app_paths.settings_file.exists()  # nothing configured
    (call,) = quiet_window.bridge.calls
    assert call == (
        "start",
        P.Load(
            target="builtin",
            draft="builtin-draft",
            dtype="auto",
            device="auto",
            offload="auto",
            vram_budget_gb=None,
            budget="auto",
            max_depth=32,
            expand=32,
            fit_context=True,
        ),
    )
    assert "tiny demo model" in quiet_window.chat_view.placeholder_text()  # the built-in model, said plainly
    assert quiet_window.chat_view.models_button.isVisibleTo(quiet_window.chat_view)
    assert quiet_window.status_line.state_text() == "Starting…"


def test_sidebar_new_rename_delete_and_search(qtbot, quiet_window):
    w, c = quiet_window, quiet_window.controller
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    first = c.conversation_id
    c.store.add_message(first, "user", "about trains")
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    second = c.conversation_id
    assert c.conversations.rowCount() == 2 and w.sidebar.current_id() == second
    index = c.conversations.index(c.conversations.row_of(first))
    assert c.conversations.setData(index, "Trains")  # what the list's inline editor (F2) does
    assert c.store.conversation(first).title == "Trains"
    qtbot.keyClicks(w.sidebar.search, "train")
    assert [c.conversations.id_at(r) for r in range(c.conversations.rowCount())] == [first]
    w.sidebar.search.clear()
    w.sidebar.view.setCurrentIndex(c.conversations.index(c.conversations.row_of(first)))
    assert c.conversation_id == first and w.title_label.text() == "Trains"
    w.sidebar.view.setFocus()
    qtbot.keyClick(w.sidebar.view, Qt.Key.Key_Delete)
    assert c.store.conversation(first) is None and c.conversations.rowCount() == 1
    assert c.conversation_id == second


def test_settings_page_and_chat_panel_round_trip_and_apply(qtbot, quiet_window, app_paths):
    dialog = SettingsPage(quiet_window.settings, has_gpu=True)
    qtbot.addWidget(dialog)
    assert dialog.values() == quiet_window.settings
    dialog.target.edit.setText("/models/big")
    dialog.offload.combo.setCurrentIndex(dialog.offload.combo.findData("on"))
    dialog.vram.set_value(10.5)
    dialog.theme.combo.setCurrentIndex(dialog.theme.combo.findData("dark"))
    new = dialog.values()
    assert (new.target, new.offload, new.vram_budget_gb, new.theme) == ("/models/big", Offload.ON, 10.5, Theme.DARK)
    quiet_window.apply_settings(new)
    assert load_settings(app_paths.settings_file) == new
    assert quiet_window.bridge.calls[-1] == ("load", new.load_request())
    conversation = ConversationSettings(
        system_prompt="Pirate.", temperature=1.1, top_p=0.5, max_tokens=77, budget_mode=BudgetMode.MANUAL, budget=48
    )
    per_chat = ChatSettingsPanel(conversation)
    qtbot.addWidget(per_chat)
    assert per_chat.values() == conversation
    per_chat.budget.combo.setCurrentIndex(0)  # Automatic
    assert per_chat.values().budget_mode == BudgetMode.AUTO
    quiet_window.controller.set_conversation_settings(conversation)
    assert quiet_window.controller.conversation_settings() == conversation


def test_settings_that_cannot_be_saved_still_apply_and_the_window_says_so(qtbot, quiet_window, app_paths, tmp_path):
    """A full disk or an unwritable folder: save_settings raised out of the Settings page's Save, so the rest
    of applying (the new models' load, the API server) never ran and nothing was said."""
    import dataclasses

    blocked = tmp_path / "a-file-where-the-folder-should-be"
    blocked.write_text("")
    quiet_window.paths = dataclasses.replace(app_paths, config_dir=blocked)  # no folder can be made here
    new = dataclasses.replace(quiet_window.settings, target="/models/big")
    quiet_window.apply_settings(new)
    assert quiet_window.settings == new and quiet_window.bridge.calls[-1] == ("load", new.load_request())
    said = quiet_window.toast.text()
    assert said.startswith("Your settings could not be saved (") and "they apply until you quit the app" in said
    assert str(blocked) in said


def test_a_cache_folder_that_cannot_be_written_does_not_keep_the_app_from_starting(qapp, tmp_path, monkeypatch):
    """The stylesheet's icons are written in the theme's colour to the user's cache folder (not the temporary
    folder, shared between a PC's users on Linux); a full or unwritable one raised out of the theme's start.
    The icon's own file stands in."""
    from app.theme.icons import icon_file
    from app.theme.manager import apply_colors
    from app.theme.tokens import LIGHT

    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path / "cache"))
    written = Path(icon_file("chevron-down", "#123456"))
    assert written.parent == tmp_path / "cache" / "icons" and 'stroke="#123456"' in written.read_text()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(blocked))
    path = icon_file("chevron-down", "#123456")
    assert path.endswith("icons/lucide/chevron-down.svg") and Path(path).is_file()
    sheet, palette = qapp.styleSheet(), qapp.palette()
    try:
        apply_colors(qapp, LIGHT)
        assert "chevron-down.svg" in qapp.styleSheet()
    finally:  # the application is shared by the tests that run after this one
        qapp.setStyleSheet(sheet)
        qapp.setPalette(palette)


def test_dark_theme_and_following_the_system_scheme(qtbot, qapp, quiet_window, monkeypatch):
    from app.theme.manager import ThemeManager

    style = qapp.style().name()
    qapp.setStyle("Fusion")
    theme = ThemeManager(qapp, Theme.DARK)
    try:
        assert theme.dark and qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
        assert "QFrame#userMessage" in qapp.styleSheet()
        quiet_window.controller.send("Dark mode?")
        screenshot(quiet_window, "05-dark-theme-no-engine")
        theme.apply(Theme.SYSTEM)  # offscreen reports no scheme: light
        assert not theme.dark and qapp.palette().color(QPalette.ColorRole.Window).lightness() > 150
        monkeypatch.setattr("app.theme.manager.system_is_dark", lambda: True)  # the OS switches to dark
        theme._system_changed(Qt.ColorScheme.Dark)
        assert theme.dark and qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
    finally:
        qapp.setStyleSheet("")
        qapp.styleHints().unsetColorScheme()
        qapp.setStyle(style)
        qapp.setPalette(QPalette())
        theme.deleteLater()


def test_diagnostics_logs_and_open_logs_folder(qtbot, quiet_window, app_paths, monkeypatch):
    from app.system.logging_setup import remove_logging, setup_logging

    handler = setup_logging(app_paths.log_file)
    try:
        assert setup_logging(app_paths.log_file) is handler  # idempotent
        logging.getLogger("app.test").warning("hello log")
        handler.flush()
        assert "hello log" in app_paths.log_file.read_text()
        assert handler.maxBytes > 0 and handler.backupCount > 0
    finally:
        remove_logging(handler)
    text = quiet_window.diagnostics(with_gpu=False)
    for needle in (
        "[Versions]",
        "PySide6",
        "python",
        "[Hardware]",
        "memory",
        "[Engine]",
        "state: starting",
        "target: builtin",
        str(app_paths.log_dir),
    ):
        assert needle in text
    opened = []
    monkeypatch.setattr(
        "app.window.file_actions.QDesktopServices.openUrl", lambda url: opened.append(url.toLocalFile())
    )
    quiet_window.open_logs_folder()
    assert opened == [str(app_paths.log_dir)]


def test_controls_have_accessible_names_and_keyboard_paths(qtbot, quiet_window):
    w = quiet_window
    w.controller.send("hello")
    w.controller.bridge.handle_events([P.Finished(w.controller.active.request_id, "eos")])
    unnamed = [
        type(x).__name__ + ":" + (x.text() if isinstance(x, QAbstractButton) else x.objectName())
        for kind in (QAbstractButton, QLineEdit, QPlainTextEdit)
        for x in w.findChildren(kind)
        if x.isVisible() and not x.accessibleName() and not isinstance(x.parent(), QLineEdit)
    ]
    assert unnamed == []
    assert w.chat_view.widgets[0].body.accessibleName() == "Your message"
    w.input.setFocus()
    qtbot.keyClick(w.input, Qt.Key.Key_Tab)
    assert w.focusWidget() is w.composer.attach_button  # Tab leaves the message box for the paperclip
    qtbot.keyClick(w.focusWidget(), Qt.Key.Key_Tab)
    assert w.focusWidget() is w.send_button  # then Send
    for text in ("Ctrl+N", "Ctrl+R", "Esc", "F2", "Ctrl+L", "Ctrl+F"):
        assert any(a.shortcut().toString() == text for a in w.findChildren(type(w.new_action))), text


@pytest.mark.slow
def test_entry_point_first_run_opens_the_window_and_writes_its_files(tmp_path):
    """`specexec-desktop`'s main() on an empty data dir: the set-up wizard first; cancelling it leaves the
    default settings (built-in pair) written, database created, log started, window shown; closing the window
    stops the engine it started."""
    driver = (
        "import sys\n"
        "from PySide6.QtCore import QTimer\n"
        "import app.main as m\n"
        "create = m.create_application\n"
        "def patched(argv):\n"
        "    a = create(argv)\n"
        "    def close():\n"
        "        names = [w.windowTitle() for w in a.topLevelWidgets() if w.isVisible()]\n"
        "        print('WINDOWS', names, flush=True)\n"
        "        [w.close() for w in a.topLevelWidgets()]\n"
        "    QTimer.singleShot(1500, close)\n"  # the wizard (modal, before the window)
        "    QTimer.singleShot(1500, lambda: QTimer.singleShot(1500, close))\n"  # then the main window
        "    return a\n"
        "m.create_application = patched\n"
        "sys.exit(m.main([]))\n"
    )
    env = {
        "QT_QPA_PLATFORM": "offscreen",
        "SPECEXEC_DATA_DIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    done = subprocess.run([sys.executable, "-c", driver], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "WINDOWS ['Set up SpecExec Desktop']" in done.stdout
    assert "WINDOWS ['SpecExec Desktop']" in done.stdout
    settings = load_settings(tmp_path / "config" / "settings.json")
    assert (settings.target, settings.draft) == ("builtin", "builtin-draft")
    assert (tmp_path / "conversations.sqlite3").exists()
    log = (tmp_path / "logs" / "specexec-desktop.log").read_text()
    assert "starting" in log and "exiting (0)" in log


def test_the_export_s_file_name_is_the_title_in_safe_letters_and_never_a_windows_device():
    from app.conversations.export import suggested_file_name

    assert suggested_file_name("Trip: Rome / Paris?", "markdown") == "Trip-Rome-Paris.md"
    assert suggested_file_name("../../etc", "json") == "etc.json"
    assert suggested_file_name("???", "markdown") == "conversation.md"
    assert suggested_file_name("Nul", "markdown") == "chat-Nul.md"  # NUL.md is the null device on Windows
    assert suggested_file_name("com1", "json") == "chat-com1.json"
    assert suggested_file_name("Console", "json") == "Console.json"


def test_the_gpu_line_of_the_diagnostics_comes_from_nvidia_smi_and_a_hung_one_is_said(tmp_path, monkeypatch):
    """A real program named nvidia-smi on PATH (this machine has no GPU): its answer is the line; one that
    hangs is given up on at the timeout, in words; none on PATH is said too."""
    from app.system.diagnostics import gpu_summary

    sleep = shutil.which("sleep")
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "NVIDIA GeForce RTX 4090, 24564 MiB, 580.95"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_summary() == "NVIDIA GeForce RTX 4090, 24564 MiB, 580.95"
    smi.write_text(f"#!/bin/sh\nexec {sleep} 30\n")
    hung = gpu_summary(timeout=0.5)
    assert hung.startswith("nvidia-smi failed: ") and "timed out" in hung, hung
    smi.unlink()
    assert gpu_summary() == "no NVIDIA GPU found (nvidia-smi not on PATH)"


def test_the_models_folder_is_picked_in_settings_and_the_models_page_looks_there(
    models_folder_unset, qtbot, quiet_window, app_paths, tmp_path, monkeypatch
):
    """Settings' Models folder: a folder that cannot be used is said and nothing is saved; a good one is saved,
    put in force (the Models page lists what is there) and the words say where the older models stayed."""
    from app.settings.schema import load_settings
    from core.system.env import MODELS_DIR_ENV, MODELS_DIR_FROM_SETTINGS_ENV
    from core.system.locations import models_dir

    window = quiet_window
    old_folder = models_dir()
    page = window.open_settings(has_gpu=False)
    assert page.models_folder.isEnabled() and page.models_folder.edit.placeholderText() == str(old_folder)
    (tmp_path / "a-file").write_text("")
    page.models_folder.edit.setText(str(tmp_path / "a-file"))
    assert page.accept() is False and "Models folder:" in page.error.text() and "is a file" in page.error.text()
    new_folder = tmp_path / "second drive" / "models"
    (new_folder / "my-model").mkdir(parents=True)
    (new_folder / "my-model" / "config.json").write_text('{"model_type": "llama"}')
    (new_folder / "my-model" / "model.safetensors").write_bytes(b"\x08" + bytes(7) + b"{}      ")
    # the model in use was in the old folder and has been moved into the new one already
    window.settings = dataclasses.replace(window.settings, target=str(old_folder / "my-model"), draft="")
    page.cancelled.emit()
    page = window.open_settings(has_gpu=False)
    page.models_folder.edit.setText(f'"{new_folder}"')  # as Windows' "Copy as path" puts it
    window.bridge.calls.clear()
    assert page.accept() is True
    assert window.settings.models_folder == str(new_folder) == load_settings(app_paths.settings_file).models_folder
    assert window.settings.target == str(new_folder / "my-model")  # followed, and loaded from there
    assert [call[1].target for call in window.bridge.calls if call[0] == "load"] == [str(new_folder / "my-model")]
    assert models_dir() == new_folder
    assert window.toast.text().startswith(f"Models are now kept in {new_folder}. Those downloaded before stay in")
    manager = window.open_model_manager()
    qtbot.waitUntil(lambda: any(entry.key == "model:my-model" for entry in manager.entries), timeout=20000)
    window.close_model_manager()

    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "portable"))  # given from outside the app: it wins
    monkeypatch.delenv(MODELS_DIR_FROM_SETTINGS_ENV)
    page = window.open_settings(has_gpu=False)
    assert not page.models_folder.isEnabled() and page.models_folder.text() == str(tmp_path / "portable")
    assert page.accept() is True and window.settings.models_folder == str(new_folder)  # the setting is kept
    assert models_dir() == tmp_path / "portable"

    monkeypatch.delenv(MODELS_DIR_ENV)  # the set-up wizard from the menu: a folder picked there, then cancelled
    wizard = window.open_wizard()
    assert wizard.state.keep_models_in(tmp_path / "third") is None
    wizard.reject()
    qtbot.waitUntil(lambda: window.settings.models_folder == str(tmp_path / "third"), timeout=5000)
    assert load_settings(app_paths.settings_file).models_folder == str(tmp_path / "third")
