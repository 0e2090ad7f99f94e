"""The context window in the app. Make room: a message longer than the context is answered after one click
loads the model again with a context that holds it (app.chat.context_room, app.window.room_host); what a failed
answer, a load that does not fit, a trimmed chat and a halved tree budget say. Against a real engine (the load,
the answer, a load that dies on the way): tests/test_app_window.py.
"""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.chat.context_room import SHORTEN, draft_too_long, room_for, too_long_hint  # noqa: E402
from app.conversations import store as S  # noqa: E402
from app.settings.schema import ConversationSettings  # noqa: E402
from core.engine import protocol as P  # noqa: E402
from core.planning.residency import ANSWER_ROOM  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import answered, ready  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: quiet_window (no engine)

pytestmark = pytest.mark.qt


# -- the offer --------------------------------------------------------------------------------------------------


def test_the_room_offered_is_the_next_length_settings_offer_up_to_the_models_own_limit():
    models = {"max_context": 4096, "model_context": 32768, "context_bytes_per_token": 1000}
    room = room_for(5000, 512, models)  # 5,512 tokens needed
    assert (room.tokens, room.more_bytes) == (8192, 1000 * (8192 - 4096))
    assert "room for 8,192 tokens" in room.words() and "3.9 MB more memory" in room.words()  # 4,096,000 bytes
    assert room_for(8192 - ANSWER_ROOM, 100_000, models).tokens == 8192  # the answer's room is ANSWER_ROOM at most
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


def hint(prompt_tokens: int, models: dict, remote: bool = False) -> str:
    """What the chat says for a too-long message, as ChatController._on_failed puts it together."""
    room = None if remote else room_for(prompt_tokens, 512, models)
    return too_long_hint(room, prompt_tokens, 512, models, remote)


def test_what_a_failed_answer_says_depends_on_what_can_help():
    models = {"max_context": 4096, "model_context": 8192}
    assert hint(5000, models).startswith("Make room loads the model again")
    assert hint(9000, models) == f"this model keeps at most 8,192 tokens of a chat: {SHORTEN}"
    assert hint(5000, models, remote=True) == SHORTEN  # a server keeps its own context
    unknown = hint(0, {})  # nothing known: Settings is the way in
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


LOADED = {"max_context": 4096, "model_context": 32768}  # loaded with room for 4,096 of the 32,768 the model keeps


def a_long_message_failed(window, models: dict = LOADED) -> None:
    """The engine ready with `models`, and a 6,000-token message sent and failed for want of room."""
    window.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", models)])
    window.send("a long document")
    fail_too_long(window, 6000)


def made_room(window) -> str:
    """Make room pressed and the models loaded again with room for 8,192: the request id of the answer asked
    for then."""
    window.chat_view.last_answer().room_button.click()
    window.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    return window.bridge.calls[-1][1]


def test_the_failed_answer_offers_make_room_only_where_it_helps(qtbot, quiet_window):
    w = quiet_window
    a_long_message_failed(w, {**LOADED, "context_bytes_per_token": 92160})
    answer = w.chat_view.last_answer()
    assert answer.room_button.isVisibleTo(answer) and answer.room_button.isEnabled()
    assert "8,192 tokens" in answer.room_button.toolTip()
    text = answer.body.toPlainText()
    assert (
        "Make room loads the model again with room for 8,192 tokens (it sets about 360.0 MB more memory aside)" in text
    )
    assert not answer.regenerate_button.isEnabled()  # the same context would only fail again ...
    assert w.controller.messages.rows[-1].stats["prompt_tokens"] == 6000  # the meter shows it overflowing
    assert w.header.context_meter.label.text() == "100% full"

    w.send("an even longer one")
    fail_too_long(w, 40000)  # past the model's own limit: no offer, and words that say so
    answer = w.chat_view.last_answer()
    assert not answer.room_button.isVisibleTo(answer) and not w.regenerate_action.isEnabled()
    assert "This model keeps at most 32,768 tokens of a chat: shorten the message" in answer.body.toPlainText()
    assert not w.chat_view.widgets[1].room_button.isVisibleTo(w.chat_view.widgets[1])  # offered on the last answer only


def test_ctrl_r_makes_room_where_the_last_answer_offers_it(qtbot, quiet_window):
    """The keyboard's way to the button: Regenerate (Ctrl+R) tries again the way that can work."""
    w = quiet_window
    a_long_message_failed(w)
    assert not w.controller.can_regenerate() and w.regenerate_action.isEnabled()
    assert w.regenerate_action.text() == "Make r&oom and try again"  # the menu says what Ctrl+R does now
    before = len(w.bridge.calls)
    qtbot.keyClick(w.input, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    [(kind, load)] = w.bridge.calls[before:]  # the models load again with room for it; the answer waits for them
    assert kind == "load" and load.context_length == 8192 and w.settings.context_length == 8192
    assert w.toast.text().startswith("Loading the model again with room for 8,192 tokens")
    assert not w.regenerate_action.isEnabled() and not w.chat_view.last_answer().room_button.isEnabled()  # once
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    assert [call[0] for call in w.bridge.calls[before:]] == ["load", "generate"]
    assert w.regenerate_action.text() == "Re&generate the answer"


def test_make_room_answers_at_once_where_the_context_already_holds_the_message(qtbot, quiet_window):
    w = quiet_window
    a_long_message_failed(w)
    assert not w.controller.can_regenerate()
    w.apply_settings(dataclasses.replace(w.settings, context_length=8192))  # raised in Settings meanwhile
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    assert w.controller.can_regenerate()  # the message fits now
    before = len(w.bridge.calls)
    w.chat_view.last_answer().room_button.click()
    assert [call[0] for call in w.bridge.calls[before:]] == ["generate"]  # no second load: answered at once
    assert w.controller.generating and w.controller.messages.rows[-1].status == S.STREAMING


def test_models_that_do_not_fit_are_said_in_the_apps_words_with_the_context_as_a_way_out(qtbot, quiet_window):
    """The engine's plan speaks in gigabytes and command-line flags: those go under Details."""
    w = quiet_window
    ready(w.bridge)
    w.apply_settings(dataclasses.replace(w.settings, context_length=32768))
    message = (
        "the GPU budget for the target's weights is 3.1 GB but it needs at least 4.2 GB (embeddings/lm_head 2.1 "
        "GB + 2 layer slots of 1.0 GB). Lower the tree budget (--budget) or the context length so activations and "
        "KV caches take less, use a smaller draft model, or free GPU memory."
    )
    w.bridge.handle_events(
        [P.Error(None, "insufficient_memory", message, "use a smaller model or offload more layers")]
    )
    text = w.banner.label.text()
    assert text.startswith("<b>The models do not fit in this computer's memory.</b> Settings keep room for 32,768")
    assert "--budget" not in text and "--budget" in w.banner.details()
    assert [name for name, b in w.banner.buttons.items() if b.isVisibleTo(w.banner)] == ["retry", "models", "settings"]
    qtbot.mouseClick(w.banner.buttons["models"], Qt.MouseButton.LeftButton)
    assert w.model_manager is not None and w.model_manager.isVisible()
    w.apply_settings(dataclasses.replace(w.settings, context_length=0))  # automatic: nothing to shorten
    w.bridge.handle_events([P.Error(None, "insufficient_memory", message, "")])
    assert "Settings keep room" not in w.banner.label.text()


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


def test_the_chat_says_when_its_oldest_messages_were_left_out_and_an_api_clients_trim_is_not_its_news(
    qtbot, quiet_window
):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", {"max_context": 4096})])
    w.bridge.handle_events([P.ContextTrimmed("api-request-7", 4)])  # another program's request, through the API
    assert w.toast.text() == ""
    w.send("and now?")
    w.bridge.handle_events([P.ContextTrimmed(w.bridge.calls[-1][1], 4)])
    assert w.toast.text() == (
        "The model no longer sees this chat's 4 oldest messages: it keeps 4,096 tokens in mind, and Menu > "
        "Settings > Context length can raise that."
    )


def test_a_tree_budget_halved_for_memory_is_said_without_the_engines_words(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    w.bridge.handle_events([P.BudgetReduced("r1", 64, 32)])
    assert w.toast.text().startswith("The graphics card ran short of memory, so the draft model now guesses fewer")
    assert "budget" not in w.toast.text()


def test_an_answer_that_runs_out_of_memory_after_make_room_puts_the_old_length_back(qtbot, quiet_window):
    """On the processor nothing checks the longer caches at load (they are made when a chat starts): the
    answer Make room asked for runs out of memory, and the length goes back as after a load that failed."""
    w = quiet_window
    a_long_message_failed(w)
    rid = made_room(w)
    before = len(w.bridge.calls)
    w.bridge.handle_events([P.Error(rid, "out_of_memory", "out of memory (even at the smallest tree budget)", "")])
    [(kind, load)] = w.bridge.calls[before:]
    assert kind == "load" and load.context_length is None and w.settings.context_length == 0  # automatic again
    assert w.toast.text().startswith("The model could not run with room for 8,192 tokens, so it is loading as")
    answer = w.controller.messages.rows[-1]
    assert "could not run with room for 8,192 tokens: shorten the message" in answer.stats["hint"]
    assert "room_tokens" not in answer.stats and not w.chat_view.last_answer().room_button.isVisibleTo(w)
    w.send("a short one")  # an answer that fails for another reason afterwards changes nothing
    w.bridge.handle_events([P.Error(w.bridge.calls[-1][1], "out_of_memory", "out of memory", "")])
    assert w.bridge.calls[-1][0] == "generate"


def test_settings_say_how_far_the_model_in_use_goes(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events(
        [P.EngineStarted(pid=1), P.StatusReport("ready", {"max_context": 4096, "model_context": 131072})]
    )
    page = w.open_settings(has_gpu=False)
    assert page.context_length.help_label.text().endswith(
        "A model that keeps less keeps all it can (the one in use keeps up to 131,072)."
    )
    page.cancelled.emit()
    w.bridge.handle_events([P.StatusReport("ready", {"max_context": 4096})])  # not said: nothing to say
    assert w.open_settings(has_gpu=False).context_length.help_label.text().endswith("keeps all it can.")


def test_a_load_that_fails_after_the_chat_was_left_still_stops_offering_make_room_there(qtbot, quiet_window):
    w = quiet_window
    a_long_message_failed(w)
    failed = w.controller.messages.rows[-1]
    w.chat_view.last_answer().room_button.click()
    w.new_conversation()  # another chat while the models load
    w.bridge.handle_events([P.Error(None, "insufficient_memory", "the GPU budget is too small", "")])
    qtbot.waitUntil(lambda: w.settings.context_length == 0)  # the length back (after the banner said why)
    stored = w.store.message(failed.id)
    assert "room_tokens" not in stored.stats and "could not run with room for 8,192" in stored.stats["hint"]


def test_an_answer_out_of_memory_after_its_chat_was_left_still_puts_the_old_length_back(qtbot, quiet_window):
    w = quiet_window
    a_long_message_failed(w)
    rid = made_room(w)
    w.new_conversation()  # another chat while the answer is written
    w.bridge.handle_events([P.Error(rid, "out_of_memory", "out of memory (even at the smallest tree budget)", "")])
    assert w.settings.context_length == 0 and w.bridge.calls[-1][0] == "load"


# -- a message counted before it is sent (app.chat.draft_count) -----------------------------------------------


def note(prompt_tokens: int, models: dict, refused: int = 0) -> str:
    """What the note under the box says for a too-long message, as MainWindow._show_draft_count puts it
    together (with no Make room under way)."""
    room = room_for(prompt_tokens, 512, models, refused)
    return draft_too_long(room, prompt_tokens, 512, models, refused)


def test_a_message_too_long_is_said_under_the_box_with_what_sending_it_can_do():
    models = {"max_context": 4096, "model_context": 32768, "context_bytes_per_token": 0}
    assert note(6000, models) == (
        "Too long for the model: about 6,000 tokens, and it keeps 4,096 in mind now. Make room and send, or shorten it."
    )
    assert note(6000, models, refused=8192) == (  # that length failed: not offered again
        "Too long for the model: about 6,000 tokens, and it keeps 4,096 in mind now, and it could not run with room "
        "for 8,192. Shorten it (of a file added to it, keep the part you need)."
    )
    assert note(6000, models, refused=16384).endswith("Make room and send, or shorten it.")
    assert note(40_000, models).startswith(
        "Too long for this model: about 40,000 tokens, and it keeps at most 32,768. Shorten it"
    )
    unknown = {"max_context": 4096}  # how far the model goes is not known
    assert note(6000, unknown).endswith("Shorten it, or let the model keep more in Menu > Settings > Context length.")


def test_the_message_being_written_is_counted_once_the_typing_pauses_and_stale_or_failed_counts_are_dropped(
    qtbot, quiet_window
):
    w = quiet_window
    w.bridge.handle_events(
        [P.EngineStarted(pid=1), P.StatusReport("ready", {"max_context": 8192, "model_context": 8192})]
    )
    w.controller.app_settings.defaults = ConversationSettings(system_prompt="Be brief.", max_tokens=300)
    qtbot.keyClicks(w.input, "w1 w2")
    qtbot.waitUntil(lambda: len(w.bridge.counts) == 1)  # one count for the whole word, not one per key
    first, messages, settings = w.bridge.counts[0]
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "w1 w2"}]
    assert settings == {"max_new_tokens": 300, "chat_template_kwargs": {}}
    qtbot.keyClicks(w.input, " w3")
    qtbot.waitUntil(lambda: len(w.bridge.counts) == 2)
    latest = w.bridge.counts[1][0]
    meter, note = w.header.context_meter, w.composer.note
    w.bridge.handle_events([P.TokenCount(first, 50)])  # the answer for the older text: dropped
    assert w.draft_counter.count is None and meter.used == 0
    w.bridge.handle_events([P.TokenCount(latest, 9000, fits=False)])
    assert meter.used == 9000 and meter.label.text() == "100% full" and note.isVisible()
    assert note.text().startswith("Too long for this model: about 9,000 tokens, and it keeps at most 8,192.")
    failures = []
    w.bridge.request_failed.connect(failures.append)
    qtbot.keyClicks(w.input, " w4")
    qtbot.waitUntil(lambda: len(w.bridge.counts) == 3)
    w.bridge.handle_events([P.Error(w.bridge.counts[2][0], "invalid_setting", "the template failed")])
    assert failures == [] and w.draft_counter.count is None and not note.isVisible()  # not an answer's failure
    assert w.bridge.counting == set()
    w.input.clear()  # an empty box is not counted: the meter shows the chat again at once
    assert len(w.bridge.counts) == 3 and meter.used == 0 and meter.toolTip().startswith("This chat uses")


def test_a_remote_server_is_counted_where_it_can_be_and_nothing_before_a_model_is_ready(qtbot, quiet_window):
    """A server that counts (vLLM's /tokenize, `specexec serve`) says so as it connects: the message is counted
    and one too long says so in the server's terms (no Make room: its context is the server's); one that does
    not count (llama.cpp, Ollama) is not asked."""
    from app.settings.schema import RemoteEndpoint

    w = quiet_window
    assert w.controller.draft_prompt("w1") is None  # no model yet
    ready(w.bridge)
    assert w.controller.draft_prompt("w1") is not None and w.controller.draft_prompt("  ") is None
    w.settings.endpoints = [RemoteEndpoint("GPU box", "http://127.0.0.1:9/v1", "m")]
    w.settings.connection = "GPU box"
    assert w.controller.draft_prompt("w1") is None  # a server that did not say it counts is not asked
    w.bridge.handle_events(
        [P.StatusReport("ready", {"max_context": 4096, "remote": "GPU box", "counts_prompts": True})]
    )
    assert w.controller.draft_prompt("w1") is not None
    too_long_typed(qtbot, w, "w1 w2", prompt_tokens=3900)
    note = w.composer.note
    assert note.text() == (
        "Too long for the server's model: about 3,900 tokens and an answer of up to 512 pass the 4,096 it keeps. "
        "Shorten it (of a file added to it, keep the part you need), or choose a shorter Longest answer in the "
        "chat's settings."
    )
    assert note.isVisibleTo(w) and not w.composer.room_button.isVisibleTo(w)
    too_long_typed(qtbot, w, "w1 w2 w3", prompt_tokens=6000)
    assert note.text() == (
        "Too long for the server's model: about 6,000 tokens, and it keeps 4,096. Shorten it (of a file added to it, "
        "keep the part you need)."
    )


# -- Make room before sending: the note's button (app.window.room_host) ---------------------------------------


def too_long_typed(qtbot, window, text: str = "a long document", prompt_tokens: int = 6000) -> None:
    """`text` typed in the message box and counted by the engine as a `prompt_tokens` prompt, too long for the
    4,096 tokens LOADED keeps."""
    before = len(window.bridge.counts)
    window.input.setPlainText(text)
    qtbot.waitUntil(lambda: len(window.bridge.counts) > before)
    window.bridge.handle_events([P.TokenCount(window.bridge.counts[-1][0], prompt_tokens, fits=False)])


def test_make_room_and_send_loads_the_model_with_room_for_the_message_then_sends_it(qtbot, quiet_window):
    """The chat gets no failed answer first: the room is made before the message is sent."""
    w = quiet_window
    w.bridge.handle_events(
        [P.EngineStarted(pid=1), P.StatusReport("ready", {**LOADED, "context_bytes_per_token": 1000})]
    )
    too_long_typed(qtbot, w)
    button, note = w.composer.room_button, w.composer.note
    assert note.text().startswith("Too long for the model: about 6,000 tokens") and button.isVisibleTo(w)
    assert button.toolTip() == (
        "Make room loads the model again with room for 8,192 tokens (it sets about 3.9 MB more memory aside), "
        "then sends the message."
    )
    before = len(w.bridge.calls)
    w.send_button.setFocus()
    qtbot.keyClick(w.send_button, Qt.Key.Key_Tab)  # the keyboard's way: after Send
    assert QApplication.focusWidget() is button
    qtbot.keyClick(button, Qt.Key.Key_Space)
    [(kind, load)] = w.bridge.calls[before:]  # nothing sent yet: the models load again with room for it
    assert kind == "load" and load.context_length == 8192 and w.settings.context_length == 8192
    assert note.text() == "Loading the model again with room for 8,192 tokens; then the message is sent."
    assert not button.isVisibleTo(w) and w.input.toPlainText() == "a long document"
    w.bridge.handle_events([P.StatusReport("loading", LOADED)])  # the engine reads the Load
    w.bridge.handle_events([P.StatusReport("ready", LOADED)])  # a report of the models as they were: it waits
    assert [call[0] for call in w.bridge.calls[before:]] == ["load"]
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    [_, (kind, _, messages, _)] = w.bridge.calls[before:]
    assert kind == "generate" and messages[-1] == {"role": "user", "content": "a long document"}
    assert w.input.toPlainText() == "" and not note.isVisible() and w.controller.generating
    assert [m.role for m in w.controller.messages.rows] == ["user", "assistant"]  # no failed answer before it


def test_a_load_that_fails_making_room_keeps_the_message_and_offers_that_length_no_more(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", LOADED)])
    too_long_typed(qtbot, w)
    w.composer.room_button.click()
    w.bridge.handle_events([P.Error(None, "insufficient_memory", "the GPU budget is too small", "")])
    qtbot.waitUntil(lambda: w.settings.context_length == 0)  # the length back (after the banner said why)
    assert w.toast.text().startswith("The model could not run with room for 8,192 tokens, so it is loading as")
    assert w.input.toPlainText() == "a long document" and w.controller.messages.rows == []  # nothing lost or sent
    w.bridge.handle_events([P.StatusReport("ready", LOADED)])  # loaded as before: the message counted again
    too_long_typed(qtbot, w, "a long document, again")
    assert w.composer.note.text().endswith(
        "could not run with room for 8,192. Shorten it (of a file added to it, keep the part you need)."
    )
    assert not w.composer.room_button.isVisibleTo(w)
    w.send("a long document, again")  # sent all the same: its failed answer offers no Make room either
    fail_too_long(w, 6000)
    answer = w.controller.messages.rows[-1]
    assert "room_tokens" not in answer.stats and answer.stats["hint"].startswith("the model could not run with room")
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "target": "another model"})])  # other models: offered
    too_long_typed(qtbot, w, "for the other model")
    assert w.composer.room_button.isVisibleTo(w)


def test_make_room_and_send_sends_nothing_into_another_chat_or_from_an_empty_box(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", LOADED)])
    answered(w, "an earlier chat")
    too_long_typed(qtbot, w)
    w.composer.room_button.click()
    w.new_conversation()  # another chat while the models load
    before = len(w.bridge.calls)
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    assert w.bridge.calls[before:] == [] and w.input.toPlainText() == "a long document"  # it waits for its Send
    assert w.toast.text() == "The model now keeps 8,192 tokens in mind."
    assert not w.composer.note.text().startswith("Loading")


def test_an_answer_out_of_memory_after_make_room_and_send_puts_the_old_length_back(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", LOADED)])
    too_long_typed(qtbot, w)
    w.composer.room_button.click()
    w.bridge.handle_events([P.StatusReport("ready", {**LOADED, "max_context": 8192})])
    rid = w.bridge.calls[-1][1]
    w.bridge.handle_events([P.Error(rid, "out_of_memory", "out of memory (even at the smallest tree budget)", "")])
    assert w.bridge.calls[-1][0] == "load" and w.settings.context_length == 0
    assert "could not run with room for 8,192 tokens" in w.controller.messages.rows[-1].stats["hint"]
    assert w.controller.refused_room() == 8192
