"""Tools in the chat window (issue 43), driven like a user: a REAL engine process running a scripted model that
writes a Hermes tool call (tests/tool_models.py), a REAL MCP server (tests/mcp_test_server.py over stdio,
named in the app's mcp.json) whose log says which calls really ran, and the real window offscreen: the call's
card asks, Esc denies, Allow once runs it, the result folds in the card and goes back to the model, Stop closes
an open question; the rounds are stored with the chat, sent back as tool messages, and exported."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QScrollArea

from app.chat import tool_turns as T
from app.conversations import store as S
from app.conversations.export import to_json, to_markdown
from app.conversations.store import Store
from app.engine.bridge import READY
from app.settings.schema import save_settings
from app.window.main_window import MainWindow

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import ENGINE_TIMEOUT_S, screenshot, tiny_settings, wait_for  # noqa: E402
from tool_models import ANSWER_TEXT, save_tool_pair  # noqa: E402

pytest_plugins = ["app_fixtures"]
pytestmark = [pytest.mark.qt, pytest.mark.timeout(400)]

SERVER = str(Path(__file__).parent / "mcp_test_server.py")
WAIT_MS = 120_000


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return save_tool_pair(tmp_path_factory.mktemp("tool-model"))


def settings_for(pair):
    return dataclasses.replace(tiny_settings(*pair, max_tokens=24), context_length=2048)


@pytest.fixture(scope="module")
def engine(qapp, pair):
    from app.engine.bridge import EngineBridge
    from core.engine.client import EngineClient

    bridge = EngineBridge(lambda: EngineClient(torch_threads=1, start_timeout=ENGINE_TIMEOUT_S))
    bridge.start(settings_for(pair).load_request())
    try:
        wait_for(lambda: bridge.status.state in (READY, "crashed", "failed"), what="the engine to load")
        assert bridge.status.state == READY and bridge.status.models["tool_call_format"] == "hermes", bridge.status
        yield bridge
    finally:
        bridge.shutdown()


@pytest.fixture()
def window(qtbot, app_paths, pair, engine, tmp_path):
    """A window whose mcp.json names the test server; the calls that ran are in window.calls_log."""
    log = tmp_path / "calls.log"
    (app_paths.config_dir / T.TOOLS_CONFIG_NAME).write_text(
        json.dumps(
            {
                "mcpServers": {
                    "calc": {"command": sys.executable, "args": [SERVER, "stdio"], "env": {"MCP_TEST_LOG": str(log)}}
                }
            }
        )
    )
    save_settings(settings_for(pair), app_paths.settings_file)
    store = Store(app_paths.database)
    window = MainWindow(app_paths, store=store, bridge=engine, confirm_delete=False)
    qtbot.addWidget(window)
    window.resize(1100, 760)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.controller.tools_in_use(), timeout=WAIT_MS)  # the server started
    window.calls_log = log
    yield window
    window.close()
    store.close()


def ask(qtbot, window, text: str):
    """Send `text`; returns the card that asks about the model's call."""
    qtbot.keyClicks(window.input, text)
    with qtbot.waitSignal(window.controller.tool_call_waiting, timeout=WAIT_MS) as asked:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    message_id, call_id = asked.args
    widget = next(w for w in window.chat_view.widgets if w.message.id == message_id)
    card = widget.tool_calls.card(call_id)
    assert card is not None and card.isVisible() and card.buttons.isVisible()
    return card


def calls(window) -> list[str]:
    return window.calls_log.read_text().splitlines() if window.calls_log.exists() else []


def test_a_call_is_asked_about_denied_with_esc_then_allowed_and_its_result_folds_in_the_card(qtbot, window):
    card = ask(qtbot, window, "add two and three")
    assert card.title.text() == "Tool add · calc: wants to run: allow it?"
    assert json.loads(card.arguments.text()) == {"a": 2, "b": 3}
    assert window.controller.generating  # the answer waits for the user
    screenshot(window, "tool-call-asking")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.keyClick(card, Qt.Key.Key_Escape)
    answer = window.controller.messages.rows[-1]
    assert (answer.content, answer.status) == (ANSWER_TEXT, S.COMPLETE)  # the model was told, and answered
    [denied] = answer.tool_rounds[0]["calls"]
    assert (denied["status"], denied["decision"]) == (T.DENIED, "deny") and calls(window) == []

    card = ask(qtbot, window, "and again")  # allowed once: asked again the next time
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.mouseClick(card.allow_once, Qt.MouseButton.LeftButton)
    assert calls(window) == ["add 2 3"]
    answer = window.controller.messages.rows[-1]
    [done] = answer.tool_rounds[0]["calls"]
    assert (done["status"], done["result"], done["is_error"], answer.content) == (T.DONE, "5", False, ANSWER_TEXT)
    card = window.chat_view.last_answer().tool_calls.card(done["id"])
    assert card.title.text() == "Tool add · calc: done" and not card.buttons.isVisible()
    assert card.result_toggle.isVisible() and not card.result.isVisible()  # folded
    qtbot.mouseClick(card.result_toggle, Qt.MouseButton.LeftButton)
    assert card.result.isVisible() and card.result.toPlainText() == "5"
    assert "tool_call" not in window.chat_view.last_answer().body.toPlainText()  # the call is a card, not words
    screenshot(window, "tool-call-done")

    # stored with the chat, and sent back to the model as what it saw
    conversation = window.controller.conversation_id
    stored = window.store.message(answer.id)
    assert stored.tool_rounds == answer.tool_rounds and stored.content == ANSWER_TEXT
    history = window.controller.history(conversation)
    assert history[-3]["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert history[-2] == {"role": "tool", "tool_call_id": done["id"], "name": "add", "content": "5"}
    assert history[-1] == {"role": "assistant", "content": ANSWER_TEXT}
    messages = window.store.messages(conversation)
    exported = json.loads(to_json(window.store.conversation(conversation), messages))
    assert exported["messages"][-1]["tool_rounds"][0]["calls"][0]["result"] == "5"
    markdown = to_markdown(window.store.conversation(conversation), messages)
    assert "<summary>Tool add (done)</summary>" in markdown and "<summary>Tool add (denied)</summary>" in markdown


def test_always_stops_asking_and_stop_closes_an_open_question(qtbot, window):
    card = ask(qtbot, window, "add")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.mouseClick(card.allow_always, Qt.MouseButton.LeftButton)
    asked = []
    window.controller.tool_call_waiting.connect(lambda *args: asked.append(args))
    qtbot.keyClicks(window.input, "once more")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    assert asked == [] and calls(window) == ["add 2 3", "add 2 3"]

    window.controller.new_conversation()  # "always" holds for its chat only
    card = ask(qtbot, window, "in a new chat")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)  # Stop
    answer = window.controller.messages.rows[-1]
    assert answer.status == S.STOPPED and answer.tool_rounds[0]["calls"][0]["status"] == T.STOPPED
    assert calls(window) == ["add 2 3", "add 2 3"] and not window.controller.generating
    assert window.chat_view.last_answer().tool_calls.card(card.record["id"]).title.text().endswith("stopped")


def test_settings_list_the_servers_tools_and_add_servers_checked_as_hostile_input(qtbot, window, app_paths):
    page = window.open_settings(has_gpu=False)
    section = page.tools
    assert section is not None and set(section.switches) == {"calc"}
    listed = [w.text() for w in section.findChildren(type(section.message)) if w.text().startswith("Tools: ")]
    assert listed and {"add", "echo", "hang"} <= set(listed[0].removeprefix("Tools: ").split(", "))
    section.paste.setPlainText(json.dumps({"mcpServers": {"evil": {"url": "file:///etc/passwd"}}}))
    qtbot.mouseClick(section.add_button, Qt.MouseButton.LeftButton)
    assert "http:// or https://" in section.message.text() and set(section.switches) == {"calc"}
    section.paste.setPlainText("https://tools.example.com/mcp")
    qtbot.mouseClick(section.add_button, Qt.MouseButton.LeftButton)
    section.paste.setPlainText("uvx mcp-server-fetch --ignore-robots-txt")
    qtbot.mouseClick(section.add_button, Qt.MouseButton.LeftButton)
    assert set(section.switches) == {"calc", "tools.example.com", "uvx"}
    section.switches["calc"].setChecked(False)
    page.findChild(QScrollArea).ensureWidgetVisible(section.add_button)
    screenshot(page, "settings-tools")
    qtbot.mouseClick(page.save_button, Qt.MouseButton.LeftButton)
    saved = json.loads((app_paths.config_dir / T.TOOLS_CONFIG_NAME).read_text())["mcpServers"]
    assert saved["calc"]["disabled"] is True and saved["tools.example.com"] == {"url": "https://tools.example.com/mcp"}
    assert saved["uvx"] == {"command": "uvx", "args": ["mcp-server-fetch", "--ignore-robots-txt"]}
