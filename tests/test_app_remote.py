"""The app with a remote endpoint (offscreen, real widgets, real processes): from a fresh start a person adds
an OpenAI-compatible server in the model manager (checked before it is saved), chats with its model, stops
an answer (the server sees the client leave), regenerates; a killed server gives the banner, keeps the
partial answer marked interrupted, and Retry answers again once the server is back. The server is the
independent one (tests/other_openai_server.py), started as its own process."""

from __future__ import annotations

import os
import signal
import socket
import stat

import pytest
from PySide6.QtCore import Qt

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import process_alive, screenshot, tiny_settings  # noqa: E402

from app.conversations import store as S  # noqa: E402
from app.engine.bridge import CRASHED, READY  # noqa: E402
from app.settings.schema import AppSettings, RemoteEndpoint, load_settings, save_settings  # noqa: E402
from app.window.main_window import MainWindow  # noqa: E402
from other_openai_server import answer_words  # noqa: E402
from remote_servers import other_server, server_state  # noqa: E402
from test_app_window import styled  # noqa: E402,F401 - the app's look (light theme) for the screenshots

pytest_plugins = ["app_fixtures"]
pytestmark = [pytest.mark.qt, pytest.mark.timeout(240)]

KEY = "sk-box-key"
TIMEOUT_MS = 60_000


@pytest.fixture()
def keys_in_a_file(app_paths, monkeypatch):
    """No OS keyring here: endpoint keys go to the config folder's file (as on a headless Linux box)."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def open_window(qtbot, app_paths) -> MainWindow:
    window = MainWindow(app_paths, confirm_delete=False)  # owns its bridge: a real engine process
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def add_server(qtbot, window: MainWindow, name: str, address: str, key: str, model: str):
    """Through the model manager's Connections tab, as a person does: Add a server, type, Check, Save, Use."""
    manager = window.open_model_manager()
    manager.show_connections()
    page = manager.connections
    assert page.names() == [""] and page.use_button.text() == "In use"  # this computer, in use
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    dialog = page.dialog
    assert not dialog.save_button.isEnabled()  # nothing is saved unchecked
    qtbot.keyClicks(dialog.name_edit, name)
    qtbot.keyClicks(dialog.address_edit, address)
    qtbot.keyClicks(dialog.key_edit, "sk-wrong")
    qtbot.mouseClick(dialog.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "refused the API key" in dialog.outcome.text.text(), timeout=TIMEOUT_MS)
    assert not dialog.save_button.isEnabled() and dialog.outcome.details_button.isVisible()
    dialog.key_edit.clear()
    qtbot.keyClicks(dialog.key_edit, key)
    qtbot.mouseClick(dialog.check_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(dialog.save_button.isEnabled, timeout=TIMEOUT_MS)
    assert dialog.outcome.text.text().startswith("Connected: 3 models.")
    dialog.model_box.setCurrentText(model)
    screenshot(dialog, "remote-1-add-server")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert page.selected_name() == name and "Saved" in manager.message.text()
    qtbot.waitUntil(lambda: page.model_box.count() == 3, timeout=TIMEOUT_MS)  # its models, listed again
    assert page.model_box.currentText() == model
    screenshot(manager, "remote-2-connections-tab")
    qtbot.mouseClick(page.use_button, Qt.MouseButton.LeftButton)
    return manager


def send(qtbot, window: MainWindow, text: str, wait: bool = True) -> None:
    qtbot.keyClicks(window.input, text)
    if wait:
        with qtbot.waitSignal(window.controller.answer_finished, timeout=TIMEOUT_MS):
            qtbot.keyClick(window.input, Qt.Key.Key_Return)
    else:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)


def rows(window: MainWindow) -> list[tuple[str, str]]:
    return [(m.role, m.status) for m in window.controller.messages.rows]


@pytest.mark.slow  # the window's engine and another OpenAI server in child processes
def test_add_a_server_chat_stop_and_regenerate(qtbot, app_paths, tiny_models, keys_in_a_file):
    save_settings(tiny_settings(*tiny_models), app_paths.settings_file)
    with other_server("--key", KEY, "--token-delay", "0.03") as (url, _process):
        window = open_window(qtbot, app_paths)
        qtbot.waitUntil(lambda: window.bridge.status.state == READY, timeout=90_000)
        engine_pid = window.bridge.status.pid
        assert engine_pid and process_alive(engine_pid)
        assert window.status_line.state_text().endswith("on this computer")

        manager = add_server(qtbot, window, "GPU box", url.removesuffix("/v1"), KEY, "beta-13b")
        qtbot.waitUntil(
            lambda: window.bridge.status.state == READY and "remote" in window.bridge.status.models, timeout=TIMEOUT_MS
        )
        assert manager.message.text() == "Now using beta-13b on GPU box."  # not "Switching…" once connected
        assert manager.connections.use_button.text() == "In use" and not manager.connections.use_button.isEnabled()
        window.close_model_manager()
        saved = load_settings(app_paths.settings_file)
        assert saved.connection == "GPU box" and saved.endpoints == [RemoteEndpoint("GPU box", url, "beta-13b")]
        assert KEY not in app_paths.settings_file.read_text()  # the key is not in the settings file...
        keys = app_paths.config_dir / "endpoint-keys.json"
        assert KEY in keys.read_text() and stat.S_IMODE(keys.stat().st_mode) == 0o600  # ...but kept apart
        qtbot.waitUntil(lambda: not process_alive(engine_pid), timeout=20_000)  # the local engine was let go
        assert window.status_line.state_text() == "Ready · beta-13b on GPU box"
        chip = window.model_button.text().removesuffix("  ▾")  # the name, elided to the header's room
        assert "beta-13b on GPU box".startswith(chip.removesuffix("…")) and chip.startswith("beta-13b")
        assert not window.status_line.details.uses_draft  # no tree on a server

        send(qtbot, window, "hello from the app")
        answer = window.controller.messages.rows[-1]
        settings = window.controller.conversation_settings()
        sent = server_state(url)["last_request"]
        assert sent["model"] == "beta-13b" and sent["max_tokens"] == settings.max_tokens == 24
        assert sent["temperature"] == settings.temperature and sent["top_p"] == settings.top_p
        words, reason = answer_words(sent)
        assert answer.content == " ".join(words) and answer.status == S.COMPLETE
        assert answer.stats["reason"] == ("length" if reason == "length" else "eos")
        screenshot(window, "remote-3-chat")

        long_conversation = window.controller.conversation_settings()
        long_conversation.max_tokens = 400
        window.controller.set_conversation_settings(long_conversation)
        before = server_state(url)
        send(qtbot, window, "a long answer please", wait=False)
        echo = "You said: a long answer please."  # the answer's first words: wait until they are on screen
        qtbot.waitUntil(lambda: window.controller.messages.rows[-1].content.startswith(echo), timeout=TIMEOUT_MS)
        with qtbot.waitSignal(window.controller.answer_finished, timeout=TIMEOUT_MS) as ended:
            qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)  # Stop
        assert ended.args[1] == S.STOPPED
        stopped = window.controller.messages.rows[-1]
        assert stopped.content.startswith(echo) and len(stopped.content.split()) < 400
        qtbot.waitUntil(lambda: server_state(url)["active"] == 0, timeout=3_000)  # the server let it go
        assert server_state(url)["disconnected"] == before["disconnected"] + 1

        long_conversation.max_tokens = 24  # the new answer runs to its end: 400 words would take 12 s
        window.controller.set_conversation_settings(long_conversation)
        with qtbot.waitSignal(window.controller.answer_finished, timeout=TIMEOUT_MS) as ended:
            qtbot.mouseClick(window.chat_view.last_answer().regenerate_button, Qt.MouseButton.LeftButton)
        assert ended.args[1] == S.COMPLETE
        new = window.controller.messages.rows[-1]
        assert new.id != stopped.id and (new.alt_index, new.alt_count) == (1, 2)
        assert window.store.message(stopped.id).content == stopped.content  # the stopped answer is kept
        window.close()


@pytest.mark.slow  # the window's engine and another OpenAI server in child processes
def test_a_killed_server_gives_the_banner_and_retry_answers_again(qtbot, app_paths, tiny_models, keys_in_a_file):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    settings = tiny_settings(*tiny_models)
    settings.connection = "GPU box"
    settings.endpoints = [RemoteEndpoint("GPU box", url, "alpha-7b")]
    settings.defaults.max_tokens = 400
    save_settings(settings, app_paths.settings_file)
    with other_server("--port", str(port), "--token-delay", "0.05") as (_url, process):
        window = open_window(qtbot, app_paths)  # a start with a server in use: no engine process at all
        qtbot.waitUntil(lambda: window.bridge.status.state == READY, timeout=TIMEOUT_MS)
        assert window.bridge.status.pid is None and window.bridge.status.models["max_context"] == 8192
        send(qtbot, window, "a long story", wait=False)
        echo = "You said: a long story."
        qtbot.waitUntil(lambda: window.controller.messages.rows[-1].content.startswith(echo), timeout=TIMEOUT_MS)
        with qtbot.waitSignal(window.controller.answer_finished, timeout=10_000) as ended:
            os.kill(process.pid, signal.SIGKILL)
    assert ended.args[1] == S.INTERRUPTED
    assert window.bridge.status.state == CRASHED
    assert window.banner.isVisible() and "Lost the connection to GPU box" in window.banner.label.text()
    assert window.banner.buttons["retry_answer"].isVisible() and window.banner.buttons["connections"].isVisible()
    cut = window.controller.messages.rows[-1]
    assert cut.status == S.INTERRUPTED and cut.content.startswith(echo)
    assert window.store.message(cut.id).content == cut.content
    assert window.chat_view.widgets[-1].footer.text().startswith("Interrupted: cut off")
    screenshot(window, "remote-4-connection-lost")

    with other_server("--port", str(port), "--token-delay", "0.001"):  # the server is back
        with qtbot.waitSignal(window.controller.answer_finished, timeout=TIMEOUT_MS) as ended:
            qtbot.mouseClick(window.banner.buttons["retry_answer"], Qt.MouseButton.LeftButton)
        assert ended.args[1] == S.COMPLETE and not window.banner.isVisible()
        again = window.controller.messages.rows[-1]
        assert again.content.startswith("You said: a long story.") and (again.alt_index, again.alt_count) == (1, 2)
        assert window.store.message(cut.id).status == S.INTERRUPTED  # the cut answer is still there to flip to
        assert window.bridge.status.state == READY
        window.close()


@pytest.mark.slow  # the window's engine and another OpenAI server in child processes
def test_a_server_that_cannot_be_used_at_start_says_why(qtbot, app_paths, tiny_models, keys_in_a_file):
    settings = tiny_settings(*tiny_models)
    settings.connection = "GPU box"
    settings.endpoints = [RemoteEndpoint("GPU box", f"http://127.0.0.1:{free_port()}/v1", "alpha-7b")]
    save_settings(settings, app_paths.settings_file)
    window = open_window(qtbot, app_paths)
    qtbot.waitUntil(window.banner.isVisible, timeout=TIMEOUT_MS)
    text = window.banner.label.text()
    assert "GPU box cannot be used" in text and "nothing is listening" in text and "server is running" in text
    assert window.banner.buttons["connections"].isVisible()
    window.close()


def test_saved_endpoints_from_a_hand_edited_file_are_checked(tmp_path):
    path = tmp_path / "settings.json"
    settings = AppSettings(
        connection="Gone",
        endpoints=[
            RemoteEndpoint("Box", "192.168.1.20:8765", "m"),
            RemoteEndpoint("Box", "http://other:1/v1"),
            RemoteEndpoint("", "http://x:1/v1"),
            RemoteEndpoint("Evil", "file:///etc/passwd"),
            RemoteEndpoint("Creds", "http://u:p@h/v1"),
        ],
    )
    save_settings(settings, path)
    loaded = load_settings(path)
    assert loaded.endpoints == [RemoteEndpoint("Box", "http://192.168.1.20:8765/v1", "m")]
    assert loaded.connection == "" and loaded.load_request().target == "builtin"  # unknown connection: this PC
    text = path.read_text().replace('"endpoints": [', '"endpoints": [42, "x", ')
    path.write_text(text)
    assert load_settings(path).endpoints == [RemoteEndpoint("Box", "http://192.168.1.20:8765/v1", "m")]
