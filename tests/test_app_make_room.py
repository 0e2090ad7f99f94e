"""Make room: a message longer than the context window is answered after one click loads the model again with a
context that holds it (app.chat.context_room, app.window.room_host), against a REAL engine process; a load that
dies on the way (the engine killed, as the system kills a process out of memory) puts the old length back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402

from app.chat.context_room import SHORTEN, room_for, too_long_hint  # noqa: E402
from app.conversations import store as S  # noqa: E402
from app.engine.bridge import READY  # noqa: E402
from app.settings.schema import ConversationSettings, save_settings  # noqa: E402
from app.window.main_window import MainWindow  # noqa: E402
from core.engine import protocol as P  # noqa: E402
from core.planning.residency import ANSWER_ROOM  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import CONTEXT, answered, ready, tiny_settings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, tiny_models, shared_bridge (this module's own engine)

pytestmark = [pytest.mark.qt, pytest.mark.timeout(240)]

ANSWER_TIMEOUT_MS = 90_000
SHORT_CONTEXT = 2048  # the smallest length Settings offer; the tiny models keep CONTEXT (4,096)
LONG_MESSAGE = " ".join(f"w{6 + i % 50}" for i in range(2300))  # ~2,300 tokens: more than 2,048, less than 4,096


# -- the offer --------------------------------------------------------------------------------------------------


def test_the_room_offered_is_the_next_length_settings_offer_up_to_the_models_own_limit():
    models = {"max_context": 4096, "model_context": 32768, "context_bytes_per_token": 1000}
    room = room_for(5000, 512, models)  # 5,512 tokens needed
    assert (room.tokens, room.more_bytes) == (8192, 1000 * (8192 - 4096))
    assert "room for 8,192 tokens" in room.words() and "3.9 MB more memory" in room.words()  # 4,096,000 bytes
    assert room_for(5000, 100_000, models).tokens == 8192  # the answer's room is ANSWER_ROOM at most
    assert room_for(8192 - ANSWER_ROOM, 4096, models).tokens == 8192  # exactly enough
    assert room_for(8192 - ANSWER_ROOM + 1, 4096, models).tokens == 16384
    # between the last step and the models' limit: the limit itself
    assert room_for(30000, 512, {**models, "model_context": 31000}).tokens == 31000
    assert room_for(30600, 512, {**models, "model_context": 31000}) is None  # the model cannot keep that much
    assert room_for(5000, 512, {"max_context": 4096}) is None  # an engine that does not say how far it goes
    assert room_for(0, 512, models) is None  # the prompt's length is not known
    assert room_for(5000, 512, {**models, "context_bytes_per_token": 0}).more_bytes == 0  # said without memory
    on_gpu = room_for(5000, 512, {**models, "device": "cuda:0"})  # where a longer context costs speed too
    assert "3.9 MB more of the graphics card's memory aside, so answers may come slower" in on_gpu.words()


def test_what_a_failed_answer_says_depends_on_what_can_help():
    models = {"max_context": 4096, "model_context": 8192}
    assert too_long_hint(5000, 512, models, remote=False).startswith("Make room loads the model again")
    assert (
        too_long_hint(9000, 512, models, remote=False) == f"this model keeps at most 8,192 tokens of a chat: {SHORTEN}"
    )
    assert too_long_hint(5000, 512, models, remote=True) == SHORTEN  # a server keeps its own context
    unknown = too_long_hint(0, 512, {}, remote=False)  # nothing known: Settings is the way in
    assert unknown.startswith(SHORTEN) and "Settings > Context length" in unknown


def fail_too_long(window, prompt_tokens: int) -> None:
    rid = window.controller.active.request_id
    window.bridge.handle_events(
        [
            P.Error(
                rid,
                "context_length",
                f"the prompt is {prompt_tokens:,} tokens with the chat template, but the model's context window "
                "is 4,096 tokens",
                "shorten the message or the system prompt, or start a new conversation",
                prompt_tokens,
            )
        ]
    )


def test_the_failed_answer_offers_make_room_only_where_it_helps(qtbot, quiet_window):
    w = quiet_window
    models = {"max_context": 4096, "model_context": 32768, "context_bytes_per_token": 92160}
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", models)])
    w.send("a long document")
    fail_too_long(w, 6000)
    answer = w.chat_view.last_answer()
    assert answer.room_button.isVisibleTo(answer) and answer.room_button.isEnabled()
    assert "8,192 tokens" in answer.room_button.toolTip()
    text = answer.body.toPlainText()
    assert (
        "Make room loads the model again with room for 8,192 tokens (it sets about 360.0 MB more memory aside)" in text
    )
    assert not w.regenerate_action.isEnabled()  # the same context would only fail again
    assert w.controller.messages.rows[-1].stats["prompt_tokens"] == 6000  # the meter shows it overflowing
    assert w.header.context_meter.label.text() == "100% full"

    w.send("an even longer one")
    fail_too_long(w, 40000)  # past the model's own limit: no offer, and words that say so
    answer = w.chat_view.last_answer()
    assert not answer.room_button.isVisibleTo(answer)
    assert "This model keeps at most 32,768 tokens of a chat: shorten the message" in answer.body.toPlainText()
    assert not w.chat_view.widgets[1].room_button.isVisibleTo(w.chat_view.widgets[1])  # offered on the last answer only


def test_make_room_answers_at_once_where_the_context_already_holds_the_message(qtbot, quiet_window):
    w = quiet_window
    models = {"max_context": 4096, "model_context": 32768}
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", models)])
    w.send("a long document")
    fail_too_long(w, 6000)
    assert not w.regenerate_action.isEnabled()
    w.apply_settings(dataclasses.replace(w.settings, context_length=8192))  # raised in Settings meanwhile
    w.bridge.handle_events([P.StatusReport("ready", {**models, "max_context": 8192})])
    assert w.regenerate_action.isEnabled()  # the message fits now
    before = len(w.bridge.calls)
    w.chat_view.last_answer().room_button.click()
    assert [call[0] for call in w.bridge.calls[before:]] == ["generate"]  # no second load: answered at once
    assert w.controller.generating and w.controller.messages.rows[-1].status == S.STREAMING


def test_an_answer_that_never_got_a_word_is_asked_for_again_with_the_chats_own_settings(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    answered(w, "tell me a fact")
    w.controller.set_conversation_settings(ConversationSettings(temperature=0.2, top_p=0.5))
    w.controller.regenerate()
    rid = w.bridge.calls[-1][1]
    assert w.bridge.calls[-1][3]["temperature"] > 0.2  # another answer: varied (test_app_look says how)
    w.bridge.handle_events([P.Error(rid, "internal", "the engine failed", "this is a bug")])
    assert w.controller.regenerate()
    assert (w.bridge.calls[-1][3]["temperature"], w.bridge.calls[-1][3]["top_p"]) == (0.2, 0.5)


# -- against a real engine ----------------------------------------------------------------------------------


@pytest.fixture()
def window(qtbot, app_paths, tiny_models, shared_bridge):
    """A window on this module's engine, loaded with room for SHORT_CONTEXT tokens."""
    settings = tiny_settings(*tiny_models)
    save_settings(settings, app_paths.settings_file)
    window = MainWindow(app_paths, bridge=shared_bridge, confirm_delete=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.apply_settings(dataclasses.replace(window.settings, context_length=SHORT_CONTEXT))
    qtbot.waitUntil(lambda: loaded_with(window, SHORT_CONTEXT), timeout=ANSWER_TIMEOUT_MS)
    yield window
    window.close()
    window.store.close()


def loaded_with(window: MainWindow, context: int) -> bool:
    status = window.bridge.status
    return status.state == READY and status.models.get("max_context") == context


def send_too_long(qtbot, window: MainWindow) -> P.Error:
    window.input.setPlainText(LONG_MESSAGE)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS) as ended:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    assert ended.args[1] == S.FAILED
    return window.controller.messages.rows[-1]


def saved_context(window: MainWindow) -> int:
    return json.loads(window.paths.settings_file.read_text(encoding="utf-8"))["context_length"]


@pytest.mark.slow
def test_make_room_loads_the_model_with_a_context_that_holds_the_message_and_answers_it(qtbot, window):
    failed = send_too_long(qtbot, window)
    prompt = failed.stats["prompt_tokens"]
    assert SHORT_CONTEXT < prompt < CONTEXT - 24 and failed.stats["room_tokens"] == CONTEXT
    assert window.bridge.status.models["model_context"] == CONTEXT
    button = window.chat_view.last_answer().room_button
    assert button.isVisible() and button.isEnabled()
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS) as ended:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert window.toast.text().startswith("Loading the model again with room for 4,096 tokens")
    assert ended.args[1] == S.COMPLETE
    assert loaded_with(window, CONTEXT)
    assert window.settings.context_length == CONTEXT == saved_context(window)  # as if chosen in Settings
    rows = window.controller.messages.rows
    assert [(m.role, m.status) for m in rows] == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]
    assert rows[-1].stats["prompt_tokens"] == prompt and rows[-1].stats["generated_tokens"] == 24
    assert [m.status for m in window.store.messages(window.controller.conversation_id)] == [S.COMPLETE] * 2


@pytest.mark.slow
def test_a_load_that_dies_while_making_room_puts_the_old_length_back(qtbot, window):
    """The engine killed while it loads with the longer context (as the system kills a process that runs out
    of memory): the length goes back, a new engine loads the models as they were, and the answer says that
    only a shorter message helps."""
    failed = send_too_long(qtbot, window)
    old_pid = window.bridge.status.pid
    killed = []

    def kill_while_loading(status) -> None:
        if status.state == "loading" and not killed and status.pid == old_pid:
            killed.append(old_pid)
            os.kill(old_pid, signal.SIGKILL)

    window.bridge.status_changed.connect(kill_while_loading)
    try:
        qtbot.mouseClick(window.chat_view.last_answer().room_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(
            lambda: killed and loaded_with(window, SHORT_CONTEXT) and window.bridge.status.pid != old_pid,
            timeout=ANSWER_TIMEOUT_MS,
        )
    finally:
        window.bridge.status_changed.disconnect(kill_while_loading)
    assert window.settings.context_length == SHORT_CONTEXT == saved_context(window)
    assert window.toast.text().startswith("The model could not load with room for 4,096 tokens")
    answer = window.controller.messages.rows[-1]
    assert answer.id == failed.id and answer.status == S.FAILED and "room_tokens" not in answer.stats
    assert "could not load with room for 4,096 tokens: shorten the message" in answer.stats["hint"]
    assert window.store.message(answer.id).stats["hint"] == answer.stats["hint"]  # saved
    assert not window.chat_view.last_answer().room_button.isVisible()
    assert not window.banner.isVisible() and window.send_button.isEnabled()
