"""What an answer and the window say, and how (issue 42): one speed for one answer, an empty answer explained,
tables without a stray row and with a shaded header, turns without a name over each, long messages folded,
suggestions that send, plain words where figures were, import errors in plain words. Driven on a real
MainWindow offscreen, with a recording bridge fed engine events (no engine process)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from PySide6.QtGui import QEnterEvent  # noqa: E402
from PySide6.QtCore import QPointF  # noqa: E402
from PySide6.QtWidgets import QApplication, QTextBrowser  # noqa: E402

pytest.register_assert_rewrite("app_fixtures")
from app_fixtures import answered, ready  # noqa: E402

from core.engine import protocol as P  # noqa: E402

pytest_plugins = ["app_fixtures"]  # fixtures: app_paths, quiet_window
pytestmark = [pytest.mark.qt, pytest.mark.timeout(60)]


def hover(widget) -> None:
    QApplication.sendEvent(widget, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))


def test_one_answer_has_one_speed_and_a_switch_clears_it(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    w.send("how fast")
    rid = w.bridge.calls[-1][1]
    # three passes of 2 tokens (6), but the engine counts 5 tokens in the answer (its stop token is not one)
    w.bridge.handle_events(
        [P.TokenChunk(rid, "a b", (7, 8)), P.PassStats(rid, 2, 4, 10.0, 90.0, 20.0, 16)] * 3
        + [P.Finished(rid, "eos", prompt_tokens=4, generated_tokens=5)]
    )
    answer = w.controller.messages.rows[-1]
    qtbot.waitUntil(lambda: w.status_line.speed_button.text() != "Speed")
    bar = float(w.status_line.speed_button.toolTip().split()[0])  # words on the bar, the figure on its tooltip
    assert bar == pytest.approx(answer.stats["tokens_per_s"], abs=0.05)
    widget = w.chat_view.last_answer()
    assert w.status_line.speed_button.text() == widget.speed_label.text().capitalize()  # the same words
    assert f"{answer.stats['tokens_per_s']:.1f} tokens/s" in widget.speed_label.toolTip()
    assert widget.speed_label.text().startswith("about ") and "token" not in widget.speed_label.text()
    w.switch_models(w.settings)
    qtbot.waitUntil(lambda: w.status_line.speed_button.text() == "Speed")


def test_an_empty_answer_says_so_and_one_token_is_singular(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    answered(w, "say nothing", answer="", generated=1)
    widget = w.chat_view.last_answer()
    assert "without writing anything" in widget.footer.text() and widget.footer.isVisibleTo(widget)
    assert widget.speed_label.toolTip().startswith("1 token · ")


def test_an_answer_cut_off_or_stopped_offers_to_continue_it(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    answered(w, "tell me everything", "It all began", reason="length", prompt_tokens=4)
    widget = w.chat_view.last_answer()
    assert widget.footer.isVisibleTo(widget) and widget.continue_button.isVisibleTo(widget)
    assert widget.footer.text().startswith("Cut off at the longest answer: Continue goes on from here")
    assert w.continue_action.isEnabled()

    w.continue_action.trigger()  # the request: the conversation, then the answer so far to go on with
    _, request_id, messages, settings = w.bridge.calls[-1]
    assert settings["continue_final_message"] is True
    assert messages == [
        {"role": "user", "content": "tell me everything"},
        {"role": "assistant", "content": "It all began"},
    ]
    assert w.controller.generating and not widget.continue_button.isVisibleTo(widget)
    assert not w.continue_action.isEnabled()
    w.bridge.handle_events([P.TokenChunk(request_id, " long ago", (8,))])
    with qtbot.waitSignal(w.controller.answer_finished):
        w.controller.stop()  # Stop keeps the words so far, the first part with them
        w.bridge.handle_events([P.Finished(request_id, "cancelled")])
    answer = w.controller.messages.rows[-1]
    assert (answer.content, answer.status) == ("It all began long ago", "stopped")
    assert w.store.message(answer.id).content == "It all began long ago" and len(w.controller.messages.rows) == 2
    assert widget.continue_button.isVisibleTo(widget)  # stopped to read, say: it can go on from there

    answered(w, "and then?", "The end.")  # an answer that ended by itself says nothing of the kind
    assert "Cut off" not in w.chat_view.last_answer().footer.text()
    assert not w.chat_view.last_answer().continue_button.isVisibleTo(w.chat_view.last_answer())


def test_a_cut_off_answer_from_a_remote_server_says_how_to_get_a_longer_one(qtbot, quiet_window):
    """A remote server may not know how to go on with an answer (OpenAI's own writes a new one after it):
    no Continue there, and the footer says what to change instead; an earlier answer, no longer the last,
    says the same."""
    from app.settings.schema import RemoteEndpoint

    w = quiet_window
    ready(w.bridge)
    answered(w, "tell me everything", "It all began", reason="length", prompt_tokens=4)
    first = w.chat_view.last_answer()
    answered(w, "and then?", "Then", reason="length", prompt_tokens=20)
    assert first.footer.text().startswith("Cut off at the longest answer: raise Longest answer in Chat settings")
    assert not first.continue_button.isVisibleTo(first)
    w.settings.endpoints = [RemoteEndpoint("GPU box", "http://127.0.0.1:9/v1", "m")]
    w.settings.connection = "GPU box"
    w.controller.messages.dataChanged.emit(w.controller.messages.index(0), w.controller.messages.index(0))
    last = w.chat_view.last_answer()
    assert not last.continue_button.isVisibleTo(last) and not w.continue_action.isEnabled()
    assert "raise Longest answer in Chat settings (Ctrl+Shift+S), then Regenerate" in last.footer.text()
    assert not w.controller.continue_last_answer()
    # 8,192 tokens kept (ready): this answer fills them
    answered(w, "and all the rest?", "Then", generated=192, reason="length", prompt_tokens=8000)
    footer = w.chat_view.last_answer().footer.text()
    assert "Cut off where the chat fills all the model keeps in mind: a longer Context length" in footer
    assert "Longest answer" not in footer


def test_speed_and_time_show_on_hover_and_no_name_is_repeated(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    answered(w)
    answer = w.chat_view.last_answer()
    assert not answer.speed_label.isVisible() and not answer.time_label.isVisibleTo(answer)
    hover(answer)
    assert answer.speed_label.isVisibleTo(answer) and answer.time_label.isVisibleTo(answer)
    texts = [
        label.text()
        for widget in w.chat_view.widgets
        for label in widget.findChildren(type(answer.time_label))
        if label.isVisibleTo(widget)
    ]
    assert "You" not in texts and "Assistant" not in texts


def test_turns_sit_close_together(qtbot, quiet_window):
    w = quiet_window
    w.resize(1100, 800)
    ready(w.bridge)
    answered(w, "one")
    answered(w, "two")
    QApplication.processEvents()
    first_answer, second_question = w.chat_view.widgets[1], w.chat_view.widgets[2]
    gap = (
        second_question.geometry().top()
        - first_answer.body.mapTo(w.chat_view.widget(), first_answer.body.rect().bottomLeft()).y()
    )
    assert gap <= 48, f"{gap} px between an answer's text and the next question"


def test_a_table_stopped_mid_row_has_no_empty_last_row_and_a_shaded_header(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    answered(w, "a table", answer="| Name | Size |\n| --- | --- |\n| a | 1 |\n| b | 2 |\n|")
    view = w.chat_view.last_answer().body.parts[0]
    assert isinstance(view, QTextBrowser)
    from PySide6.QtGui import QTextTable

    tables = [f for f in view.document().rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert len(tables) == 1 and tables[0].rows() == 3
    assert tables[0].cellAt(0, 0).format().background().color().isValid()
    assert tables[0].cellAt(0, 0).format().background().style() != 0  # shaded
    row_height = (
        view.document()
        .documentLayout()
        .blockBoundingRect(tables[0].cellAt(1, 0).firstCursorPosition().block())
        .height()
    )
    assert row_height < 30


def test_a_very_long_message_is_folded_with_show_more(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    long_text = "word " * 20000
    answered(w, long_text)
    mine = w.chat_view.widgets[0]
    assert mine.fold_button.isVisibleTo(mine) and mine.fold_button.text() == "Show more"
    assert len(mine.body.toPlainText()) < 2000
    mine.fold_button.click()
    assert len(mine.body.toPlainText()) >= len(long_text.strip()) and mine.fold_button.text() == "Show less"
    mine.copy_text()
    assert QApplication.clipboard().text() == long_text.strip() or QApplication.clipboard().text() == long_text


def test_a_suggestion_sends_itself(qtbot, quiet_window):
    w = quiet_window
    ready(w.bridge)
    w.chat_view.suggestion_buttons[0].click()
    assert w.bridge.calls[-1][0] == "generate"
    assert w.controller.messages.rows[0].content == w.chat_view.suggestion_buttons[0].text()
    assert w.input.toPlainText() == ""


def test_a_damaged_config_is_said_in_plain_words(qtbot, quiet_window, tmp_path):
    from core.errors import ModelFormatError
    from core.models.importing import check_model_folder

    folder = tmp_path / "broken-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama", oops}', encoding="utf-8")
    with pytest.raises(ModelFormatError) as caught:
        check_model_folder(folder)
    words = str(caught.value)
    assert "damaged" in words and "broken-model" in words and "Expecting" not in words
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)  # the parser's words stay in the log's chain

    manager = quiet_window.open_model_manager()
    width = manager.width()
    manager.message.setText("Not imported: " + str(folder / ("x" * 400)) + " " + words)
    QApplication.processEvents()
    assert manager.width() == width and manager.back_button.isVisible()
    quiet_window.close_model_manager()


def test_the_window_opens_where_it_was_and_a_broken_record_is_ignored(qtbot, app_paths):
    from app_fixtures import recording_bridge_class

    from app.window.main_window import MainWindow

    def open_window():
        window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
        qtbot.addWidget(window)
        return window

    first = open_window()
    first.resize(720, 520)
    first.show()
    qtbot.waitExposed(first)
    first.close()
    assert app_paths.window_file.is_file()
    second = open_window()
    assert (second.width(), second.height()) == (720, 520)
    second.close()
    for garbage in ("not json", '{"geometry": "%%%"}', '{"geometry": "AAAA"}', "[1, 2]", "x" * 10000):
        app_paths.window_file.write_text(garbage, encoding="utf-8")
        third = open_window()  # no exception: the default size
        assert third.width() > 0
        third.deleteLater()


def test_the_api_server_shows_in_the_status_bar_not_over_the_chat(qtbot, app_paths):
    import dataclasses

    from app_fixtures import recording_bridge_class

    from app.settings.schema import AppSettings
    from app.window.main_window import MainWindow

    settings = dataclasses.replace(AppSettings(), api_server=True, api_server_port=0, api_server_key="k" * 32)
    window = MainWindow(app_paths, settings=settings, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    try:
        assert window.api_server.url, window.api_server.error
        port = window.api_server.url.rsplit(":", 1)[1]
        assert window.status_line.api_label.isVisibleTo(window) and port in window.status_line.api_label.text()
        assert window.toast.text() == ""
        window.apply_settings(dataclasses.replace(settings, api_server=False))
        assert not window.status_line.api_label.isVisibleTo(window)
    finally:
        window.close()


def test_regenerate_samples_freely_enough_to_give_another_answer(qtbot, quiet_window):
    from app.chat.controller import REGENERATE_TEMPERATURE, REGENERATE_TOP_P
    from app.settings.schema import ConversationSettings

    w = quiet_window
    ready(w.bridge)
    answered(w, "tell me a fact")
    w.controller.set_conversation_settings(ConversationSettings(temperature=0.2, top_p=0.5))  # the built-in's
    w.controller.regenerate()
    asked = w.bridge.calls[-1][3]
    assert (asked["temperature"], asked["top_p"]) == (REGENERATE_TEMPERATURE, REGENERATE_TOP_P)
    assert w.controller.conversation_settings().temperature == 0.2  # the chat's own settings stay
    rid = w.bridge.calls[-1][1]
    w.bridge.handle_events(
        [P.TokenChunk(rid, "another", (7,)), P.Finished(rid, "eos", prompt_tokens=4, generated_tokens=1)]
    )
    w.controller.set_conversation_settings(ConversationSettings(temperature=0.2, top_p=0.5, seed=7))
    w.controller.regenerate()  # a fixed seed asks for the same answer: left as set
    assert (w.bridge.calls[-1][3]["temperature"], w.bridge.calls[-1][3]["seed"]) == (0.2, 7)


def test_new_users_are_not_offered_llama_2(qtbot, tmp_path, monkeypatch):
    from pathlib import Path

    from app.models.wizard.wizard import FirstRunWizard
    from app.settings.schema import AppSettings

    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(Path(__file__).parent / "fixtures" / "hw" / "gpu12-ram16-pcie3.json"))
    wizard = FirstRunWizard(AppSettings(), tmp_path / "models")
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=20000)
    wizard.next()
    ids = [fit.pair.id for fit in wizard.choose_page.pairs.fits]
    assert "builtin" in ids and len(ids) >= 3
    assert not any(fit.pair.calibration for fit in wizard.choose_page.pairs.fits)
    wizard.reject()


def test_documents_added_to_a_message_show_as_a_line_each_until_show_more(qtbot, quiet_window):
    """A document in your bubble is its name and size in a line; Show more shows it whole, and Copy and Edit
    keep it whole."""
    from core.text.document_text import fenced

    w = quiet_window
    ready(w.bridge)
    message = fenced("minutes.txt", "Budget approved.\nNext meeting: Friday.") + "What was decided?"
    answered(w, message)
    mine = w.chat_view.widgets[0]
    assert mine.body.toPlainText() == "minutes.txt (document, 2 lines)\nWhat was decided?"
    assert mine.fold_button.isVisibleTo(mine) and mine.fold_button.text() == "Show more"
    mine.fold_button.click()
    assert mine.body.toPlainText() == message
    mine.copy_text()
    assert QApplication.clipboard().text() == message
    answered(w, "a question alone")  # nothing to fold: no button
    assert not w.chat_view.widgets[2].fold_button.isVisibleTo(w.chat_view.widgets[2])
