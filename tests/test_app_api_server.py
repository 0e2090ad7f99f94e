"""The app's API server switch: a real window (offscreen) sharing a real engine process (tiny pair) between
its chat and the OpenAI-compatible server, and the settings row that turns it on."""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.error
import urllib.request

import openai
import pytest

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import screenshot, tiny_settings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, session_bridge, session_tiny_models

pytestmark = [pytest.mark.qt, pytest.mark.timeout(300)]

KEY = "sk-app-test"


def _count_in_thread(url: str, result: dict, messages: list[dict]) -> threading.Thread:
    """A POST /tokenize from another thread (vLLM's count, at the server's root)."""

    def count() -> None:
        request = urllib.request.Request(
            url.removesuffix("/v1") + "/tokenize",
            data=json.dumps({"messages": messages}).encode(),
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                result["count"] = json.load(response)
        except Exception as error:  # noqa: BLE001 - reported by the test
            result["error"] = error

    thread = threading.Thread(target=count)
    thread.start()
    return thread


def _ask_in_thread(url: str, result: dict, **settings) -> threading.Thread:
    """An API request from another thread (the test's thread must keep running the Qt event loop)."""

    def ask() -> None:
        try:
            client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=120)
            result["answer"] = client.chat.completions.create(**settings)
        except Exception as error:  # noqa: BLE001 - reported by the test
            result["error"] = error

    thread = threading.Thread(target=ask)
    thread.start()
    return thread


@pytest.mark.slow
def test_the_app_answers_api_requests_and_its_chat_through_one_engine(
    qtbot, app_paths, session_bridge, session_tiny_models
):
    from app.window.main_window import MainWindow
    from app.conversations.store import COMPLETE

    settings = dataclasses.replace(
        tiny_settings(*session_tiny_models), api_server=True, api_server_port=0, api_server_key=KEY
    )
    window = MainWindow(paths=app_paths, settings=settings, bridge=session_bridge, confirm_delete=False)
    qtbot.addWidget(window)
    url = window.api_server.url
    assert url is not None and url.startswith("http://127.0.0.1:"), window.api_server.error

    result: dict = {}
    thread = _ask_in_thread(
        url, result, model="", messages=[{"role": "user", "content": "w10 w11"}], max_tokens=5, seed=5
    )
    window.send("w12 w13")  # the chat's answer and the API's request wait in the same engine queue
    qtbot.waitUntil(
        lambda: ("answer" in result or "error" in result) and not window.controller.generating, timeout=120_000
    )
    thread.join(10)
    assert "error" not in result, result.get("error")
    answer = result["answer"]
    assert answer.usage.completion_tokens == 5 and answer.choices[0].finish_reason == "length"
    assert answer.choices[0].message.content and answer.specexec["method"] == "auto"  # the app's default
    assert answer.specexec["chosen"]["method"] in ("sequential", "specexec") and answer.specexec["chosen"]["reason"]
    chat = [m for m in window.controller.messages.rows if m.role == "assistant"]
    assert len(chat) == 1 and chat[0].status == COMPLETE and chat[0].content
    counted: dict = {}  # the same messages counted by the app's engine before an answer: what the answer read
    thread = _count_in_thread(url, counted, [{"role": "user", "content": "w10 w11"}])
    qtbot.waitUntil(lambda: bool(counted), timeout=60_000)
    thread.join(10)
    assert counted.get("count") == {"count": answer.usage.prompt_tokens, "max_model_len": 4096}, counted

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
    assert KEY not in window.diagnostics(with_gpu=False)  # bug reports never carry the key

    window.apply_settings(dataclasses.replace(settings, api_server=False))  # the switch turns it off
    assert window.api_server.url is None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=5)


@pytest.mark.slow
def test_with_the_key_turned_off_any_client_is_answered(qtbot, app_paths, session_bridge, session_tiny_models):
    from app.window.main_window import MainWindow

    settings = dataclasses.replace(
        tiny_settings(*session_tiny_models), api_server=True, api_server_port=0, api_server_require_key=False
    )
    window = MainWindow(paths=app_paths, settings=settings, bridge=session_bridge, confirm_delete=False)
    qtbot.addWidget(window)
    result: dict = {}
    thread = _ask_in_thread(
        window.api_server.url, result, model="", max_tokens=3, messages=[{"role": "user", "content": "w20"}]
    )  # its key is not checked
    qtbot.waitUntil(lambda: "answer" in result or "error" in result, timeout=120_000)
    thread.join(10)
    assert "error" not in result, result.get("error")
    assert result["answer"].usage.completion_tokens == 3


@pytest.mark.slow
def test_a_taken_port_is_reported_not_fatal(qtbot, app_paths, session_bridge, session_tiny_models):
    import socket

    from app.window.main_window import MainWindow

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        settings = dataclasses.replace(
            tiny_settings(*session_tiny_models),
            api_server=True,
            api_server_port=taken.getsockname()[1],
            api_server_key=KEY,
        )
        window = MainWindow(paths=app_paths, settings=settings, bridge=session_bridge, confirm_delete=False)
        qtbot.addWidget(window)
        assert window.api_server.url is None and "already in use" in window.api_server.error
        assert "already in use" in window.toast.text()
    finally:
        taken.close()


@pytest.mark.slow
def test_the_apps_own_api_server_is_refused_as_a_connection(qtbot, app_paths, session_bridge, session_tiny_models):
    """Using it would shut the engine it answers from: it is refused in words, before anything is saved."""
    from app.engine.connections import own_api_server_words
    from app.window.main_window import MainWindow

    settings = dataclasses.replace(
        tiny_settings(*session_tiny_models), api_server=True, api_server_port=0, api_server_key=KEY
    )
    window = MainWindow(paths=app_paths, settings=settings, bridge=session_bridge, confirm_delete=False)
    qtbot.addWidget(window)
    port = window.api_server.url.rsplit(":", 1)[1].split("/")[0]
    page = window.open_model_manager().show_connections().connections
    dialog = page.add_dialog()
    for address in (f"127.0.0.1:{port}", f"http://localhost:{port}/v1", f"http://[::1]:{port}/v1"):
        dialog.name_edit.setText("Myself")
        dialog.address_edit.setText(address)
        dialog.key_edit.setText(KEY)
        dialog.check()
        words = dialog.outcome.text.text()
        assert "this app's own API server" in words and f"port {port}" in words, (address, words)
        assert not dialog.save_button.isEnabled() and dialog.check_button.isEnabled()  # nothing was tried
    assert own_api_server_words(f"http://192.168.1.20:{port}/v1", window.api_server.url) is None  # another PC
    assert own_api_server_words(f"http://127.0.0.1:{int(port) + 1}/v1", window.api_server.url) is None
    assert own_api_server_words(f"http://127.0.0.1:{port}/v1", None) is None  # the server is off: not ours
    dialog.close()


def test_settings_row_shows_a_key_to_copy_and_saves_the_switch(qtbot, session_tiny_models):
    from PySide6.QtGui import QGuiApplication

    from app.settings.settings_page import SettingsPage

    settings = tiny_settings(*session_tiny_models)
    assert settings.api_server is False  # off by default
    dialog = SettingsPage(settings)
    qtbot.addWidget(dialog)
    row = dialog.api_server
    assert row.key.text() == "" and dialog.values() == settings  # an untouched dialog changes nothing
    assert not row.port.isEnabled() and not row.copy_button.isEnabled()
    row.enabled.setChecked(True)
    key = row.key.text()
    assert key.startswith("sk-specexec-") and len(key) > 30  # made when the server is turned on
    assert row.port.isEnabled() and row.copy_button.isEnabled()
    dialog.show()
    screenshot(dialog, "settings_api_server")
    row.copy_button.click()
    assert QGuiApplication.clipboard().text() == key
    row.port.setText("9123")
    assert "http://127.0.0.1:9123/v1" in row.address.text()
    values = dialog.values()
    assert (values.api_server, values.api_server_port, values.api_server_require_key, values.api_server_key) == (
        True,
        9123,
        True,
        key,
    )
    row.new_key_button.click()
    assert row.key.text() != key
    row.require_key.setChecked(False)
    assert not row.copy_button.isEnabled() and dialog.values().api_server_require_key is False


def test_the_apps_health_says_when_its_engine_cannot_answer():
    """/health of the app's server follows the app's engine: down (with what happened) when it crashed, loading
    while it starts, ready otherwise (the route answers 503 for all but ready: test_serve_faults.py)."""
    from app.api.server import engine_health
    from app.engine.bridge import CRASHED, GENERATING, LOADING, READY, EngineStatus

    crashed = engine_health(EngineStatus(CRASHED, message="the engine process (pid 7) was killed by SIGKILL"))
    assert crashed.state == "down" and "killed by SIGKILL" in crashed.message and "restart it" in crashed.message
    assert engine_health(EngineStatus(LOADING)).state == "loading"
    assert engine_health(EngineStatus(READY)).state == engine_health(EngineStatus(GENERATING)).state == "ready"
