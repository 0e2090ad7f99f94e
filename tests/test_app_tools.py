"""Tools in the chat window (issue 43), driven like a user: a REAL engine process running a scripted model that
writes a Hermes tool call (tests/tool_models.py), a REAL MCP server (tests/mcp_test_server.py over stdio,
named in the app's mcp.json) whose log says which calls really ran, and the real window offscreen: the call's
card asks, Esc denies, Allow once runs it, the result folds in the card and goes back to the model, Stop closes
an open question; the rounds are stored with the chat, sent back as tool messages, and exported. Then what
the chat settings and Settings do to them: a chat that switches a server off is not offered its tools, Save
restarts the servers (a secret pasted with a server goes to the keyring, a call on a removed server ends in its
card), and Stop while a tool runs (the server's `add` held at a gate file) ends the answer and loses nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import stat
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QScrollArea

from app.chat import tool_turns as T
from app.conversations import store as S
from app.conversations.export import to_json, to_markdown
from app.conversations.store import Store
from app.engine.bridge import READY
from app.settings.schema import save_settings
from app.window.main_window import MainWindow
from core.tools.server_secrets import SECRET_REF

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import ENGINE_TIMEOUT_S, screenshot, tiny_settings, wait_for  # noqa: E402
from tool_models import ANSWER_TEXT, save_tool_pair  # noqa: E402

pytest_plugins = ["app_fixtures"]
pytestmark = [pytest.mark.qt, pytest.mark.slow, pytest.mark.timeout(400)]  # an engine in a child process

SERVER = str(Path(__file__).parent / "mcp_test_server.py")
WAIT_MS = 120_000
NEEDS_K123 = "API_KEY=" + hashlib.sha256(b"k-123").hexdigest()  # the test server starts only with API_KEY=k-123


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
    """A window whose mcp.json names the test server; the calls that ran are in window.calls_log; while the
    file window.gate exists, a call of add waits (once it has begun, "<gate>.entered" exists)."""
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    (app_paths.config_dir / T.TOOLS_CONFIG_NAME).write_text(
        json.dumps(
            {
                "mcpServers": {
                    "calc": {
                        "command": sys.executable,
                        "args": [SERVER, "stdio"],
                        "env": {"MCP_TEST_LOG": str(log), "MCP_TEST_GATE": str(gate)},
                    }
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
    window.calls_log, window.gate = log, gate
    yield window
    gate.unlink(missing_ok=True)
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


def entered(window) -> bool:
    return Path(f"{window.gate}.entered").exists()


def test_a_chat_that_switches_a_server_off_is_not_offered_its_tools(qtbot, window):
    window.show_conversation_settings(True)
    panel = window.chat_settings
    qtbot.waitUntil(lambda: "calc" in panel.tool_switches, timeout=WAIT_MS)
    switch = panel.tool_switches["calc"]
    assert switch.isVisible() and switch.isChecked()  # every enabled server, by default
    screenshot(window, "chat-settings-tools")
    qtbot.mouseClick(switch, Qt.MouseButton.LeftButton, pos=QPoint(8, switch.height() // 2))  # on its box
    assert not switch.isChecked()
    conversation = window.controller.conversation_id
    assert conversation is not None  # the edit made the chat, as any chat setting does
    assert window.controller.conversation_settings(conversation).tool_servers_off == ["calc"]
    asked = []
    window.controller.tool_call_waiting.connect(lambda *args: asked.append(args))
    qtbot.keyClicks(window.input, "add two and three")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    answer = window.controller.messages.rows[-1]
    assert asked == [] and not answer.tool_rounds and calls(window) == [] and answer.status == S.COMPLETE

    window.controller.new_conversation()  # another chat still has them
    assert panel.tool_switches["calc"].isChecked()
    card = ask(qtbot, window, "add in the other chat")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.keyClick(card, Qt.Key.Key_Escape)
    window.controller.open_conversation(conversation)  # and the first keeps its choice
    assert not panel.tool_switches["calc"].isChecked()


def save_tools(qtbot, window, change) -> None:
    """Open Settings, `change(section)`, press Save; returns once the servers are updated."""
    page = window.open_settings(has_gpu=False)
    change(page.tools)
    with qtbot.waitSignal(window.tool_servers.ready, timeout=WAIT_MS):
        qtbot.mouseClick(page.save_button, Qt.MouseButton.LeftButton)
    assert window.settings_page is None


def test_save_restarts_the_servers_and_a_call_on_a_removed_server_ends_in_its_card(
    qtbot, window, app_paths, dict_keyring, tmp_path
):
    toolbox, calc = window.controller.toolbox, window.controller.toolbox.connections["calc"]
    gate = tmp_path / "more-gate"
    more = {
        "command": sys.executable,
        "args": [SERVER, "stdio"],
        "env": {"API_KEY": "k-123", "MCP_TEST_NEEDS": NEEDS_K123, "MCP_TEST_GATE": str(gate)},
    }

    def add_more(section):
        section.paste.setPlainText(json.dumps({"mcpServers": {"more": more}}))
        qtbot.mouseClick(section.add_button, Qt.MouseButton.LeftButton)

    save_tools(qtbot, window, add_more)
    assert any(t.server == "more" for t in toolbox.tools.values())  # started, its API_KEY from the keyring
    assert toolbox.connections["calc"] is calc and calc.alive  # unchanged: kept running
    saved = json.loads((app_paths.config_dir / T.TOOLS_CONFIG_NAME).read_text())["mcpServers"]["more"]
    assert saved["env"]["API_KEY"] == SECRET_REF and list(dict_keyring.values()) == ["k-123"]
    assert stat.S_IMODE((app_paths.config_dir / T.TOOLS_CONFIG_NAME).stat().st_mode) == 0o600
    assert set(window.chat_settings.tool_switches) == {"calc", "more"}

    def remove(name):
        return lambda section: qtbot.mouseClick(section.removers[name], Qt.MouseButton.LeftButton)

    save_tools(qtbot, window, remove("calc"))  # "more" alone: its add is the model's add again
    assert toolbox.tools["add"].server == "more" and not calc.alive and set(toolbox.connections) == {"more"}

    gate.touch()
    card = ask(qtbot, window, "add on more")
    assert card.title.text() == "Tool add · more: wants to run: allow it?"
    qtbot.mouseClick(card.allow_once, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: Path(f"{gate}.entered").exists(), timeout=WAIT_MS)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        save_tools(qtbot, window, remove("more"))
    answer = window.controller.messages.rows[-1]
    [record] = answer.tool_rounds[0]["calls"]
    assert record["status"] == T.FAILED and "'more' was stopped" in record["result"]
    assert answer.status == S.COMPLETE and answer.content.strip() == ANSWER_TEXT  # told, it answered (no tools left)
    card = window.chat_view.last_answer().tool_calls.card(record["id"])
    assert card.title.text() == "Tool add · more: failed"
    assert dict_keyring == {}  # its secret is forgotten with it
    gate.unlink()


def test_stop_while_a_tool_runs_ends_the_answer_and_nothing_is_lost(qtbot, window):
    window.gate.touch()
    card = ask(qtbot, window, "add slowly")
    qtbot.mouseClick(card.allow_once, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: entered(window), timeout=WAIT_MS)
    assert card.title.text() == "Tool add · calc: running…" and window.controller.generating
    screenshot(window, "tool-call-running")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)  # Stop
    stopped = window.controller.messages.rows[-1]
    [record] = stopped.tool_rounds[0]["calls"]
    assert (stopped.status, record["status"], record["result"]) == (S.STOPPED, T.STOPPED, T.STOPPED_TEXT)
    assert card.title.text() == "Tool add · calc: stopped" and not card.buttons.isVisible()
    assert not window.controller.generating and window.input.isEnabled()
    stopped_widget = window.chat_view.widgets[-1]
    assert stopped.content == "" and not stopped_widget.body.isVisible()  # the card is the answer: no empty bubble
    screenshot(window, "tool-call-stopped")
    conversation = window.controller.conversation_id

    window.gate.unlink()  # the chat goes on: the next call runs
    card = ask(qtbot, window, "add now")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=WAIT_MS):
        qtbot.mouseClick(card.allow_once, Qt.MouseButton.LeftButton)
    assert window.controller.messages.rows[-1].content == ANSWER_TEXT and calls(window) == ["add 2 3"]

    window.controller.new_conversation()  # reopened: the stopped round is as it was
    window.controller.open_conversation(conversation)
    stored = window.store.message(stopped.id)
    assert stored.status == S.STOPPED and stored.tool_rounds == stopped.tool_rounds
    widget = next(w for w in window.chat_view.widgets if w.message.id == stopped.id)
    assert widget.tool_calls.card(record["id"]).title.text() == "Tool add · calc: stopped"
    history = window.controller.history(conversation)
    assert {"role": "tool", "tool_call_id": record["id"], "name": "add", "content": "Error: " + T.STOPPED_TEXT} in [
        {k: m.get(k) for k in ("role", "tool_call_id", "name", "content")} for m in history
    ]


def test_without_a_keyring_a_pasted_key_stays_in_the_file_and_a_toast_says_so(qtbot, window, app_paths, no_keyring):
    keyed = {
        "command": sys.executable,
        "args": [SERVER, "stdio"],
        "env": {"API_KEY": "k-123", "MCP_TEST_NEEDS": NEEDS_K123},
    }

    def add_keyed(section):
        section.paste.setPlainText(json.dumps({"mcpServers": {"keyed": keyed}}))
        qtbot.mouseClick(section.add_button, Qt.MouseButton.LeftButton)

    save_tools(qtbot, window, add_keyed)
    assert "No usable system keyring: API_KEY of MCP server 'keyed' stays in the settings file" in (
        window.toast.label.text()  # the last toast's words, however long the server took to start
    )
    path = app_paths.config_dir / T.TOOLS_CONFIG_NAME
    assert json.loads(path.read_text())["mcpServers"]["keyed"]["env"]["API_KEY"] == "k-123"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert any(tool.server == "keyed" for tool in window.controller.toolbox.tools.values())  # it still works
