"""The desktop app driven like a user, against a REAL engine process running a tiny model pair.

One engine (spawned, tiny Llama pair loaded from folders) is shared by every window of this module; each
test opens its own window on its own tmp data dir. The kill test runs last: it kills the engine and
restarts it through the banner. Screenshots of the main states go to tests/artifacts/.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from app.conversations import store as S  # noqa: E402
from app.engine.bridge import CRASHED, FAILED, READY  # noqa: E402
from app.window.main_window import MainWindow  # noqa: E402
from app.settings.schema import ConversationSettings, save_settings  # noqa: E402
from app.conversations.store import Store  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")  # it is also a plugin (pytest_plugins below)
from app_fixtures import CONTEXT, process_alive, screenshot, tiny_settings  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, tiny_models, shared_bridge

pytestmark = [pytest.mark.qt, pytest.mark.timeout(180)]

ANSWER_TIMEOUT_MS = 60_000
LONG = 2000  # max tokens for answers that must still be running when we press Stop / kill the engine


@pytest.fixture(scope="module", autouse=True)
def styled(qapp):
    """The app's look (Fusion, light theme, stylesheet) for the screenshots; undone after the module."""
    from app.theme.manager import ThemeManager
    from app.settings.schema import Theme

    style = qapp.style().name()
    qapp.setStyle("Fusion")
    theme = ThemeManager(qapp, Theme.LIGHT)
    yield theme
    qapp.setStyleSheet("")
    qapp.styleHints().unsetColorScheme()
    qapp.setStyle(style)
    theme.deleteLater()


@pytest.fixture()
def window_factory(qtbot, app_paths, tiny_models, shared_bridge):
    """Open a main window on the tmp data dir, sharing the module's engine (the window does not own it)."""
    settings = tiny_settings(*tiny_models)
    save_settings(settings, app_paths.settings_file)
    stores = []

    def make(**conversation) -> MainWindow:
        store = Store(app_paths.database)
        stores.append(store)
        window = MainWindow(app_paths, store=store, bridge=shared_bridge, confirm_delete=False)
        if conversation:
            window.controller.app_settings.defaults = ConversationSettings(
                **{**vars(settings.defaults), **conversation}
            )
        qtbot.addWidget(window)
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


def rows(window: MainWindow) -> list[tuple[str, str]]:
    return [(m.role, m.status) for m in window.controller.messages.rows]


def wait_streaming(qtbot, window: MainWindow, chars: int = 30) -> None:
    """Until the answer on screen has some text and is still streaming."""
    qtbot.waitUntil(lambda: len(window.controller.messages.rows[-1].content) >= chars, timeout=ANSWER_TIMEOUT_MS)
    assert window.controller.generating


@pytest.mark.slow
def test_send_message_streams_the_answer_into_the_view_and_the_store(qtbot, window_factory):
    window = window_factory()
    assert window.chat_view.placeholder.isVisible()
    assert window.bridge.status.state == READY and window.status_line.state_text().startswith("Ready")
    screenshot(window, "01-empty")

    qtbot.keyClicks(window.input, "Hello there")
    qtbot.keyClick(window.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)  # Shift+Enter: new line
    assert window.input.toPlainText() == "Hello there\n"
    send(qtbot, window, "w10 w11 w12")

    assert window.input.toPlainText() == ""
    assert rows(window) == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]
    user, answer = window.controller.messages.rows
    assert user.content == "Hello there\nw10 w11 w12"
    assert answer.content.strip() and answer.stats["reason"] == "length" and answer.stats["generated_tokens"] == 24
    stored = window.store.messages(window.controller.conversation_id)
    assert [(m.role, m.content, m.status) for m in stored] == [(m.role, m.content, m.status) for m in (user, answer)]
    view = window.chat_view.widgets[1]
    assert view.body.toPlainText().split() == answer.content.split()  # rendered (markdown: whitespace may fold)
    assert view.speed_label.text().startswith("about ") and "tokens/s" in view.speed_label.toolTip()
    # 24 tokens, the chat's longest answer here: it says how to get a whole one (the speed shows on hover)
    assert view.footer.text().startswith("Cut off at the longest answer")
    details = window.status_line.details
    qtbot.waitUntil(lambda: details.speed_label.text().startswith("About "))
    assert details.chart.bars() and details.budget_label.text().startswith("Tree budget: 16 ")
    bar = window.status_line.speed_button  # the speed on the bar in words, the figure on hover, details a click away
    assert bar.text().startswith("About ") and "token" not in bar.text() and "tokens per second" in bar.toolTip()
    assert window.title_label.text() == "Hello there"  # the automatic title: the first line
    assert window.composer.mode == "send" and window.send_button.isEnabled()
    assert window.chat_view.last_answer().regenerate_button.isEnabled()
    assert window.chat_view.widgets[1].time_label.text()  # when it was written


@pytest.mark.slow
def test_a_message_is_counted_as_it_is_written_and_the_count_is_the_prompt_it_sends(qtbot, window_factory):
    """The context meter shows the chat with the message being written, counted by the engine: the prompt
    sending it makes. Not while an answer streams (the chat is about to change); counted again at its end."""
    window = window_factory(max_tokens=LONG)
    meter = window.header.context_meter
    qtbot.keyClicks(window.input, "w10 w11 w12")
    first = counted(qtbot, window)
    assert first.fits and first.dropped_messages == 0 and not window.composer.note.isVisible()
    assert meter.used == first.prompt_tokens and meter.toolTip().startswith("With the message you are writing")
    with qtbot.waitSignal(window.controller.prompt_started, timeout=ANSWER_TIMEOUT_MS) as read:
        send(qtbot, window, "", wait=False)
    assert read.args == [first.prompt_tokens] and window.draft_counter.count is None  # the box is empty again
    qtbot.keyClicks(window.input, "w20 w21")  # typed while the answer streams
    qtbot.waitUntil(lambda: not window.draft_counter._timer.isActive(), timeout=ANSWER_TIMEOUT_MS)
    assert window.controller.generating and window.draft_counter.count is None
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        window.controller.stop()
    answer = window.controller.messages.rows[-1]
    second = counted(qtbot, window)  # the chat with its answer, then the new message
    assert second.prompt_tokens > answer.stats["prompt_tokens"] + answer.stats["generated_tokens"]
    assert meter.used == second.prompt_tokens
    window.input.clear()
    assert window.draft_counter.count is None and not meter.toolTip().startswith("With the message")
    assert meter.used == answer.stats["prompt_tokens"] + answer.stats["generated_tokens"]


@pytest.mark.slow
def test_stop_keeps_the_partial_answer(qtbot, window_factory):
    window = window_factory(max_tokens=LONG)
    send(qtbot, window, "w20 w21", wait=False)
    wait_streaming(qtbot, window)
    assert window.composer.mode == "stop" and window.send_button.accessibleName() == "Stop the answer"
    assert window.chat_view.widgets[1].status_label.text() == "writing…"
    qtbot.waitUntil(lambda: window.status_line.speed_button.text().startswith("About "))
    qtbot.waitUntil(lambda: len(window.chat_view.widgets[1].body.toPlainText()) > 10)  # rendered while streaming
    screenshot(window, "02-streaming")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS) as finished:
        qtbot.mouseClick(window.send_button, Qt.MouseButton.LeftButton)  # the send button stops while streaming
    assert finished.args[1] == S.STOPPED
    answer = window.controller.messages.rows[-1]
    assert answer.status == S.STOPPED and answer.content.strip()
    assert 0 < answer.stats["generated_tokens"] < LONG and answer.stats["reason"] == "cancelled"
    assert window.store.message(answer.id).content == answer.content  # the kept text is the saved text
    assert window.chat_view.widgets[1].status_label.text() == ""  # said once, in the footer
    assert window.chat_view.widgets[1].footer.text().startswith("Stopped")


@pytest.mark.slow
def test_regenerate_keeps_the_old_answer_as_an_alternative(qtbot, window_factory):
    window = window_factory()
    send(qtbot, window, "w30 w31")
    old = window.controller.messages.rows[-1]
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(window.chat_view.last_answer().regenerate_button, Qt.MouseButton.LeftButton)
    assert rows(window) == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]
    new = window.controller.messages.rows[-1]
    assert new.id != old.id and new.content.strip() and (new.alt_index, new.alt_count) == (1, 2)
    assert window.store.message(old.id).content == old.content  # kept
    assert [m.id for m in window.store.messages(window.controller.conversation_id)][-1] == new.id
    answer = window.chat_view.last_answer()
    assert answer.alternative_label.text() == "2 / 2" and answer.previous_button.isEnabled()
    qtbot.mouseClick(answer.previous_button, Qt.MouseButton.LeftButton)  # flip back
    assert window.controller.messages.rows[-1].id == old.id
    assert window.chat_view.last_answer().alternative_label.text() == "1 / 2"
    assert [m.id for m in window.store.messages(window.controller.conversation_id)][-1] == old.id
    assert window.controller.history(window.controller.conversation_id)[-1]["content"] == old.content


@pytest.mark.slow
def test_edit_and_resend_drops_the_later_turns(qtbot, window_factory):
    window = window_factory()
    send(qtbot, window, "w40 w41")
    send(qtbot, window, "w42 w43")
    assert len(window.chat_view.widgets) == 4
    first_user = window.chat_view.widgets[0]
    qtbot.mouseClick(first_user.edit_button, Qt.MouseButton.LeftButton)
    assert first_user.editor is not None and first_user.editor.toPlainText() == "w40 w41"
    first_user.editor.setPlainText("w50 w51 edited")
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(first_user.resend_button, Qt.MouseButton.LeftButton)
    assert rows(window) == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]
    stored = window.store.messages(window.controller.conversation_id)
    assert [m.content for m in stored][0] == "w50 w51 edited" and len(stored) == 2
    assert window.chat_view.widgets[0].body.toPlainText().strip() == "w50 w51 edited"


@pytest.mark.slow
def test_conversations_survive_an_app_restart(qtbot, window_factory, app_paths):
    window = window_factory()
    send(qtbot, window, "w11 first chat")
    first = window.controller.conversation_id
    qtbot.mouseClick(window.sidebar.new_button, Qt.MouseButton.LeftButton)
    send(qtbot, window, "w12 second chat")
    second = window.controller.conversation_id
    before = {cid: [(m.role, m.content, m.status) for m in window.store.messages(cid)] for cid in (first, second)}
    window.close()
    window.store.close()

    again = window_factory()  # a new window and a new store on the same files: what a restart does
    assert [
        again.controller.conversations.data(again.controller.conversations.index(r))
        for r in range(again.controller.conversations.rowCount())
    ] == ["w12 second chat", "w11 first chat"]
    assert again.controller.conversation_id == second  # the most recent one is open
    assert {
        cid: [(m.role, m.content, m.status) for m in again.store.messages(cid)] for cid in (first, second)
    } == before
    again.sidebar.view.setCurrentIndex(again.controller.conversations.index(1))
    assert again.controller.conversation_id == first
    assert [m.content for m in again.controller.messages.rows] == [c for _, c, _ in before[first]]
    assert len(again.chat_view.widgets) == 2


@pytest.mark.slow
def test_code_block_answer_renders_as_a_card_with_a_copy_button(qtbot, window_factory, app_paths):
    setup = Store(app_paths.database)
    cid = setup.create_conversation("Sorting in Python")
    setup.add_message(cid, "user", "How do I sort a list of words by length?")
    setup.add_message(
        cid,
        "assistant",
        (
            'Use `sorted` with a **key**:\n\n```python\nwords = ["pear", "fig", "banana"]\n'
            "print(sorted(words, key=len))\n```\n\n| word | length |\n|---|---|\n| fig | 3 |\n| pear | 4 |\n\n"
            "1. `key=len` sorts by length\n2. add `reverse=True` for longest first\n"
        ),
    )
    setup.close()
    window = window_factory()
    assert window.controller.conversation_id == cid
    answer = window.chat_view.widgets[1]
    (card,) = answer.body.code_cards()
    assert card.language_label.text() == "python" and card.copy_button.isVisibleTo(window)
    prose_after = answer.body.parts[2]
    assert "<table" in prose_after.toHtml() and "print(sorted(words, key=len))" in answer.body.toPlainText()
    from app.chat.highlight import token_spans

    builtin_colour = next(span.color for span in token_spans("print(1)", "python", dark=False) if span.start == 0)
    html = card.view.toHtml()
    assert f'color:{builtin_colour.lower()};">print</span>' in html.replace(" color", "color")  # Pygments colours
    copied = []
    answer.copied.connect(copied.append)
    card.copy_button.click()
    assert QGuiApplication.clipboard().text() == 'words = ["pear", "fig", "banana"]\nprint(sorted(words, key=len))'
    assert copied == ["python code"] and card.copy_button.text() == "Copied"
    screenshot(window, "03-finished-code-block")


@pytest.mark.slow
def test_model_that_fails_to_load_shows_a_banner_and_good_settings_recover(qtbot, window_factory, tiny_models):
    window = window_factory()
    good = window.settings
    with qtbot.waitSignal(window.bridge.engine_failed, timeout=ANSWER_TIMEOUT_MS) as failed:
        window.apply_settings(dataclasses.replace(good, target=str(window.paths.data_dir / "no-such-model")))
    assert failed.args[0].kind == "model_not_found"
    assert window.bridge.status.state == FAILED and window.status_line.state_text().startswith("No model loaded")
    assert window.banner.isVisible() and "could not be loaded" in window.banner.label.text()
    # a model that is not where the settings say (a drive unplugged, a folder moved): the way back in words
    missing = window.paths.data_dir / "no-such-model"
    assert (
        f"The model is no longer at {missing}. If it is on a drive that is not plugged in, plug it in and press Retry"
        in (window.banner.label.text())
    )
    assert "'builtin'" not in window.banner.label.text()  # the command line's words stay under Details
    assert window.banner.buttons["settings"].isVisible() and window.banner.buttons["retry"].isVisible()
    assert not window.send_button.isEnabled()
    window.apply_settings(good)  # what OK in the settings dialog does
    qtbot.waitUntil(lambda: window.bridge.status.state == READY, timeout=ANSWER_TIMEOUT_MS)
    assert not window.banner.isVisible() and window.send_button.isEnabled()
    send(qtbot, window, "w70 back again")
    assert rows(window) == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]


# Make room (app/window/room_host.py; the offer's words: tests/test_app_context.py) -----------------------------

SHORT_CONTEXT = 2048  # the smallest length Settings offer; the tiny models keep CONTEXT (4,096)
LONG_MESSAGE = " ".join(f"w{6 + i % 50}" for i in range(2300))  # ~2,300 tokens: more than 2,048, less than 4,096


def short_context_window(qtbot, window_factory) -> MainWindow:
    """A window on the module's engine, loaded again with room for SHORT_CONTEXT tokens."""
    window = window_factory()
    window.apply_settings(dataclasses.replace(window.settings, context_length=SHORT_CONTEXT))
    qtbot.waitUntil(lambda: loaded_with(window, SHORT_CONTEXT), timeout=ANSWER_TIMEOUT_MS)
    return window


def loaded_with(window: MainWindow, context: int) -> bool:
    status = window.bridge.status
    return status.state == READY and status.models.get("max_context") == context


def counted(qtbot, window: MainWindow):
    """The engine's count of the message in the box (app.chat.draft_count), once it came."""
    qtbot.waitUntil(lambda: window.draft_counter.count is not None, timeout=ANSWER_TIMEOUT_MS)
    return window.draft_counter.count


def send_too_long(qtbot, window: MainWindow) -> S.Message:
    window.input.setPlainText(LONG_MESSAGE)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS) as ended:
        qtbot.keyClick(window.input, Qt.Key.Key_Return)
    assert ended.args[1] == S.FAILED
    return window.controller.messages.rows[-1]


def saved_context(window: MainWindow) -> int:
    return json.loads(window.paths.settings_file.read_text(encoding="utf-8"))["context_length"]


@pytest.mark.slow
def test_make_room_loads_the_model_with_a_context_that_holds_the_message_and_answers_it(qtbot, window_factory):
    window = short_context_window(qtbot, window_factory)
    window.input.setPlainText(LONG_MESSAGE)  # said under the box before it is sent, with the way out
    count = counted(qtbot, window)
    note = window.composer.note
    assert not count.fits and note.isVisible()
    assert note.text().startswith(
        f"Too long for the model: about {count.prompt_tokens:,} tokens, and it keeps 2,048 in mind now. Make room "
        "and send, or shorten it."
    )
    room = window.composer.room_button  # Make room and send: the next test; here the message is sent as it is
    assert room.isVisible() and "room for 4,096 tokens" in room.toolTip()
    meter = window.header.context_meter
    assert (meter.used, meter.label.text()) == (
        count.prompt_tokens,
        "100% full",
    ) and "more than the 2,048" in meter.toolTip()
    failed = send_too_long(qtbot, window)
    prompt = failed.stats["prompt_tokens"]
    assert prompt == count.prompt_tokens and not note.isVisible()  # the count was the prompt the engine refused
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
    window.input.setPlainText(LONG_MESSAGE)  # it fits now, the chat before it does not: the meter says what goes
    count = counted(qtbot, window)
    assert (count.fits, count.dropped_messages, count.prompt_tokens) == (True, 2, prompt) and not note.isVisible()
    assert meter.used == prompt and "leaves the oldest 2 messages out of what it sees" in meter.toolTip()


@pytest.mark.slow
def test_make_room_and_send_answers_a_message_too_long_without_failing_it_first(qtbot, window_factory):
    window = short_context_window(qtbot, window_factory)
    window.input.setPlainText(LONG_MESSAGE)
    count = counted(qtbot, window)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=ANSWER_TIMEOUT_MS) as ended:
        qtbot.mouseClick(window.composer.room_button, Qt.MouseButton.LeftButton)
        assert window.composer.note.text().startswith("Loading the model again with room for 4,096 tokens")
    assert ended.args[1] == S.COMPLETE and loaded_with(window, CONTEXT)
    assert window.settings.context_length == CONTEXT == saved_context(window)
    rows = window.controller.messages.rows
    assert [(m.role, m.status) for m in rows] == [("user", S.COMPLETE), ("assistant", S.COMPLETE)]
    assert rows[0].content == LONG_MESSAGE and rows[-1].stats["prompt_tokens"] == count.prompt_tokens
    assert window.input.toPlainText() == "" and not window.composer.note.isVisible()


@pytest.mark.slow
def test_a_load_that_dies_while_making_room_puts_the_old_length_back(qtbot, window_factory):
    """The engine killed while it loads with the longer context (as the system kills a process that runs out
    of memory): the length goes back, a new engine loads the models as they were, and the answer says that
    only a shorter message helps."""
    window = short_context_window(qtbot, window_factory)
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
    assert window.toast.text().startswith("The model could not run with room for 4,096 tokens")
    answer = window.controller.messages.rows[-1]
    assert answer.id == failed.id and answer.status == S.FAILED and "room_tokens" not in answer.stats
    assert "could not run with room for 4,096 tokens: shorten the message" in answer.stats["hint"]
    assert window.store.message(answer.id).stats["hint"] == answer.stats["hint"]  # saved
    assert not window.chat_view.last_answer().room_button.isVisible()
    assert not window.banner.isVisible() and window.send_button.isEnabled()


@pytest.mark.slow
def test_killed_engine_shows_banner_keeps_chat_and_restart_works(qtbot, window_factory):
    """Runs last in this module: it kills the shared engine and restarts it through the banner."""
    window = window_factory(max_tokens=LONG)
    send(qtbot, window, "w60 w61", wait=False)
    wait_streaming(qtbot, window)
    pid = window.bridge.status.pid
    assert pid and process_alive(pid)
    with qtbot.waitSignal(window.controller.answer_finished, timeout=10_000) as ended:
        os.kill(pid, signal.SIGKILL)
    assert ended.args[1] == S.INTERRUPTED
    assert window.bridge.status.state == CRASHED and window.status_line.state_text().startswith("The engine stopped")
    assert window.banner.isVisible() and "SIGKILL" in window.banner.details()
    assert window.banner.buttons["restart"].isVisible()
    answer = window.controller.messages.rows[-1]
    assert answer.status == S.INTERRUPTED and answer.content.strip()
    assert window.store.message(answer.id).status == S.INTERRUPTED
    assert window.store.message(answer.id).content == answer.content
    assert "Interrupted" in window.chat_view.widgets[1].footer.text()
    assert "pid" not in window.chat_view.widgets[1].footer.text()  # plain words; the banner's Details has them
    assert not window.send_button.isEnabled()
    screenshot(window, "04-crashed")

    qtbot.mouseClick(window.banner.buttons["restart"], Qt.MouseButton.LeftButton)
    assert not window.banner.isVisible()
    qtbot.waitUntil(lambda: window.bridge.status.state == READY, timeout=90_000)
    assert window.bridge.status.pid not in (None, pid)
    short = dataclasses.replace(window.controller.conversation_settings(), max_tokens=12)
    window.controller.set_conversation_settings(short)
    send(qtbot, window, "w62 after restart")
    assert rows(window) == [
        ("user", S.COMPLETE),
        ("assistant", S.INTERRUPTED),
        ("user", S.COMPLETE),
        ("assistant", S.COMPLETE),
    ]
