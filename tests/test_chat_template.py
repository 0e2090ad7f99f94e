"""A model's chat template that is broken, or refuses a conversation, is said in words (core.text.chat_template):
these reached the engine as jinja2 tracebacks, reported as the engine's own bug."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_fixtures import save_tiny_pair
from conftest import in_process_engine, make_word_tokenizer
from core.engine import protocol as P
from core.errors import InvalidSettingError, ModelFormatError
from core.text import chat_template
from core.text.prompts import render_chat
from core.text.reasoning import generation_prompt
from core.text.tool_format import tool_call_format

USER = [{"role": "user", "content": "w5 w6"}]
CASES = [
    (
        "{{ raise_exception('This model does not support system messages') }}",
        InvalidSettingError,
        "the model's chat template cannot write this conversation: This model does not support system messages",
    ),
    (
        "{% for m in messages %}{{ m.content }",
        ModelFormatError,
        "the model's chat template is broken (line 1: unexpected '}'): download the model's tokenizer files",
    ),
    (
        "{{ messages[0].nothing.deeper }}",
        InvalidSettingError,
        "the model's chat template cannot write this conversation: 'dict object' has no attribute 'nothing'",
    ),
]


@pytest.mark.parametrize("template, error, words", CASES)
def test_a_template_that_fails_is_an_error_in_words_wherever_it_is_rendered(template, error, words):
    tokenizer = make_word_tokenizer()
    tokenizer.chat_template = template
    with pytest.raises(error) as raised:
        render_chat(tokenizer, USER)
    assert str(raised.value).startswith(words)
    with pytest.raises(error) as raised:  # the thinking markers' probe renders it too
        generation_prompt(tokenizer, USER)
    assert str(raised.value).startswith(words)


def test_the_engine_answers_a_refusing_template_with_the_model_s_words_and_serves_on(tmp_path):
    target, draft = save_tiny_pair(tmp_path)
    engine, serve = in_process_engine()
    serve(P.Load(target=str(target), draft=str(draft), dtype="float64", device="cpu", budget=8))
    engine.session.tokenizer.chat_template = CASES[0][0]
    (error,) = [e for e in serve(P.Generate("r1", tuple(USER), max_new_tokens=3, seed=1)) if isinstance(e, P.Error)]
    assert (error.kind, error.request_id) == ("invalid_setting", "r1") and "support system messages" in error.message
    done = serve(P.Generate("r2", (), prompt="w5 w6", max_new_tokens=3, seed=1))  # no template: still served
    assert isinstance(done[-1], P.Finished)


# a loop in a loop: 10^10 turns, hours of Jinja, each range within the sandbox's own limit
NEVER_ENDS = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ messages[0].content }}"
STOPPED = "the model's chat template did not finish writing the conversation in 0.3 seconds, so it was stopped"
TOOL = {"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}


def test_a_template_that_never_ends_is_stopped_in_time_and_said_in_words(monkeypatch):
    monkeypatch.setattr(chat_template, "TEMPLATE_SECONDS", 0.3)
    tokenizer = make_word_tokenizer()
    tokenizer.chat_template = NEVER_ENDS
    renders = (
        lambda: render_chat(tokenizer, USER),
        lambda: generation_prompt(tokenizer, USER),  # the thinking markers' probe
        lambda: tool_call_format(tokenizer),  # the tools probe, at load: stopped too, not taken for "no tools"
        lambda: render_chat(tokenizer, USER, tools=(TOOL,)),  # not told the model has no tool support
    )
    for render in renders:
        with pytest.raises(ModelFormatError) as raised:
            render()
        assert str(raised.value).startswith(STOPPED) and "download them again" in str(raised.value)


def test_a_model_whose_template_never_ends_is_refused_at_load_in_words(tmp_path, monkeypatch):
    target, draft = save_tiny_pair(tmp_path)
    Path(target, "chat_template.jinja").write_text(NEVER_ENDS)
    monkeypatch.setattr(chat_template, "TEMPLATE_SECONDS", 0.3)
    engine, serve = in_process_engine()
    events = serve(P.Load(target=str(target), draft=str(draft), dtype="float64", device="cpu", budget=8))
    (error,) = [e for e in events if isinstance(e, P.Error)]
    assert error.kind == "model_format" and error.message.startswith(STOPPED)


def test_the_engine_stops_a_template_that_never_ends_and_serves_on(tmp_path, monkeypatch):
    target, draft = save_tiny_pair(tmp_path)
    engine, serve = in_process_engine()
    serve(P.Load(target=str(target), draft=str(draft), dtype="float64", device="cpu", budget=8))
    monkeypatch.setattr(chat_template, "TEMPLATE_SECONDS", 0.3)  # after the load's own renders
    engine.session.tokenizer.chat_template = NEVER_ENDS
    (error,) = [e for e in serve(P.Generate("r1", tuple(USER), max_new_tokens=3, seed=1)) if isinstance(e, P.Error)]
    assert error.request_id == "r1" and error.message.startswith(STOPPED)
    done = serve(P.Generate("r2", (), prompt="w5 w6", max_new_tokens=3, seed=1))  # no template: still served
    assert isinstance(done[-1], P.Finished)
