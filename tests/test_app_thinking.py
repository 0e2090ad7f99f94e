"""A thinking model in the chat window (issue 32), driven like a user against a REAL engine process running a
tiny scripted model that thinks (tests/thinking_models.py): its thinking shows in a muted block above the
answer, open while it thinks and folded to "Thought for N s" once the answer starts, one click to open again;
never in the answer, never copied with it; the Think switch only where the template can turn thinking off,
its position reaching the engine; stored, reloaded folded, exported; sent back for the template to keep or
drop; counted in the tokens and the context meter.

One engine is shared by the module and loaded with the model each test needs. The scripted models:
- "qwen3": thinks "w20 w21 w22", then answers "w30 w31 w32 w30 ..." for as long as it may (Qwen3-style
  template: the model opens the block; enable_thinking=False pre-fills an empty one, and it answers at once);
- "r1": the same model under a DeepSeek-R1-style template (the prompt opens the block; no switch);
- "r1-endless": thinks "w20 w21 w22 w23 w20 ..." and never answers (R1-style).
The moment the answer starts passes in milliseconds here, so the fold is also watched step by step on the
engine's own events of one answer, replayed one at a time into a window.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from app.conversations import store as S  # noqa: E402
from app.conversations.store import Store  # noqa: E402
from app.engine.bridge import READY  # noqa: E402
from app.settings.schema import Method, save_settings  # noqa: E402
from app.window.main_window import MainWindow  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import ENGINE_TIMEOUT_S, recording_bridge_class, screenshot, tiny_settings, wait_for  # noqa: E402
from thinking_models import (  # noqa: E402
    ASSISTANT,
    END_THINK,
    QWEN3_TEMPLATE,
    R1_TEMPLATE,
    THINK,
    THOUGHT_TEXT,
    make_thinking_tokenizer,
    save_thinking_pair,
)

pytest_plugins = ["app_fixtures"]

pytestmark = [pytest.mark.qt, pytest.mark.timeout(240)]

ANSWER_TIMEOUT_MS = 60_000
CONTEXT = 16384
LONG = 16000  # answers that must still stream when the test acts on them (plain decoding: a token a pass)
ANSWER_WORDS = ["w30", "w31", "w32"]
MARKERS = 2  # <think> and </think>: the model writes both (Qwen3-style)
ENDLESS_THOUGHT = "w20 w21 w22 w23"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("thinking-models")
    answers = [ASSISTANT, THINK, 20, 21, 22, END_THINK, 30, 31, 32]  # ... then w30 again: an endless answer
    return {
        "qwen3": save_thinking_pair(root / "qwen3", QWEN3_TEMPLATE, answers, loop_to=30, context=CONTEXT),
        "r1": save_thinking_pair(root / "r1", R1_TEMPLATE, answers, loop_to=30, context=CONTEXT),
        "r1-endless": save_thinking_pair(
            root / "r1-endless", R1_TEMPLATE, [ASSISTANT, THINK, 20, 21, 22, 23], loop_to=20, context=CONTEXT
        ),
    }


def model_settings(pair: tuple[str, str], **conversation):
    """The app's settings for a scripted pair: the tiny models' (tiny_settings), with room for long answers."""
    return dataclasses.replace(tiny_settings(*pair, **conversation), context_length=CONTEXT)


@pytest.fixture(scope="module")
def engine(qapp, pairs):
    """One real engine process for the module (EngineBridge over EngineClient); open_window loads the model a
    test needs in it (`bridge.loaded`: the test's note of which one is in it)."""
    from app.engine.bridge import EngineBridge
    from core.engine.client import EngineClient

    bridge = EngineBridge(lambda: EngineClient(torch_threads=1, start_timeout=ENGINE_TIMEOUT_S))
    bridge.start(model_settings(pairs["qwen3"]).load_request())
    bridge.loaded = "qwen3"
    try:
        wait_for(lambda: bridge.status.state in (READY, "crashed", "failed"), what="the engine to load")
        assert bridge.status.state == READY, bridge.status
        yield bridge
    finally:
        bridge.shutdown()


@pytest.fixture(scope="module", autouse=True)
def styled(qapp):
    from app.settings.schema import Theme
    from app.theme.manager import ThemeManager

    style = qapp.style().name()
    qapp.setStyle("Fusion")
    theme = ThemeManager(qapp, Theme.LIGHT)
    yield theme
    qapp.setStyleSheet("")
    qapp.styleHints().unsetColorScheme()
    qapp.setStyle(style)
    theme.deleteLater()


@pytest.fixture()
def open_window(qtbot, app_paths, pairs, engine):
    """open_window(model, **chat defaults): the model loaded in the shared engine, a window on it."""
    stores = []

    def make(model: str, **conversation) -> MainWindow:
        settings = model_settings(pairs[model], **conversation)
        save_settings(settings, app_paths.settings_file)
        if engine.loaded != model:
            engine.load(settings.load_request())  # LOADING at once; READY once the engine has this model
            engine.loaded = model
            qtbot.waitUntil(lambda: engine.status.state == READY, timeout=ANSWER_TIMEOUT_MS)
        store = Store(app_paths.database)
        stores.append(store)
        window = MainWindow(app_paths, store=store, bridge=engine, confirm_delete=False)
        qtbot.addWidget(window)
        window.resize(1100, 760)
        window.show()
        qtbot.waitExposed(window)
        return window

    yield make
    for store in stores:
        store.close()


def send(qtbot, window: MainWindow, text: str, wait: bool = True) -> None:
    qtbot.keyClicks(window.input, text)
    if wait:
        with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
            qtbot.keyClick(window.input, Qt.Key.Key_Return)
    else:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)


def stop(qtbot, window: MainWindow) -> None:
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)


# ----------------------------------------------------------------------------------------------------------
# Through the engine


@pytest.mark.slow
def test_the_thinking_folds_above_the_answer_opens_with_a_click_and_is_never_copied(qtbot, open_window):
    window = open_window("qwen3", max_tokens=12)
    assert window.composer.think_button.isVisible() and window.composer.think_button.isChecked()
    send(qtbot, window, "w40 w41")
    answer = window.controller.messages.rows[-1]
    written = 12 - len(THOUGHT_TEXT.split()) - MARKERS  # the answer's share of the 12 tokens
    assert answer.reasoning == THOUGHT_TEXT  # the thought, without its markers, apart from the answer
    assert answer.content.split() == (ANSWER_WORDS * 3)[:written] and "think" not in answer.content
    assert (answer.status, answer.stats["reason"]) == (S.COMPLETE, "length")
    assert isinstance(answer.stats["thinking_seconds"], float) and "thinking_started_at" not in answer.stats

    widget = window.chat_view.last_answer()
    block = widget.thinking
    assert block.isVisible() and not block.text_frame.isVisible()  # folded: the answer is there
    assert block.toggle.text().startswith("Thought for ")
    assert widget.body.toPlainText().split() == answer.content.split()
    assert "w20" not in widget.body.toPlainText()
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)  # one click opens it
    assert block.text_frame.isVisible() and block.view.toPlainText() == THOUGHT_TEXT
    assert block.toggle.accessibleName().endswith("hide the model's thinking")
    screenshot(window, "thinking-opened")
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)
    assert not block.text_frame.isVisible()

    widget.copy_button.click()  # Copy: the answer alone
    assert QGuiApplication.clipboard().text() == answer.content
    window.copy_last_answer()
    assert QGuiApplication.clipboard().text() == answer.content

    # the tokens, their speed and the context meter count the thinking too (the engine's count)
    assert answer.stats["tokens"] == answer.stats["generated_tokens"] == 12
    assert answer.stats["tokens_per_s"] > 0 and widget.speed_label.toolTip().startswith(
        "12 tokens, thinking included · "
    )
    assert window.header.context_meter.used == answer.stats["prompt_tokens"] + 12

    stored = window.store.message(answer.id)
    assert (stored.reasoning, stored.content, stored.stats["thinking_seconds"]) == (
        THOUGHT_TEXT,
        answer.content,
        answer.stats["thinking_seconds"],
    )
    assert window.controller.history(window.controller.conversation_id)[-1] == {
        "role": "assistant",
        "content": answer.content,
        "reasoning_content": THOUGHT_TEXT,
    }


@pytest.mark.slow
def test_a_reopened_chat_shows_its_thinking_folded_and_exports_it(qtbot, open_window, tmp_path):
    window = open_window("qwen3", max_tokens=12)
    send(qtbot, window, "w40 w41")
    answer = window.controller.messages.rows[-1]
    window.close()
    window.store.close()

    again = open_window("qwen3", max_tokens=12)  # a new window and store on the same files: a restart
    widget = again.chat_view.last_answer()
    assert widget.thinking.isVisible() and not widget.thinking.text_frame.isVisible()
    assert widget.thinking.toggle.text() == window.chat_view.last_answer().thinking.toggle.text()
    qtbot.mouseClick(widget.thinking.toggle, Qt.MouseButton.LeftButton)
    assert widget.thinking.view.toPlainText() == THOUGHT_TEXT

    again.export_conversation(tmp_path / "chat.md", "markdown")
    markdown = (tmp_path / "chat.md").read_text(encoding="utf-8")
    folded = f"<details>\n<summary>{widget.thinking.toggle.text()}</summary>\n\n> {THOUGHT_TEXT}\n\n</details>\n\n"
    assert "## Assistant · " in markdown and folded + answer.content + "\n" in markdown
    again.export_conversation(tmp_path / "chat.json", "json")
    data = json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))
    user, exported = data["messages"]
    assert "reasoning" not in user and exported["content"] == answer.content
    assert (exported["reasoning"], exported["stats"]["thinking_seconds"]) == (
        THOUGHT_TEXT,
        answer.stats["thinking_seconds"],
    )


@pytest.mark.slow
def test_the_block_is_folded_while_the_answer_streams(qtbot, open_window):
    window = open_window("qwen3", max_tokens=LONG, method=Method.SEQUENTIAL)
    send(qtbot, window, "w40 w41", wait=False)
    qtbot.waitUntil(lambda: len(window.controller.messages.rows[-1].content.split()) >= 6, timeout=ANSWER_TIMEOUT_MS)
    widget = window.chat_view.last_answer()
    qtbot.waitUntil(lambda: widget.body.isVisible() and widget.body.toPlainText().startswith("w30"))
    assert window.controller.generating and widget.streaming
    assert widget.thinking.isVisible() and not widget.thinking.text_frame.isVisible()
    assert widget.thinking.toggle.text().startswith("Thought for ")
    qtbot.mouseClick(widget.thinking.toggle, Qt.MouseButton.LeftButton)  # opened while the answer streams ...
    stop(qtbot, window)
    assert widget.thinking.text_frame.isVisible()  # ... it stays as the reader left it
    answer = window.controller.messages.rows[-1]
    assert answer.status == S.STOPPED and answer.reasoning == THOUGHT_TEXT and answer.content.startswith("w30 w31")


@pytest.mark.slow
def test_the_thinking_shows_live_and_a_stop_keeps_it_open_when_no_answer_came(qtbot, open_window):
    window = open_window("r1-endless", max_tokens=LONG, method=Method.SEQUENTIAL)
    assert not window.composer.think_button.isVisible()  # it always thinks: no switch
    assert window.bridge.status.models["thinking"] == "always"
    send(qtbot, window, "w40 w41", wait=False)
    qtbot.waitUntil(
        lambda: window.chat_view.last_answer().thinking.view.toPlainText().count(" ") >= 8, timeout=ANSWER_TIMEOUT_MS
    )
    widget = window.chat_view.last_answer()
    assert window.controller.generating and widget.thinking.text_frame.isVisible()  # open while it thinks
    assert widget.thinking.view.toPlainText().startswith(ENDLESS_THOUGHT + " w20")
    assert widget.thinking.toggle.text().startswith("Thinking… ") and widget.thinking.toggle.text().endswith(" s")
    assert not widget.body.isVisible() and not widget.progress.isVisible()  # no "…", no "Reading…" under it
    stop(qtbot, window)
    answer = window.controller.messages.rows[-1]
    assert (answer.status, answer.content) == (S.STOPPED, "") and answer.reasoning.startswith(ENDLESS_THOUGHT)
    assert widget.thinking.text_frame.isVisible() and widget.thinking.toggle.text().startswith("Thought for ")
    assert not widget.body.isVisible() and widget.footer.text().startswith("Stopped")
    assert window.store.message(answer.id).reasoning == answer.reasoning
    assert window.controller.history(window.controller.conversation_id) == [{"role": "user", "content": "w40 w41"}]


@pytest.mark.slow
def test_cut_off_while_thinking_offers_to_think_on(qtbot, open_window):
    window = open_window("r1-endless", max_tokens=10)
    send(qtbot, window, "w40 w41")
    widget = window.chat_view.last_answer()
    assert widget.message.stats["reason"] == "length" and widget.message.content == ""
    assert widget.thinking.text_frame.isVisible()  # the thinking is all there is: shown
    assert widget.footer.text().startswith("Cut off while still thinking: Continue goes on from here")
    assert widget.continue_button.isVisible()


def continue_answer(qtbot, window: MainWindow) -> None:
    """Press the last answer's Continue and wait for the answer to end again."""
    button = window.chat_view.last_answer().continue_button
    assert button.isVisible() and button.isEnabled()
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


@pytest.mark.slow
def test_continue_goes_on_mid_thought_then_mid_answer_in_the_same_message(qtbot, open_window):
    """Two tokens at a time (R1-style: the prompt opened the block): cut off while thinking, Continue thinks on
    from the last word (one thought, not two), the next Continue gets the answer, the next goes on with it;
    one message throughout, stored, its thinking time adding up, the context meter counting all of it."""
    window = open_window("r1", max_tokens=2)
    send(qtbot, window, "w40 w41")
    answer = window.controller.messages.rows[-1]
    assert (answer.reasoning, answer.content, answer.stats["reason"]) == ("w20 w21", "", "length")
    widget = window.chat_view.last_answer()
    assert widget.footer.text().startswith("Cut off while still thinking: Continue goes on from here")
    thought_for = answer.stats["thinking_seconds"]

    continue_answer(qtbot, window)  # w22 </think>: the thought is whole, no answer yet
    answer = window.controller.messages.rows[-1]
    assert (answer.reasoning, answer.content, answer.stats["reason"]) == (THOUGHT_TEXT, "", "length")
    assert answer.stats["thinking_seconds"] >= thought_for
    # the block's close is not kept apart from the thought, so the model closes it again: </think> w30
    continue_answer(qtbot, window)
    assert (window.controller.messages.rows[-1].reasoning, window.controller.messages.rows[-1].content) == (
        THOUGHT_TEXT,
        "w30",
    )
    continue_answer(qtbot, window)
    answer = window.controller.messages.rows[-1]
    assert (answer.reasoning, answer.content.split()) == (THOUGHT_TEXT, ANSWER_WORDS)
    assert [m.role for m in window.controller.messages.rows] == ["user", "assistant"] and answer.alt_count == 1
    stored = window.store.message(answer.id)
    assert (stored.reasoning, stored.content, stored.status) == (THOUGHT_TEXT, answer.content, S.COMPLETE)
    assert "thinking_seconds" in stored.stats and stored.stats["generated_tokens"] == 2
    assert window.header.context_meter.used == answer.stats["prompt_tokens"] + 2
    assert widget.continue_button.isVisible()  # still cut off: it can go on again
    screenshot(window, "continue")
    window.controller.regenerate()  # a new answer: Continue waits until it ends
    assert not window.chat_view.last_answer().continue_button.isVisible()
    assert not window.continue_action.isEnabled()
    qtbot.waitUntil(lambda: not window.controller.generating, timeout=ANSWER_TIMEOUT_MS)


@pytest.mark.slow
def test_the_think_switch_is_per_chat_and_reaches_the_engine(qtbot, open_window):
    window = open_window("qwen3", max_tokens=12)
    switch = window.composer.think_button
    assert switch.isVisible() and switch.isChecked() and window.bridge.status.models["thinking"] == "switchable"
    assert window.controller.conversation_id is None  # no chat yet
    qtbot.mouseClick(switch, Qt.MouseButton.LeftButton)  # off: the chat is made, and it remembers
    quick_chat = window.controller.conversation_id
    assert quick_chat is not None and not switch.isChecked() and not window.controller.conversation_settings().thinking
    send(qtbot, window, "w40 w41")
    quick = window.controller.messages.rows[-1]
    assert (quick.reasoning, quick.content.split()[:3]) == ("", ANSWER_WORDS)  # it answered at once
    assert not window.chat_view.last_answer().thinking.isVisible()
    assert window.chat_view.last_answer().speed_label.toolTip().startswith("12 tokens · ")

    qtbot.mouseClick(window.sidebar.new_button, Qt.MouseButton.LeftButton)
    assert switch.isChecked()  # a new chat thinks (the default)
    send(qtbot, window, "w40 w41")
    thinking = window.controller.messages.rows[-1]
    assert thinking.reasoning == THOUGHT_TEXT
    # enable_thinking=False reached the template: it pre-filled an empty block (<think> </think>) in the prompt
    assert quick.stats["prompt_tokens"] == thinking.stats["prompt_tokens"] + MARKERS

    window.controller.open_conversation(quick_chat)
    assert not switch.isChecked()  # each chat keeps its own
    window.open_conversation_settings()
    window.chat_settings.temperature.slider.setValue(50)  # an edit in the panel keeps the switch's position
    assert window.controller.conversation_settings() == dataclasses.replace(
        window.settings.conversation_defaults(), temperature=0.5, thinking=False
    )
    qtbot.mouseClick(switch, Qt.MouseButton.LeftButton)  # and the switch keeps the panel's edits
    assert window.controller.conversation_settings() == dataclasses.replace(
        window.settings.conversation_defaults(), temperature=0.5, thinking=True
    )
    assert window.chat_settings.values().thinking


@pytest.mark.slow
def test_earlier_thinking_goes_back_only_where_the_template_renders_it(qtbot, open_window, pairs):
    """The app sends each earlier answer's thinking as reasoning_content; the template keeps it (the test's
    Qwen3-style one renders it) or drops it (the R1-style one, like DeepSeek-R1's and Qwen3's own templates
    for turns before the last question): the engine's prompt is what each template makes of the history."""
    from core.text.prompts import Prompt, encode_prompt

    for model in ("qwen3", "r1"):
        window = open_window(model, max_tokens=12)
        window.new_conversation()  # the window opened the last model's chat
        send(qtbot, window, "w40 w41")
        send(qtbot, window, "w42")
        first, second = window.controller.messages.rows[1], window.controller.messages.rows[3]
        assert first.reasoning == THOUGHT_TEXT
        history = [
            {"role": "user", "content": "w40 w41"},
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": "w42"},
        ]
        tokenizer = make_thinking_tokenizer(QWEN3_TEMPLATE if model == "qwen3" else R1_TEMPLATE)

        def prompt_tokens(messages, tokenizer=tokenizer) -> int:
            return len(encode_prompt(tokenizer, Prompt(messages=tuple(messages))))

        with_thinking = [*history[:1], {**history[1], "reasoning_content": first.reasoning}, history[2]]
        assert second.stats["prompt_tokens"] == prompt_tokens(with_thinking)
        kept = prompt_tokens(with_thinking) - prompt_tokens(history)
        assert kept == (MARKERS + len(THOUGHT_TEXT.split()) if model == "qwen3" else 0)
        window.close()


@pytest.mark.slow
def test_the_apps_api_server_sends_the_thinking_apart(qtbot, open_window):
    """The app's own API server shares the window's engine through the bridge: a thinking model's thinking
    reaches its clients as reasoning_content (message and stream deltas), with the log-probabilities."""
    import threading

    import openai

    window = open_window("qwen3", max_tokens=12)
    window.apply_settings(
        dataclasses.replace(window.settings, api_server=True, api_server_port=0, api_server_require_key=False)
    )
    url = window.api_server.url
    assert url is not None, window.api_server.error
    result: dict = {}

    def ask() -> None:
        try:
            client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)
            request = dict(model="", messages=[{"role": "user", "content": "w40 w41"}], max_tokens=8, seed=1)
            result["answer"] = client.chat.completions.create(**request, logprobs=True, top_logprobs=2)
            result["chunks"] = list(client.chat.completions.create(**request, stream=True))
        except Exception as error:  # noqa: BLE001 - reported below
            result["error"] = error

    thread = threading.Thread(target=ask)
    thread.start()
    qtbot.waitUntil(lambda: "chunks" in result or "error" in result, timeout=ANSWER_TIMEOUT_MS)
    thread.join(10)
    assert "error" not in result, result.get("error")
    message = result["answer"].choices[0].message
    assert (message.model_extra["reasoning_content"], message.content) == (THOUGHT_TEXT, "w30 w31 w32")
    assert [entry.token for entry in result["answer"].choices[0].logprobs.content][-3:] == ["w30", "w31", "w32"]
    deltas = [chunk.choices[0].delta for chunk in result["chunks"] if chunk.choices]
    assert "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas) == THOUGHT_TEXT
    assert "".join(d.content or "" for d in deltas) == "w30 w31 w32"
    window.apply_settings(dataclasses.replace(window.settings, api_server=False))


# ----------------------------------------------------------------------------------------------------------
# The engine's events of one answer, one at a time


def test_the_block_is_open_while_the_model_thinks_and_folds_when_the_answer_starts(qtbot, app_paths, pairs):
    """A real answer's events (the engine in this process, the qwen3 model, plain decoding: a token per event)
    fed one by one into a window: the block opens with the first thought, counts up while it thinks, folds at
    the answer's first word; the switch shows for this model and its position goes out with the request."""
    from PySide6.QtWidgets import QApplication

    from conftest import in_process_engine, torch_threads
    from core.engine import protocol as P

    with torch_threads(1):
        _, serve = in_process_engine()
        serve(P.Load(target=pairs["qwen3"][0], draft=None, dtype="float32", device="cpu"))
        events = serve(
            P.Generate(
                request_id="real",
                messages=({"role": "user", "content": "w40 w41"},),
                method="sequential",
                max_new_tokens=9,
            )
        )
    chunks = [e for e in events if isinstance(e, P.TokenChunk)]
    assert "".join(c.reasoning for c in chunks) == THOUGHT_TEXT and sum(bool(c.reasoning) for c in chunks) == 3

    bridge = recording_bridge_class()()
    window = MainWindow(app_paths, bridge=bridge, confirm_delete=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    bridge.handle_events(
        [P.EngineStarted(pid=1), P.StatusReport("ready", {"thinking": "switchable", "max_context": 512})]
    )
    assert window.composer.think_button.isVisible()
    qtbot.mouseClick(window.composer.think_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(window.composer.think_button, Qt.MouseButton.LeftButton)  # off, then on again
    window.send("w40 w41")
    _, request_id, _, settings = bridge.calls[-1]
    assert settings["chat_template_kwargs"] == {"enable_thinking": True}

    seen = []
    for event in events:
        if hasattr(event, "request_id"):
            event = dataclasses.replace(event, request_id=request_id)
        bridge.handle_events([event])
        window.controller._flush()  # what its 33 ms timer does
        widget = window.chat_view.last_answer()
        widget.render()  # what its render timer does
        QApplication.processEvents()  # a new message's widgets show once the event loop runs
        if isinstance(event, P.TokenChunk) and (event.text or event.reasoning):
            seen.append(
                (
                    bool(widget.message.content),
                    widget.thinking.isVisible(),
                    widget.thinking.text_frame.isVisible(),
                    widget.thinking.toggle.text().split(" ")[0],
                )
            )
    thinking = [state for state in seen if not state[0]]
    answering = [state for state in seen if state[0]]
    assert thinking and answering, seen  # the engine's events came in both phases
    assert set(thinking) == {(False, True, True, "Thinking…")}  # open, counting up, while it thinks
    assert set(answering) == {(True, True, False, "Thought")}  # folded from the answer's first word on
    assert window.controller.messages.rows[-1].reasoning == THOUGHT_TEXT
    assert window.chat_view.last_answer().thinking.view.toPlainText() == THOUGHT_TEXT  # grown a piece at a time
    bridge.handle_events([P.StatusReport("ready", {"thinking": "always"})])
    assert not window.composer.think_button.isVisible()
    bridge.handle_events([P.StatusReport("ready", {"thinking": None})])
    assert not window.composer.think_button.isVisible()


def test_a_new_chat_with_a_thinking_model_has_room_for_its_thinking(qtbot, quiet_window):
    """Thinking counts against the longest answer: where the defaults keep the schema's 512 tokens, a new chat
    with a model that thinks gets half the context window, at most 4,096; a longest answer set by the user
    stays, and so does every chat made before."""
    from app.settings.schema import THINKING_MAX_TOKENS, AppSettings, ConversationSettings
    from core.engine import protocol as P

    window, bridge = quiet_window, quiet_window.bridge
    assert AppSettings(target="m").conversation_defaults({"thinking": None, "max_context": 32768}).max_tokens == 512
    assert (
        AppSettings(target="m").conversation_defaults({"thinking": "always", "max_context": 32768}).max_tokens
        == THINKING_MAX_TOKENS
    )
    mine = AppSettings(target="m", defaults=ConversationSettings(max_tokens=300))
    assert mine.conversation_defaults({"thinking": "switchable", "max_context": 32768}).max_tokens == 300
    before = window.controller.new_conversation()
    window.store.add_message(before, "user", "w40")  # not empty: New chat makes another
    bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", {"thinking": "always", "max_context": 4096})])
    window.new_conversation()
    assert window.controller.conversation_settings().max_tokens == 2048
    assert window.chat_settings.max_tokens.value() == 2048 and not window.composer.think_button.isVisible()
    window.controller.open_conversation(before)
    assert window.controller.conversation_settings().max_tokens == 512


def test_thinking_words_and_the_markdown_section():
    from app.chat.thinking_words import duration_words, thought_summary
    from app.conversations.export import thinking_section, to_json, to_markdown
    from app.conversations.store import Conversation, Message

    assert [duration_words(s) for s in (0.3, 1.4, 59.6, 60, 125)] == ["a moment", "1 s", "1 min", "1 min", "2 min 5 s"]
    assert (thought_summary({"thinking_seconds": 12.2}), thought_summary({"thinking_started_at": 5.0})) == (
        "Thought for 12 s",
        "Thoughts",
    )  # never measured: an answer cut off by a crash while it thought
    answer = Message(
        2,
        1,
        "assistant",
        "It is 4.",
        S.COMPLETE,
        {"thinking_seconds": 3.0},
        1.0,
        reasoning="Two plus two.\n\nThat makes 4.",
    )
    assert thinking_section(answer) == [
        "<details>",
        "<summary>Thought for 3 s</summary>",
        "",
        "> Two plus two.",
        ">",
        "> That makes 4.",
        "",
        "</details>",
        "",
    ]
    chat = Conversation(1, "Sums", 1.0, 1.0)
    question = Message(1, 1, "user", "2 + 2?", S.COMPLETE, {}, 1.0)
    assert "> Two plus two.\n>\n> That makes 4.\n\n</details>\n\nIt is 4.\n" in to_markdown(chat, [question, answer])
    plain = Message(3, 1, "assistant", "Hi.", S.COMPLETE, {}, 1.0)
    assert "<details>" not in to_markdown(chat, [question, plain])
    exported = json.loads(to_json(chat, [question, answer, plain]))["messages"]
    assert [m.get("reasoning") for m in exported] == [None, "Two plus two.\n\nThat makes 4.", None]


@pytest.mark.slow
def test_each_answer_of_a_turn_shows_its_own_thinking(qtbot, open_window):
    """Regenerate keeps the old answer: flipping between the two shows each one's thinking, folded again."""
    window = open_window("qwen3", max_tokens=9)
    window.new_conversation()
    send(qtbot, window, "w40 w41")
    first = window.controller.messages.rows[-1]
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(window.chat_view.last_answer().regenerate_button, Qt.MouseButton.LeftButton)
    second = window.controller.messages.rows[-1]
    assert second.id != first.id and second.reasoning == THOUGHT_TEXT and second.alt_count == 2
    qtbot.mouseClick(window.chat_view.last_answer().thinking.toggle, Qt.MouseButton.LeftButton)  # this one opened
    assert window.chat_view.last_answer().thinking.text_frame.isVisible()
    qtbot.mouseClick(window.chat_view.last_answer().previous_button, Qt.MouseButton.LeftButton)
    widget = window.chat_view.last_answer()
    assert widget.message.id == first.id and widget.thinking.view.toPlainText() == THOUGHT_TEXT
    assert widget.thinking.isVisible() and not widget.thinking.text_frame.isVisible()
