"""The chat window as a new user meets it (the defects of issue 13, one test each, named by the behaviour):
start-up failures, the header, model paths, errors, a long prompt, the queue, quitting; without an engine
process except where the behaviour is about the process (start-up, quitting)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QFileDialog  # noqa: E402

from app.settings.schema import AppSettings  # noqa: E402
from app.settings.settings_page import SettingsPage  # noqa: E402
from core.engine import protocol as P  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, controller, quiet_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(90)]

ENTRY = "import sys, app.main; sys.exit(app.main.main([]))"


def app_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SPECEXEC_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    env.update(extra)
    return env


# Start-up failures, said on stderr -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_window_that_cannot_open_says_why_on_stderr(tmp_path):
    """No display (and on machines without libxcb-cursor0 etc., missing libraries): Qt aborts with signal 6
    after telling only the log file. The reason and what to do must reach the terminal."""
    done = subprocess.run(
        [sys.executable, "-c", ENTRY],
        env=app_env(tmp_path, QT_QPA_PLATFORM="xcb"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])  # a clean exit code, not signal 6
    assert "SpecExec Desktop cannot open its window" in done.stderr
    assert "sudo apt install" in done.stderr or "DISPLAY" in done.stderr
    log = (tmp_path / "data" / "logs" / "specexec-desktop.log").read_text()
    assert "cannot open its window" in log


def test_missing_libraries_are_named_with_the_packages_to_install():
    from app.system.library_check import install_advice, missing_from_ldd

    ldd = (
        "\tlibxcb-icccm.so.4 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n"
        "\tlibxcb-keysyms.so.1 => not found\n\tlibxcb-icccm.so.4 => not found\n"
    )
    assert missing_from_ldd(ldd) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    advice = install_advice(["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    assert "sudo apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1" in advice
    assert "dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms" in advice  # Fedora
    assert "pacman -S xcb-util-cursor xcb-util-wm xcb-util-keysyms" in advice  # Arch


@pytest.mark.slow
def test_unreadable_database_is_reported_on_stderr(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "conversations.sqlite3").write_bytes(b"this is not a database" * 100)
    done = subprocess.run(
        [sys.executable, "-c", ENTRY],
        env=app_env(tmp_path, QT_QPA_PLATFORM="offscreen"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "conversation database cannot be opened" in done.stderr


# The chat header and new chats ----------------------------------------------------------------------------


def test_header_shows_the_title_once_the_first_message_names_the_chat(qtbot, quiet_window):
    w = quiet_window
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert w.title_label.text() == "New chat"
    w.send("Which trains cross the Alps?")
    assert w.store.conversation(w.controller.conversation_id).title == "Which trains cross the Alps?"
    assert w.title_label.text() == "Which trains cross the Alps?"


def test_new_chat_reuses_the_empty_one(qtbot, quiet_window):
    w, c = quiet_window, quiet_window.controller
    for _ in range(3):
        qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert c.conversations.rowCount() == 1
    first = c.conversation_id
    w.send("hello")
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert c.conversations.rowCount() == 2 and c.conversation_id != first


# Model paths in the settings ------------------------------------------------------------------------------


def test_browse_picks_a_gguf_file_starting_in_the_models_folder(qtbot, tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    gguf = models / "tiny.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(models))
    dialog = SettingsPage(AppSettings())
    qtbot.addWidget(dialog)
    picker = dialog.target.file_dialog(folder=False)
    assert Path(picker.directory().absolutePath()) == models
    assert picker.fileMode() == QFileDialog.FileMode.ExistingFile and any("*.gguf" in f for f in picker.nameFilters())
    picker.selectFile(str(gguf))
    picker.accept()
    dialog.target.take(picker)
    assert dialog.target.text() == str(gguf)
    folders = dialog.draft.file_dialog(folder=True)
    assert folders.fileMode() == QFileDialog.FileMode.Directory and Path(folders.directory().absolutePath()) == models


def test_a_model_path_that_does_not_exist_is_refused_in_the_settings(qtbot, tmp_path):
    dialog = SettingsPage(AppSettings())
    qtbot.addWidget(dialog)
    saved = []
    dialog.saved.connect(saved.append)
    dialog.target.edit.setText(str(tmp_path / "no-such-model"))
    assert not dialog.accept() and not saved and dialog.error.isVisibleTo(dialog)
    assert "no-such-model" in dialog.error.text() and "not found" in dialog.error.text()
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    dialog.target.edit.setText(str(folder))
    dialog.draft.edit.setText("")
    assert dialog.accept() and saved[0].target == str(folder) and not dialog.error.isVisibleTo(dialog)
    # as Windows' "Copy as path" gives it, and the model's config.json picked for its folder
    for typed in (f'"{folder}"', f" '{folder}' ", str(folder / "config.json"), f'"{folder / "config.json"}"'):
        dialog.target.edit.setText(typed)
        assert dialog.accept() and saved[-1].target == str(folder), typed


# Errors in plain words -------------------------------------------------------------------------------------


def test_crash_banner_speaks_plainly(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events(
        [
            P.EngineStarted(pid=6506),
            P.StatusReport("ready", {"budget": 16}),
            P.Error(
                None,
                "engine_died",
                "the engine process (pid 6506) was killed by SIGKILL",
                "restart the engine to go on - the conversation is kept",
            ),
        ]
    )
    text = w.banner.label.text()
    plain = re.sub(r"<[^>]+>", " ", text)
    assert w.banner.isVisible() and "pid" not in plain and "6506" not in plain
    assert not re.search(r"[.!?]\s+[a-z]", plain), plain  # every sentence starts with a capital
    assert "out of memory" in plain  # SIGKILL from nowhere is most often the kernel's OOM killer
    assert "SIGKILL" in w.banner.details()  # the technical words are one click away


def test_an_engine_killed_while_loading_is_said_as_a_load_failure(qtbot, quiet_window, tmp_path):
    """The same words as `specexec chat` (core.engine.client.LOAD_DIED_HINT): the models could not be loaded,
    most likely for memory, with what to try; Restart loads again, Settings picks a smaller model."""
    w = quiet_window
    w.bridge.handle_events(
        [
            P.EngineStarted(pid=6507),
            P.StatusReport("loading", {}),
            P.LoadProgress("Loading the target model big-70b"),
            P.Error(
                None,
                "engine_died",
                "the engine process (pid 6507) was killed by SIGKILL",
                "the engine crashed or was killed (out of memory?); restart it to go on - the conversation is kept",
            ),
        ]
    )
    plain = re.sub(r"<[^>]+>", " ", w.banner.label.text())
    assert w.banner.isVisible() and "could not be loaded" in plain and "stopped while loading" in plain
    assert "out of memory" in plain and "smaller model" in plain and "close other programs" in plain
    assert "restart it to go on" not in plain and "interrupted" not in plain and "pid" not in plain
    assert not re.search(r"[.!?]\s+[a-z]", plain), plain
    assert "SIGKILL" in w.banner.details()
    assert w.banner.buttons["restart"].isVisible() and w.banner.buttons["settings"].isVisible()
    w.banner.grab().save(str(tmp_path / "load-died-banner.png"))


def test_a_long_load_error_reads_across_the_banner_with_its_actions_under_it(qtbot, quiet_window, tmp_path):
    """Beside its four buttons, a message such as the full drive's was a column a few words wide and twenty
    lines tall; the message now has the banner's width and the buttons sit in a row under it."""
    from core.engine.events import error_event
    from core.errors import DiskWriteError

    w = quiet_window
    w.resize(720, 720)
    error = DiskWriteError(
        f"the built-in model needs 1.0 GB free on the drive holding {tmp_path} for its one-time copy, and "
        "2.0 MB are free. Free some space there, then try again"
    )
    w.bridge.engine_failed.emit(error_event(None, error))
    qtbot.waitUntil(lambda: w.banner.isVisible() and w.banner.label.width() > 0)
    banner, label, retry = w.banner, w.banner.label, w.banner.buttons["retry"]
    assert "Nothing was left half-written." in label.text()
    assert label.width() > 0.9 * (banner.contentsRect().width() - 20)  # the width, less the margins
    assert retry.mapTo(banner, retry.rect().topLeft()).y() >= label.geometry().bottom()  # under the words
    assert label.height() < 6 * label.fontMetrics().lineSpacing()


def test_context_length_error_gives_its_advice_once(qtbot, controller):
    from conftest import make_word_tokenizer
    from core.engine.events import error_event
    from core.engine.session import fit_conversation
    from core.errors import ContextLengthError

    with pytest.raises(ContextLengthError) as raised:
        fit_conversation(make_word_tokenizer(), [{"role": "user", "content": " ".join(["w9"] * 50)}], 16, 4)
    controller.send("a long paste")
    event = error_event(controller.active.request_id, raised.value)
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events([event])
    from app.chat.message_words import error_text

    shown = error_text(controller.messages.rows[-1])
    assert shown.lower().count("shorten") == 1, shown
    assert shown[0].isupper()


def test_a_model_whose_scores_overflowed_says_what_to_do_in_the_app_s_words(qtbot, controller):
    """The engine's message names float16 and float32 (what the command line can change); the app says where
    its user can act: the Models page in the sidebar."""
    from app.chat.message_words import error_text
    from core.decoding.sampling import NON_FINITE_TOKEN, checked_token_ids
    from core.engine.events import error_event
    from core.errors import NumericalError

    with pytest.raises(NumericalError) as raised:
        checked_token_ids([NON_FINITE_TOKEN])
    controller.send("hello")
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events([error_event(controller.active.request_id, raised.value)])
    shown = error_text(controller.messages.rows[-1])
    assert "NaN or infinity" in shown and "under Models in the sidebar" in shown, shown


def test_a_chat_template_that_never_ends_says_where_to_act_and_is_not_regenerated(qtbot, controller, monkeypatch):
    """The engine stops the model's template and says so; the app adds where its user can act, and offers no
    Regenerate, which would only wait for the same template again."""
    from app.chat.message_words import error_text
    from conftest import make_word_tokenizer
    from core.engine.events import error_event
    from core.errors import ModelFormatError
    from core.text import chat_template
    from core.text.prompts import render_chat

    monkeypatch.setattr(chat_template, "TEMPLATE_SECONDS", 0.2)
    tokenizer = make_word_tokenizer()
    tokenizer.chat_template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(ModelFormatError) as raised:
        render_chat(tokenizer, [{"role": "user", "content": "hello"}])
    controller.send("hello")
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events([error_event(controller.active.request_id, raised.value)])
    shown = error_text(controller.messages.rows[-1])
    assert "did not finish writing the conversation" in shown and "Models page in the sidebar" in shown, shown
    assert not controller.can_regenerate()


# Reading a prompt, waiting in the queue --------------------------------------------------------------------


def test_a_long_prompt_shows_that_it_is_being_read(qtbot, controller):
    from app.chat.view import ChatView

    view = ChatView(controller.messages)
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    controller.send("x " * 10000)
    rid = controller.active.request_id
    widget = view.widgets[-1]
    assert "Waiting" in widget.progress_text()
    controller.bridge.handle_events([P.PromptStarted(rid, prompt_tokens=20480, reused_tokens=0)])
    qtbot.waitUntil(lambda: "20,480" in widget.progress_text(), timeout=2000)
    assert "Reading your message" in widget.progress_text()
    qtbot.waitUntil(lambda: bool(re.search(r"\b1 s\b", widget.progress_text())), timeout=3000)  # the seconds count up
    controller.bridge.handle_events([P.TokenChunk(rid, "Hi", (1,))])
    qtbot.waitUntil(lambda: widget.progress_text() == "", timeout=2000)
    # the speed of that read (20,480 tokens in a bit over a second) estimates the next long one
    rate = controller.prefill_tokens_per_s
    assert rate is not None and 20480 / 4 < rate < 20480 / 0.9
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events([P.Finished(rid, "eos", generated_tokens=1)])
    controller.send("y " * 20000)
    rid = controller.active.request_id
    controller.bridge.handle_events([P.PromptStarted(rid, prompt_tokens=81920, reused_tokens=0)])
    widget = view.widgets[-1]
    expected = round(81920 / rate)
    qtbot.waitUntil(lambda: f"of about {expected} s" in widget.progress_text(), timeout=2000)


def test_an_answer_queued_behind_api_requests_says_how_many(qtbot, controller):
    from app.chat.view import ChatView

    view = ChatView(controller.messages)
    qtbot.addWidget(view)
    view.show()
    controller.send("hello")
    rid = controller.active.request_id
    widget = view.widgets[-1]
    controller.bridge.handle_events([P.Queued(rid, position=2)])
    qtbot.waitUntil(lambda: "Waiting for 2 other answers to finish" in widget.progress_text(), timeout=2000)
    controller.bridge.handle_events([P.Queued(rid, position=1)])
    qtbot.waitUntil(lambda: "Waiting for 1 other answer to finish" in widget.progress_text(), timeout=2000)
    controller.bridge.handle_events([P.PromptStarted(rid, prompt_tokens=12, reused_tokens=0)])
    qtbot.waitUntil(lambda: widget.progress_text().startswith("Reading your message (12 tokens)"), timeout=2000)


# Token counts ----------------------------------------------------------------------------------------------


def test_the_answer_counts_the_engines_tokens(qtbot, controller):
    controller.send("count")
    rid = controller.active.request_id
    events = [P.TokenChunk(rid, f" t{i}", (i,)) for i in range(3)] + [P.PassStats(rid, 5, 8, 1.0, 1.0, 2500.0, 9)] * 3
    with qtbot.waitSignal(controller.answer_finished):
        controller.bridge.handle_events(events + [P.Finished(rid, "eos", prompt_tokens=4, generated_tokens=13)])
    stats = controller.messages.rows[-1].stats
    assert stats["tokens"] == 13 and stats["generated_tokens"] == 13
    assert stats["tokens_per_s"] == pytest.approx(13 / 0.006, rel=0.01)


# A failed answer -------------------------------------------------------------------------------------------


def test_a_failed_answer_shows_the_error_and_cannot_be_regenerated_into_the_same_error(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", {"budget": 16})])
    w.send("too long")
    rid = w.controller.active.request_id
    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events(
            [
                P.Error(
                    rid,
                    "context_length",
                    "the conversation is 9000 tokens but the model's context window is 8192",
                    "shorten the message",
                )
            ]
        )
    answer = w.chat_view.widgets[-1]
    assert answer.body.toPlainText().strip() != "…"
    assert "context window" in answer.body.toPlainText()
    assert not answer.regenerate_button.isEnabled() and not w.regenerate_action.isEnabled()
    w.send("short")  # a new message can be answered again
    assert w.controller.generating


# The logs folder -------------------------------------------------------------------------------------------


def test_open_logs_folder_shows_the_path_where_nothing_can_open_it(qtbot, quiet_window, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no xdg-open, no file manager
    quiet_window.open_logs_folder()
    box = quiet_window.logs_dialog
    assert box is not None and box.isVisible()
    assert str(quiet_window.paths.log_dir) in box.text.text()
    box.close()


# The status bar; quitting ----------------------------------------------------------------------------------


def test_status_bar_starts_clean_in_a_new_chat_and_hides_the_tree_without_a_draft(qtbot, quiet_window):
    w, c = quiet_window, quiet_window.controller
    w.send("hello")
    rid = c.active.request_id
    with qtbot.waitSignal(c.answer_finished):
        w.bridge.handle_events(
            [
                P.TokenChunk(rid, "Hi", (1,)),
                P.PassStats(rid, 3, 8, 1.0, 1.0, 1500.0, 16),
                P.Finished(rid, "eos", generated_tokens=3),
            ]
        )
    details = w.status_line.details
    assert details.speed_label.text().startswith("About ") and w.status_line.speed_button.text().startswith("About ")
    assert "tokens/s" in details.speed_label.text() and "tokens per second" in w.status_line.speed_button.toolTip()
    qtbot.mouseClick(w.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert details.speed_label.text().startswith("No answer yet") and w.status_line.speed_button.text() == "Speed"
    assert not details.chart.bars()
    w.apply_settings(AppSettings(target="builtin", draft=""))
    assert details.budget_label.isHidden() and details.chart.isHidden()
    w.apply_settings(AppSettings())
    assert not details.budget_label.isHidden()


@pytest.mark.slow
def test_quitting_from_the_terminal_closes_cleanly(tmp_path):
    """Ctrl-C (SIGINT) or SIGTERM in the terminal quits like Menu > Quit: the engine is shut down, nothing
    leaks ("leaked semaphore objects"), no traceback, exit code 0. Both apps run at once (time)."""
    apps = {}
    for sent in (signal.SIGINT, signal.SIGTERM):
        home = tmp_path / sent.name
        (home / "data" / "config").mkdir(parents=True)  # a model that fails to load at once: no long load
        (home / "data" / "config" / "settings.json").write_text('{"schema_version": 2, "target": "/no/such/model"}')
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY],
            env=app_env(home, QT_QPA_PLATFORM="offscreen"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        apps[sent] = (proc, home / "data" / "logs" / "specexec-desktop.log")
    deadline = time.monotonic() + 60
    for sent, (proc, log) in apps.items():
        while not (log.exists() and "engine started" in log.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "the app did not start its engine"
            time.sleep(0.2)
        proc.send_signal(sent)
    for sent, (proc, log) in apps.items():
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{sent.name} did not quit the app")
        assert proc.returncode == 0, err[-2000:]
        assert "leaked" not in err and "Traceback" not in err, err[-2000:]
        assert "exiting (0)" in log.read_text()


XCB_DRIVER = (
    "import sys\n"
    "from PySide6.QtCore import QTimer\n"
    "import app.main as m\n"
    "create = m.create_application\n"
    "def patched(argv):\n"
    "    a = create(argv)\n"
    "    def close():\n"
    "        shown = [w for w in a.topLevelWidgets() if w.isVisible() and w.windowTitle() == 'SpecExec Desktop']\n"
    "        print('PLATFORM', a.platformName(), 'WINDOWS', len(shown), flush=True)\n"
    "        shown[0].grab().save(sys.argv[1])\n"
    "        a.closeAllWindows()\n"
    "    QTimer.singleShot(2500, close)\n"
    "    return a\n"
    "m.create_application = patched\n"
    "sys.exit(m.main([]))\n"
)


@pytest.mark.slow
@pytest.mark.skipif(
    sys.platform != "linux" or not __import__("shutil").which("xvfb-run"), reason="needs xvfb-run (a virtual X display)"
)
def test_with_a_display_and_the_libraries_the_real_window_opens(tmp_path):
    """The other side of the check: on X11 (a virtual display here) with the libraries present, the app
    opens its window through the real xcb plugin; the check must not stop it."""
    from app.system.library_check import missing_xcb_libraries

    if missing_xcb_libraries():
        pytest.skip("this machine lacks the xcb libraries: the missing-library path is tested above")
    from app_fixtures import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "real-xcb-window.png"
    (tmp_path / "data" / "config").mkdir(parents=True)  # no model load: the window is what is tested
    (tmp_path / "data" / "config" / "settings.json").write_text('{"schema_version": 2, "target": "/no/such/model"}')
    done = subprocess.run(
        ["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", sys.executable, "-c", XCB_DRIVER, str(shot)],
        env=app_env(tmp_path, QT_QPA_PLATFORM="xcb"),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "PLATFORM xcb WINDOWS 1" in done.stdout and shot.stat().st_size > 10_000
