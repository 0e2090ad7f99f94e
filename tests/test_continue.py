"""An answer continued from where it was cut off (core.text.continuation, Generate.continue_final_message): the
prompt is the conversation before the answer plus the answer as the model wrote it, so a scripted model goes
on mid-thought or mid-answer; what cannot be continued is refused in words; trimming keeps the question."""

from __future__ import annotations

import json

import pytest

from conftest import in_process_engine, run_cli, torch_threads
from core.engine import protocol as P
from core.engine.session import fit_conversation
from core.errors import ContextLengthError, InvalidSettingError
from core.text.continuation import answer_so_far, answer_to_continue, continued_format
from core.text.prompts import Prompt, encode_prompt
from core.text.reasoning import ThinkingFormat, split_text
from thinking_models import (
    ANSWER,
    ANSWER_TEXT,
    END_THINK,
    QWEN3_TEMPLATE,
    R1_TEMPLATE,
    THINK,
    THOUGHT,
    THOUGHT_TEXT,
    make_thinking_tokenizer,
    save_thinking_pair,
)

pytestmark = pytest.mark.timeout(240)

USER = [{"role": "user", "content": "w40 w41"}]
MID_THOUGHT = {"role": "assistant", "content": "", "reasoning_content": "w20"}
MID_ANSWER = {"role": "assistant", "content": "w30", "reasoning_content": THOUGHT_TEXT}
NO_THOUGHT = {"role": "assistant", "content": "w30"}


def _continued_ids(template: str, answer: dict) -> list[int]:
    """The ids a continued prompt adds after the prompt of the question alone."""
    tokenizer = make_thinking_tokenizer(template)
    question = encode_prompt(tokenizer, Prompt(messages=tuple(USER)))
    ids = encode_prompt(tokenizer, Prompt(messages=(*USER, answer), continue_final=True))
    assert ids[: len(question)] == question  # the question's prompt, generation prompt included, unchanged
    return ids[len(question) :]


@pytest.mark.parametrize(
    "template,answer,written",
    [
        (R1_TEMPLATE, MID_THOUGHT, [20]),  # the prompt opened the block: the thought follows it
        (R1_TEMPLATE, MID_ANSWER, [*THOUGHT, END_THINK, 30]),
        (R1_TEMPLATE, NO_THOUGHT, [END_THINK, 30]),  # the block the prompt opened was closed at once
        (QWEN3_TEMPLATE, MID_THOUGHT, [THINK, 20]),  # the model opens the block itself
        (QWEN3_TEMPLATE, MID_ANSWER, [THINK, *THOUGHT, END_THINK, 30]),
        (QWEN3_TEMPLATE, NO_THOUGHT, [30]),
    ],
)
def test_the_answer_so_far_follows_the_prompt_as_the_model_wrote_it(template, answer, written):
    """Each case is a prefix of what the scripted model writes after its generation prompt (thinking_models
    SCRIPT), whether or not the template would keep an earlier answer's thinking (R1's drops it)."""
    assert _continued_ids(template, answer) == written


def test_the_written_answer_reads_back_as_the_answer_it_came_from():
    """answer_so_far and the splitter are inverses: the text made for the model splits into the same thought
    and answer, whichever side of the prompt opened the block."""
    for fmt in (ThinkingFormat(starts_inside=True), ThinkingFormat()):
        for reasoning, content in (("a thought\n\nof two lines", "An answer."), ("", "Only an answer"), ("cut", "")):
            answer = {"role": "assistant", "content": content, "reasoning_content": reasoning}
            whole = split_text(answer_so_far(answer, fmt), fmt)
            assert (whole.reasoning, whole.content) == (reasoning, content), (fmt, reasoning, content)


def test_the_text_that_follows_is_read_from_where_the_answer_stopped():
    fmt = ThinkingFormat(starts_inside=False)
    inside = continued_format(MID_THOUGHT, fmt)
    assert inside is not None and inside.starts_inside and inside.resumes
    assert continued_format(MID_ANSWER, fmt) is None  # text from here on, a "<think>" in it included
    assert continued_format(MID_THOUGHT, None) is None  # a model that does not think


@pytest.mark.parametrize(
    "messages,words",
    [
        (USER, "ends with a 'user' message"),
        ([*USER, {"role": "assistant", "content": ""}], "empty"),
        ([*USER, {"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}], "tools' results"),
        ([{"role": "assistant", "content": "x"}], "the message it answers"),
        ([], "ends with a 'nothing' message"),
    ],
)
def test_what_cannot_be_continued_is_said(messages, words):
    with pytest.raises(InvalidSettingError, match=words):
        answer_to_continue(messages)


def test_trimming_a_long_chat_keeps_the_question_with_the_answer_it_continues():
    tokenizer = make_thinking_tokenizer(QWEN3_TEMPLATE)
    old = [{"role": "user", "content": "w50 " * 40}, {"role": "assistant", "content": "w51 " * 40}]
    messages = [*old, *USER, MID_ANSWER]
    whole = fit_conversation(tokenizer, messages, 1000, 10, continue_final=True)
    trimmed = fit_conversation(tokenizer, messages, 40, 10, continue_final=True)
    assert (whole.dropped_messages, trimmed.dropped_messages) == (0, 2)
    assert trimmed.prompt_ids == encode_prompt(tokenizer, Prompt(messages=(*USER, MID_ANSWER), continue_final=True))
    assert trimmed.thinking is None  # the answer has text: what follows is text
    with pytest.raises(ContextLengthError, match="the last message and the answer so far"):
        fit_conversation(
            tokenizer, [{"role": "system", "content": "w52 " * 20}, *USER, MID_ANSWER], 20, 10, True, (), None, True
        )


# ----------------------------------------------------------------------------------------------------------
# The engine


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The scripted thinking pair's folders under each template."""
    return {
        name: save_thinking_pair(tmp_path_factory.mktemp(name), template)
        for name, template in (("r1", R1_TEMPLATE), ("qwen3", QWEN3_TEMPLATE))
    }


@pytest.fixture(scope="module")
def engines(pairs):
    """An in-process engine per template, loaded with its scripted thinking pair."""
    served = {}
    for name, (target, draft) in pairs.items():
        _, serve = in_process_engine()
        with torch_threads(1):
            events = serve(
                P.Load(target=target, draft=draft, dtype="float32", device="cpu", budget=8, max_depth=4, expand=4)
            )
        assert isinstance(events[-1], P.StatusReport), events
        served[name] = serve
    return served


def _continue(serve, messages, **settings) -> tuple[str, str, P.Finished | P.Error]:
    with torch_threads(1):
        events = serve(
            P.Generate(
                request_id=f"continue-{len(messages)}-{len(settings)}",
                messages=tuple(messages),
                method="specexec",
                seed=1,
                max_new_tokens=20,
                continue_final_message=True,
                **settings,
            )
        )
    chunks = [e for e in events if isinstance(e, P.TokenChunk)]
    end = next(e for e in events if isinstance(e, (P.Finished, P.Error)))
    return "".join(c.reasoning for c in chunks), "".join(c.text for c in chunks), end


@pytest.mark.parametrize("template", ["r1", "qwen3"])
def test_the_engine_goes_on_with_an_answer_cut_off_while_thinking(engines, template):
    """The thought goes on from its last word (its space kept: the two pieces join into the whole thought),
    then the answer comes; only the new tokens are counted."""
    reasoning, text, end = _continue(engines[template], [*USER, MID_THOUGHT])
    assert isinstance(end, P.Finished) and end.reason == "eos"
    assert ("w20" + reasoning, text) == (THOUGHT_TEXT, ANSWER_TEXT)
    assert end.generated_tokens == len(THOUGHT) - 1 + 1 + len(ANSWER)  # w21 w22 </think> w30 w31


@pytest.mark.parametrize("template", ["r1", "qwen3"])
def test_the_engine_goes_on_with_an_answer_cut_off_mid_sentence(engines, template):
    reasoning, text, end = _continue(engines[template], [*USER, MID_ANSWER])
    assert isinstance(end, P.Finished) and end.reason == "eos"
    assert (reasoning, "w30" + text) == ("", ANSWER_TEXT)  # no thinking again: text only
    assert end.generated_tokens == 1


def test_the_engine_refuses_what_it_cannot_continue(engines):
    for messages, settings in (
        (USER, {}),  # nothing to continue
        ([*USER, MID_ANSWER], {"grammar_kind": "json_object"}),  # a grammar reads the answer from its start
    ):
        _, _, end = _continue(engines["qwen3"], messages, **settings)
        assert isinstance(end, P.Error) and end.kind == "invalid_setting", end
    _, _, end = _continue(engines["qwen3"], [*USER, MID_ANSWER], grammar_kind="json_object")
    assert "cannot be continued under a grammar" in end.message


def test_generate_continues_the_last_answer_of_a_messages_file(pairs, tmp_path, capsys):
    """`specexec generate --messages-file F --continue-final-message`: the new text only, the thought going on;
    without an answer at the file's end, or with --prompt, it says so before loading anything."""
    conversation = tmp_path / "conversation.jsonl"
    conversation.write_text("\n".join(json.dumps(m) for m in [*USER, MID_THOUGHT]) + "\n", encoding="utf-8")
    target, draft = pairs["r1"]
    common = ["--target", target, "--draft", draft, "--device", "cpu", "--threads", "1", "--max-new-tokens", "20"]
    result = run_cli(
        capsys, "generate", "--messages-file", str(conversation), "--continue-final-message", "--json", *common
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert ("w20" + printed["reasoning"], printed["text"]) == (THOUGHT_TEXT, ANSWER_TEXT)
    conversation.write_text(json.dumps(USER[0]) + "\n", encoding="utf-8")
    for source in (["--messages-file", str(conversation)], ["--prompt", "w40", "--chat"]):
        result = run_cli(capsys, "generate", *source, "--continue-final-message", "--target", "/nonexistent/model")
        assert result.returncode != 0 and "continue" in result.stderr and "/nonexistent" not in result.stderr
