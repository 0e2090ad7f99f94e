"""The everyday features of the chat window (issue 13): sampling settings and presets, the method, exports,
automatic titles, syntax colours, the context meter; and the screenshots of the new look, light and dark.
No engine process: a recording bridge is fed the events an engine sends."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from PySide6.QtGui import QPalette  # noqa: E402

from core.text.document_text import fenced  # noqa: E402
from app.chat.titles import title_from  # noqa: E402
from app.settings.schema import AppSettings, ConversationSettings, Method, Theme  # noqa: E402
from app.settings.chat_panel import ChatSettingsPanel  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import screenshot  # noqa: E402
from core.engine import protocol as P  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, controller, quiet_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(90)]

CODE_ANSWER = (
    "Here is a palindrome check:\n\n```python\ndef is_palindrome(word: str) -> bool:\n"
    '    """True if `word` reads the same backwards."""\n    cleaned = word.lower()\n'
    '    return cleaned == cleaned[::-1]  # compare with its reverse\n\n\nprint(is_palindrome("Level"))\n```\n\n'
    "It ignores case, so **Level** counts."
)


def test_chat_settings_panel_has_presets_and_advanced_sampling_and_saves_each_change(qtbot):
    settings = ConversationSettings(
        system_prompt="Pirate.",
        temperature=1.1,
        top_p=0.5,
        max_tokens=77,
        top_k=40,
        repetition_penalty=1.15,
        seed=1234,
        method=Method.SPECINFER,
    )
    panel = ChatSettingsPanel(settings, conversation_id=7)
    qtbot.addWidget(panel)
    panel.resize(340, 900)
    panel.show()
    assert panel.values() == settings  # every value exactly, off the sliders' steps too (77 tokens, 1.15)
    assert panel.preset.currentText() == "Custom" and not panel.top_k.isVisible()  # Advanced starts folded
    panel.advanced.setChecked(True)
    assert panel.top_k.isVisible() and panel.seed.isVisible() and panel.method.isVisible()
    saved = []
    panel.changed.connect(lambda conversation_id, values: saved.append((conversation_id, values)))
    panel.preset.setCurrentText("Concise")
    panel._preset_chosen(panel.preset.currentIndex())
    assert saved[-1][0] == 7 and saved[-1][1].system_prompt.startswith("Answer as briefly")
    panel.seed.edit.clear()
    assert panel.seed.edit.placeholderText() == "Random" and saved[-1][1].seed == -1
    panel.temperature.slider.setValue(panel.temperature.slider.value() - 5)  # one step to the left
    assert saved[-1][1].temperature == 1.05
    panel.system_prompt.setPlainText("Talk like a sailor.")  # typing is saved once it pauses...
    assert saved[-1][1].system_prompt != "Talk like a sailor."
    panel.set_settings(ConversationSettings(), conversation_id=8)  # ...or when another chat opens, to its own chat
    assert saved[-1][0] == 7 and saved[-1][1].system_prompt == "Talk like a sailor."
    count = len(saved)
    assert panel.values() == ConversationSettings() and len(saved) == count  # showing another chat saves nothing


def test_sampling_settings_and_method_reach_the_engine(qtbot, controller):
    controller.set_conversation_settings(
        ConversationSettings(top_k=40, repetition_penalty=1.2, seed=7, method=Method.SPECINFER)
    )
    controller.send("hello")
    settings = controller.bridge.calls[-1][3]
    assert (settings["top_k"], settings["repetition_penalty"], settings["seed"], settings["method"]) == (
        40,
        1.2,
        7,
        "specinfer",
    )
    assert ConversationSettings(method=Method.SPECINFER).decoding_method(has_draft=False) == "sequential"
    assert ConversationSettings().decoding_method(has_draft=True) == "auto"  # the engine chooses per pass
    assert AppSettings(context_length=2048).load_request().context_length == 2048
    assert AppSettings(context_length=2048).load_request().fit_context  # a model that keeps less keeps all it can
    assert AppSettings().load_request().context_length is None


def test_automatic_titles():
    assert title_from("Which trains cross the Alps?") == "Which trains cross the Alps?"
    assert title_from("# Sorting\n\nHow do I sort?") == "Sorting"
    # text files added to the message (app.chat.attached_files) are not its title, unless they are all of it
    letter = fenced("letter.txt", "Dear Anna,\n```\nnot a fence of the file's own\n```")
    assert title_from(letter + "\nWhat tone does this letter have?") == "What tone does this letter have?"
    assert title_from("Translate it:\n" + letter) == "Translate it:"
    assert title_from(letter + "\n" + fenced("b.md", "x")) == "letter.txt"
    assert title_from("Explain speculative decoding. Then give an example of a draft tree.") == (
        "Explain speculative decoding"
    )
    long = title_from("please " * 20)
    assert len(long) <= 48 and long.endswith("…") and not long.endswith(" …")


def test_export_markdown_and_json(qtbot, quiet_window, tmp_path):
    w = quiet_window
    w.send("Sort words by length?")
    rid = w.controller.active.request_id
    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events(
            [
                P.TokenChunk(rid, "Use `sorted(words, key=len)`.", (1,)),
                P.Finished(rid, "eos", prompt_tokens=12, generated_tokens=9),
            ]
        )
    w.export_conversation(tmp_path / "chat.md", "markdown")
    text = (tmp_path / "chat.md").read_text()
    assert text.startswith("# Sort words by length?") and "## You" in text and "## Assistant" in text
    assert "Use `sorted(words, key=len)`." in text
    w.export_conversation(tmp_path / "chat.json", "json")
    data = json.loads((tmp_path / "chat.json").read_text())
    assert data["title"] == "Sort words by length?" and [m["role"] for m in data["messages"]] == ["user", "assistant"]
    assert data["messages"][1]["stats"]["tokens"] == 9 and data["settings"]["temperature"] == 0.2  # the built-in's
    assert data["messages"][0]["created_at"].endswith("+00:00")
    # a folder it cannot write to (here, one that is a file): said in the window, not raised out of the menu
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    w.export_conversation(blocked / "chat.md", "markdown")
    assert w.toast.text().startswith(f"The chat was not exported to {blocked / 'chat.md'}: ")


def test_syntax_colours_for_known_languages_only():
    from app.chat.highlight import token_spans

    spans = token_spans("def f():\n    return 1", "python", dark=False)
    keywords = [s for s in spans if s.start == 0]
    assert keywords and keywords[0].length == 3 and keywords[0].color.startswith("#")  # "def"
    assert token_spans("def f(): pass", "no-such-language", dark=False) == []
    assert token_spans("def f(): pass", "", dark=True) == []
    assert token_spans("x = 1", "python", dark=True) != token_spans("x = 1", "python", dark=False)


def test_a_model_that_keeps_less_than_the_setting_says_so_once_per_load(quiet_window):
    """The engine takes the context length in Settings down to what the models keep (the app's Load says
    fit_context): the window says so in words once per load, not on every status report."""
    import dataclasses

    w = quiet_window
    loaded = {"target": "SmolLM2", "draft": "SmolLM2 4-bit", "budget": 16, "max_context": 8192}
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", loaded)])
    assert not w.toast.isVisible()  # automatic: nothing was asked that the model cannot keep
    w.settings = dataclasses.replace(w.settings, context_length=16384)
    w.bridge.handle_events([P.StatusReport("loading", {}), P.StatusReport("ready", loaded)])
    assert w.toast.isVisible() and w.toast.text() == (
        "This model keeps at most 8,192 tokens of a chat, so it uses that instead of the 16,384 set in Settings."
    )
    w.toast.hide()
    w.bridge.handle_events([P.StatusReport("generating", loaded), P.StatusReport("ready", loaded)])
    assert not w.toast.isVisible()  # said once for these models and this setting
    w.settings = dataclasses.replace(w.settings, context_length=8192)
    w.bridge.handle_events([P.StatusReport("loading", {}), P.StatusReport("ready", loaded)])
    assert not w.toast.isVisible()  # the model keeps all that was asked


def test_context_meter_follows_the_prompt_and_the_answer(qtbot, quiet_window):
    w = quiet_window
    w.bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", {"budget": 16, "max_context": 8192})])
    w.send("hello")
    rid = w.controller.active.request_id
    w.bridge.handle_events([P.PromptStarted(rid, prompt_tokens=6000, reused_tokens=0)])
    meter = w.header.context_meter
    assert meter.label.text() == "73% full" and "uses 6,000 of the 8,192 tokens" in meter.toolTip()
    assert meter.bar.property("warn") is False
    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events(
            [P.TokenChunk(rid, "Hi", (1,)), P.Finished(rid, "eos", prompt_tokens=6000, generated_tokens=900)]
        )
    assert meter.label.text() == "84% full" and "uses 6,900 of the 8,192 tokens" in meter.toolTip()
    assert meter.bar.property("warn") is True
    w.send("and again")  # stopped: its Finished carries no counts, yet the meter keeps what it showed
    rid = w.controller.active.request_id
    w.bridge.handle_events(
        [
            P.PromptStarted(rid, prompt_tokens=6910, reused_tokens=6900),
            P.TokenChunk(rid, "Well", (1,)),
            P.PassStats(rid, 4, 1, 1.0, 2.0, 100.0, 16),
        ]
    )
    qtbot.waitUntil(lambda: "uses 6,914 of the 8,192 tokens" in meter.toolTip(), timeout=3000)
    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events([P.Finished(rid, "cancelled")])
    chat = w.controller.conversation_id
    w.new_conversation()
    w.controller.open_conversation(chat)
    assert "uses 6,914 of the 8,192 tokens" in meter.toolTip()  # the same after opening the chat again
    assert meter.label.text() == "84% full"


# ----------------------------------------------------------------------------------------------------------
# Screenshots of the new look (tests/artifacts/, git-ignored): empty, streaming, code, error, settings


@pytest.fixture(params=[Theme.LIGHT, Theme.DARK], ids=["light", "dark"])
def themed(request, qapp):
    from app.theme.manager import ThemeManager

    style = qapp.style().name()
    qapp.setStyle("Fusion")
    theme = ThemeManager(qapp, request.param)
    yield request.param.value
    qapp.setStyleSheet("")
    qapp.styleHints().unsetColorScheme()
    qapp.setStyle(style)
    qapp.setPalette(QPalette())
    theme.deleteLater()


def ready(window) -> None:
    window.bridge.handle_events(
        [
            P.EngineStarted(pid=1),
            P.StatusReport("ready", {"budget": 64, "max_context": 8192, "target": "builtin", "draft": "builtin-draft"}),
        ]
    )


def test_screenshots_of_the_main_states(qtbot, quiet_window, themed, tmp_path):
    w = quiet_window
    w.resize(1180, 760)
    ready(w)
    assert w.chat_view.placeholder.isVisible()
    screenshot(w, f"look-{themed}-1-empty")

    w.send("Write a Python function that checks whether a word is a palindrome.")
    rid = w.controller.active.request_id
    w.bridge.handle_events([P.PromptStarted(rid, prompt_tokens=20480, reused_tokens=0)])
    assert "Reading your message (20,480 tokens)" in w.chat_view.widgets[-1].progress_text()
    screenshot(w, f"look-{themed}-2a-reading-a-long-prompt")
    w.bridge.handle_events(
        [
            P.TokenChunk(rid, CODE_ANSWER[:170], (1,)),
            P.PassStats(rid, 5, 60, 10.0, 40.0, 100.0, 64),
            P.PassStats(rid, 3, 60, 10.0, 40.0, 60.0, 64),
            P.PassStats(rid, 6, 60, 10.0, 40.0, 120.0, 64),
        ]
    )
    qtbot.waitUntil(lambda: "palindrome" in w.chat_view.widgets[-1].body.toPlainText(), timeout=3000)
    assert w.composer.mode == "stop"
    screenshot(w, f"look-{themed}-2-streaming")

    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events(
            [P.TokenChunk(rid, CODE_ANSWER[170:], (1,)), P.Finished(rid, "eos", prompt_tokens=35, generated_tokens=14)]
        )
    w.chat_view.widgets[0].enterEvent(None)  # the mouse over your message: its actions show
    screenshot(w, f"look-{themed}-3-code")

    w.send("Paste: " + "lorem ipsum " * 40)
    rid = w.controller.active.request_id
    with qtbot.waitSignal(w.controller.answer_finished):
        w.bridge.handle_events(
            [
                P.Error(
                    rid,
                    "context_length",
                    "the last message alone is 9,214 tokens with the "
                    "chat template, but the model's context window is 8192",
                    "shorten the message or the system prompt, or start a new conversation",
                )
            ]
        )
    assert w.chat_view.widgets[-1].bubble.property("failed") is True
    screenshot(w, f"look-{themed}-4-error")

    w.bridge.handle_events([P.Error(None, "engine_died", "the engine process (pid 77) was killed by SIGKILL", "")])
    screenshot(w, f"look-{themed}-5-crashed")

    w.open_conversation_settings()
    w.chat_settings.advanced.setChecked(True)
    screenshot(w, f"look-{themed}-6-chat-settings")
    page = w.open_settings()
    page.target.edit.setText(str(tmp_path / "missing-model"))
    page.accept()
    screenshot(w, f"look-{themed}-7-app-settings-error")
    page.cancelled.emit()


def test_branch_in_new_chat_goes_on_from_an_answer_in_a_chat_of_its_own(qtbot, quiet_window):
    """The answer's Branch button (on hover) and the Chat menu's item (the last answer): a new chat, opened, with
    the conversation up to that answer, marked "(branch)" once; the chat it came from stays as it was."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QEnterEvent
    from PySide6.QtWidgets import QApplication

    from app_fixtures import answered, ready

    w = quiet_window
    ready(w.bridge)
    answered(w, "Plan a trip", "Go to Lisbon.")
    answered(w, "In winter?", "Madeira then.")
    original = w.controller.conversation_id
    first_answer = w.chat_view.widgets[1]
    assert not first_answer.branch_button.isVisible()  # on hover only, like Copy
    QApplication.sendEvent(first_answer, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))
    qtbot.waitUntil(first_answer.branch_button.isVisible)
    assert w.chat_view.widgets[0].branch_button is None  # your messages are not branched from
    first_answer.branch_button.click()
    branch = w.controller.conversation_id
    assert branch != original and w.header.title_label.full_text == "Plan a trip (branch)"
    assert [(m.role, m.content) for m in w.controller.messages.rows] == [
        ("user", "Plan a trip"),
        ("assistant", "Go to Lisbon."),
    ]
    assert w.sidebar.current_id() == branch and w.controller.conversations.id_at(0) == branch
    assert QApplication.focusWidget() is w.input
    assert [m.content for m in w.store.messages(original)] == [
        "Plan a trip",
        "Go to Lisbon.",
        "In winter?",
        "Madeira then.",
    ]
    answered(w, "In summer?", "The Azores.")  # the branch goes its own way
    assert [m.content for m in w.store.messages(original)][-1] == "Madeira then."
    assert w.branch_action.isEnabled()
    w.branch_action.trigger()  # the Chat menu: from the last answer, marked once
    assert w.header.title_label.full_text == "Plan a trip (branch)" and w.controller.conversation_id not in (
        original,
        branch,
    )
    assert [m.content for m in w.controller.messages.rows][-1] == "The Azores."
    chats = len(w.store.conversations())
    w.store.db.execute("PRAGMA query_only = ON")  # SQLite refuses every write, as on a full or locked disk
    w.branch_action.trigger()
    w.store.db.execute("PRAGMA query_only = OFF")
    assert w.toast.text().startswith("The chat was not branched: could not save to the conversation database")
    assert len(w.store.conversations()) == chats
    w.send("Then?")  # an answer on its way: nothing to branch from yet
    assert not w.branch_action.isEnabled()
    w.branch(w.controller.messages.rows[-1].id)
    assert w.toast.text() == "The chat was not branched: this answer is not saved yet. Branch from it once it is."
    assert len(w.store.conversations()) == chats


def test_an_answer_edited_is_what_the_model_reads_and_goes_on_from(qtbot, quiet_window):
    """Edit on an answer: its words change in place (Enter saves, Esc cancels), nothing is asked of the model,
    the answer says it was edited, the next turn and Continue send your version; a refused write is said."""
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtGui import QEnterEvent
    from PySide6.QtWidgets import QApplication

    from app_fixtures import answered, ready

    w = quiet_window
    ready(w.bridge)
    answered(w, "Name a prime", "Nine is prime.", reason="length")
    widget = w.chat_view.last_answer()
    QApplication.sendEvent(widget, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))
    qtbot.waitUntil(widget.edit_button.isVisible)
    calls = len(w.bridge.calls)
    widget.edit_button.click()
    assert widget.editor.toPlainText() == "Nine is prime." and widget.resend_button.text() == "Save"
    qtbot.keyClick(widget.editor, Qt.Key.Key_Escape)  # cancelled: nothing changes
    assert widget.editor is None and w.controller.messages.rows[-1].content == "Nine is prime."
    widget.edit_button.click()
    assert not widget.continue_button.isVisibleTo(widget)  # it would go on from the words being changed
    widget.editor.setPlainText("Seven is prime, and")
    qtbot.keyClick(widget.editor, Qt.Key.Key_Return)
    answer = w.controller.messages.rows[-1]
    assert (answer.content, answer.status, answer.stats["edited"]) == ("Seven is prime, and", "complete", True)
    assert w.store.message(answer.id).content == "Seven is prime, and" and len(w.bridge.calls) == calls
    assert widget.body.toPlainText().strip() == "Seven is prime, and"
    assert "Edited by you" in widget.footer.text() and QApplication.focusWidget() is w.input

    w.continue_action.trigger()  # Continue goes on from your words
    _, request_id, messages, settings = w.bridge.calls[-1]
    assert (
        messages[-1] == {"role": "assistant", "content": "Seven is prime, and"} and settings["continue_final_message"]
    )
    w.bridge.handle_events([P.TokenChunk(request_id, " so is eleven.", (9,)), P.Finished(request_id, "eos")])
    answer = w.controller.messages.rows[-1]
    assert answer.content == "Seven is prime, and so is eleven." and answer.stats["edited"]
    answered(w, "Another?", "Thirteen.")
    assert w.bridge.calls[-1][2][1] == {"role": "assistant", "content": "Seven is prime, and so is eleven."}

    w.store.db.execute("PRAGMA query_only = ON")  # SQLite refuses every write, as on a full or locked disk
    assert not w.controller.edit_answer(answer.id, "Two is prime.")
    w.store.db.execute("PRAGMA query_only = OFF")
    assert w.toast.text().startswith("The answer was not changed: could not save to the conversation database")
    assert w.controller.messages.rows[1].content == w.store.message(answer.id).content == answer.content
    assert not w.controller.edit_answer(answer.id, "   ")  # no words: nothing to save
