"""A thinking model's reasoning apart from its answer (issue 32): the splitter on hand-written answers, the
markers read from chat templates that open the block in the prompt (DeepSeek-R1 distills) or leave it to
the model (Qwen3, whose enable_thinking=False pre-fills an empty block), and a tiny scripted model that
thinks, through stream_generate, the engine, the CLI (generate and chat) and a real API server."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import openai
import pytest

from conftest import in_process_engine, run_cli, torch_threads
from core.engine import protocol as P
from core.errors import InvalidSettingError
from core.text.reasoning import ReasoningSplitter, ThinkingFormat, split_text, thinking_control, thinking_format
from core.text.template_kwargs import check_template_kwargs, template_variables
from thinking_models import (
    ANSWER,
    ANSWER_TEXT,
    QWEN3_TEMPLATE,
    R1_TEMPLATE,
    THOUGHT,
    THOUGHT_TEXT,
    make_thinking_tokenizer,
    save_thinking_pair,
)

pytestmark = pytest.mark.timeout(240)

USER = [{"role": "user", "content": "w40 w41"}]
INSIDE = ThinkingFormat(starts_inside=True)
OUTSIDE = ThinkingFormat()


# ----------------------------------------------------------------------------------------------------------
# The splitter


@pytest.mark.parametrize(
    "fmt,text,reasoning,content",
    [
        (
            INSIDE,
            "\nOkay, 2 + 2.\n\nIt is 4.\n</think>\n\nThe answer is 4.",
            "Okay, 2 + 2.\n\nIt is 4.",
            "The answer is 4.",
        ),
        (OUTSIDE, "<think>\nhmm\n</think>\n\nHi!", "hmm", "Hi!"),
        (OUTSIDE, "\n\nHi! <think> is a tag</think>", "", "Hi! <think> is a tag</think>"),  # only a block at the start
        (OUTSIDE, "Hello", "", "Hello"),
        (INSIDE, "cut off while thinking  ", "cut off while thinking", ""),  # unclosed: all reasoning
        (OUTSIDE, "<thi", "", "<thi"),  # a marker's beginning that never completed is text
        (INSIDE, "</think>Direct.", "", "Direct."),  # an empty block
    ],
)
def test_the_splitter_parts_reasoning_from_content_wherever_the_pieces_break(fmt, text, reasoning, content):
    whole = split_text(text, fmt)
    assert (whole.reasoning, whole.content) == (reasoning, content)
    for cut in range(len(text) + 1):  # two pieces, broken anywhere (inside a marker too)
        splitter = ReasoningSplitter(fmt)
        parts = [splitter.push(text[:cut]), splitter.push(text[cut:]), splitter.finish()]
        assert ("".join(p.reasoning for p in parts), "".join(p.content for p in parts)) == (reasoning, content), cut
    splitter = ReasoningSplitter(fmt)  # one character at a time: nothing of a marker ever shows
    parts = [splitter.push(c) for c in text] + [splitter.finish()]
    assert ("".join(p.reasoning for p in parts), "".join(p.content for p in parts)) == (reasoning, content)
    assert not any("<think>" in p.reasoning or "</think>" in p.reasoning for p in parts)


def test_the_splitter_says_whether_it_is_inside_the_block():
    splitter = ReasoningSplitter(OUTSIDE)
    assert not splitter.thinking
    splitter.push("<think>a")
    assert splitter.thinking
    splitter.push(" b</think>c")
    assert not splitter.thinking


# ----------------------------------------------------------------------------------------------------------
# Templates


def test_the_markers_and_where_the_answer_starts_come_from_the_template():
    r1, qwen3 = make_thinking_tokenizer(R1_TEMPLATE), make_thinking_tokenizer(QWEN3_TEMPLATE)
    plain = make_thinking_tokenizer("{% for m in messages %}{{ m.content }} {% endfor %}")
    assert (thinking_control(r1), thinking_control(qwen3), thinking_control(plain)) == ("always", "switchable", None)
    assert thinking_format(r1, USER).starts_inside  # the prompt ends with <think>
    assert not thinking_format(qwen3, USER).starts_inside  # the model opens it
    assert not thinking_format(qwen3, USER, enable_thinking=False).starts_inside  # an empty block, closed
    assert thinking_format(plain, USER) is None
    # a user message that mentions the marker does not open a block: only the generation prompt counts
    assert not thinking_format(qwen3, [{"role": "user", "content": "what is <think> ?"}]).starts_inside


def test_template_variables_from_outside_are_checked_and_narrowed_to_the_template():
    assert check_template_kwargs({"enable_thinking": False}) == {"enable_thinking": False}
    assert check_template_kwargs(None) == {}
    for hostile in (
        {"add_generation_prompt": False},
        {"bos_token": "x"},
        {"messages": []},
        {"a b": 1},
        {"_private": 1},
        ["enable_thinking"],
        {f"v{i}": 1 for i in range(17)},
        {"x": {1, 2}},
    ):
        with pytest.raises(InvalidSettingError):
            check_template_kwargs(hostile)
    qwen3, r1 = make_thinking_tokenizer(QWEN3_TEMPLATE), make_thinking_tokenizer(R1_TEMPLATE)
    assert template_variables(qwen3, {"enable_thinking": False, "other": 1}) == {"enable_thinking": False}
    assert template_variables(r1, {"enable_thinking": False}) == {}  # a template without the switch ignores it


# ----------------------------------------------------------------------------------------------------------
# A scripted model that thinks


@pytest.fixture(scope="module")
def r1_pair(tmp_path_factory):
    return save_thinking_pair(tmp_path_factory.mktemp("r1"), R1_TEMPLATE)


@pytest.fixture(scope="module")
def qwen3_pair(tmp_path_factory):
    return save_thinking_pair(tmp_path_factory.mktemp("qwen3"), QWEN3_TEMPLATE)


def _stream(pair, messages, method, **template_kwargs):
    from core.decoding.generation import stream_generate
    from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
    from core.loading.load import load_model
    from core.text.prompts import Prompt, encode_prompt

    target, draft = (load_model(folder, dtype="float32", device="cpu") for folder in pair)
    tokenizer = target.tokenizer
    prompt = encode_prompt(tokenizer, Prompt(messages=tuple(messages), template_kwargs=template_kwargs))
    settings = DecodingSettings(method=method, tree=TreeSettings(8, 4, 4), max_new_tokens=20)
    return list(
        stream_generate(
            target.lm,
            draft.lm,
            tokenizer,
            prompt,
            SamplingParams(temperature=0.7, seed=3),
            settings,
            thinking=thinking_format(tokenizer, messages, **template_kwargs),
        )
    )


@pytest.mark.parametrize("method", ["specexec", "sequential"])
@pytest.mark.parametrize("template", ["r1", "qwen3"])
def test_the_stream_carries_the_thinking_apart_from_the_answer(r1_pair, qwen3_pair, method, template):
    """Whether the prompt opened the block (R1) or the model did (Qwen3), the chunks' reasoning is the
    thought and their text the answer, with no marker in either; SpecExec and plain decoding agree."""
    with torch_threads(1):
        chunks = _stream(r1_pair if template == "r1" else qwen3_pair, USER, method)
    assert "".join(c.reasoning for c in chunks) == THOUGHT_TEXT
    assert "".join(c.text for c in chunks) == ANSWER_TEXT
    assert chunks[-1].finish_reason == "eos"
    ids = [t for c in chunks for t in c.token_ids]
    assert ids[-3:] == ANSWER + [0] and all(t in ids for t in THOUGHT)


def test_enable_thinking_false_gives_the_answer_alone(qwen3_pair):
    with torch_threads(1):
        chunks = _stream(qwen3_pair, USER, "specexec", enable_thinking=False)
    assert "".join(c.reasoning for c in chunks) == ""
    assert "".join(c.text for c in chunks) == ANSWER_TEXT


# ----------------------------------------------------------------------------------------------------------
# The engine


def _answer(serve, request_id: str, messages, **settings) -> tuple[str, str, P.Finished, list]:
    events = serve(
        P.Generate(
            request_id=request_id, messages=tuple(messages), method="specexec", seed=1, max_new_tokens=20, **settings
        )
    )
    chunks = [e for e in events if isinstance(e, P.TokenChunk)]
    finished = next(e for e in events if isinstance(e, (P.Finished, P.Error)))
    assert isinstance(finished, P.Finished), finished
    return "".join(c.reasoning for c in chunks), "".join(c.text for c in chunks), finished, chunks


def test_the_engine_streams_reasoning_in_its_own_field(r1_pair, qwen3_pair):
    """TokenChunk.reasoning carries the thinking and TokenChunk.text the answer, for both templates; the
    status says whether thinking can be switched off; chat_template_kwargs reach the template; an earlier
    answer's reasoning_content is rendered by a template that reads it (more prompt tokens)."""
    with torch_threads(1):
        for pair, control in ((r1_pair, "always"), (qwen3_pair, "switchable")):
            engine, serve = in_process_engine()
            status = [
                e
                for e in serve(
                    P.Load(
                        target=pair[0], draft=pair[1], dtype="float32", device="cpu", budget=8, max_depth=4, expand=4
                    )
                )
                if isinstance(e, P.StatusReport)
            ][-1]
            assert status.models["thinking"] == control
            reasoning, text, _, chunks = _answer(serve, f"{control}-1", USER)
            assert (reasoning, text) == (THOUGHT_TEXT, ANSWER_TEXT)
            assert not any("think>" in c.text or "think>" in c.reasoning for c in chunks)
        reasoning, text, _, _ = _answer(serve, "off", USER, chat_template_kwargs={"enable_thinking": False})
        assert (reasoning, text) == ("", ANSWER_TEXT)
        follow_up = [*USER, {"role": "assistant", "content": ANSWER_TEXT}, {"role": "user", "content": "w42"}]
        _, _, plain, _ = _answer(serve, "history", follow_up)
        follow_up[1] = {**follow_up[1], "reasoning_content": THOUGHT_TEXT}
        _, _, with_thought, _ = _answer(serve, "history-thought", follow_up)
        assert with_thought.prompt_tokens == plain.prompt_tokens + 2 + len(THOUGHT)  # <think> w20 w21 w22 </think>
        errors = serve(P.Generate(request_id="bad", messages=tuple(USER), chat_template_kwargs={"tokenize": True}))
        assert [e.kind for e in errors if isinstance(e, P.Error)] == ["invalid_setting"]


# ----------------------------------------------------------------------------------------------------------
# The command line


CLI_FLAGS = [
    "--threads",
    "1",
    "--device",
    "cpu",
    "--method",
    "specexec",
    "--budget",
    "8",
    "--max-depth",
    "4",
    "--expand",
    "4",
    "--max-new-tokens",
    "20",
]


def _generate_args(pair, *extra: str) -> list[str]:
    return ["generate", "--target", pair[0], "--draft", pair[1], "--chat", "--prompt", "w40 w41", *CLI_FLAGS, *extra]


def _generate(capsys, pair, *extra: str) -> tuple[str, str]:
    """`specexec generate` with its stdout on a pipe, in this process (no process boundary is under test)."""
    result = run_cli(capsys, *_generate_args(pair, *extra))
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def _generate_on_a_terminal(pair) -> str:
    """`specexec generate` in its own process with stdout on a pseudo-terminal: what a person sees."""
    command = [sys.executable, "-m", "core.cli.main", *_generate_args(pair)]
    leader, follower = pty.openpty()  # stdout on a terminal: the thinking is shown inline, dimmed
    process = subprocess.Popen(command, stdout=follower, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": ""})
    os.close(follower)
    output = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        output += data
    assert process.wait(timeout=200) == 0, process.stderr.read()
    os.close(leader)
    return output.decode().replace("\r\n", "\n")


@pytest.mark.slow
def test_generate_shows_thinking_dimmed_on_a_terminal_and_apart_otherwise(r1_pair, capsys):
    from core.cli.thinking_output import DIM, RESET

    shown = _generate_on_a_terminal(r1_pair)
    assert shown.startswith(f"{DIM}{THOUGHT_TEXT}{RESET}\n\n{ANSWER_TEXT}"), repr(shown)
    stdout, stderr = _generate(capsys, r1_pair)  # a pipe: the answer alone on stdout, the thinking on stderr
    assert stdout == ANSWER_TEXT + "\n" and THOUGHT_TEXT in stderr and DIM not in stderr
    stdout, stderr = _generate(capsys, r1_pair, "--hide-thinking")
    assert stdout == ANSWER_TEXT + "\n" and THOUGHT_TEXT not in stderr
    record = json.loads(_generate(capsys, r1_pair, "--json")[0])
    assert (record["reasoning"], record["text"], record["finish_reason"]) == (THOUGHT_TEXT, ANSWER_TEXT, "eos")


@pytest.mark.slow
def test_chat_keeps_the_thinking_out_of_the_answer_and_can_turn_it_off(qwen3_pair, capsys):
    args = ["chat", "--target", qwen3_pair[0], "--draft", qwen3_pair[1], *CLI_FLAGS]
    result = run_cli(capsys, *args, stdin="w40\nw41\n")  # in this process; the engine in its own, as always
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n") == [ANSWER_TEXT, ANSWER_TEXT, ""] and result.stderr.count(THOUGHT_TEXT) == 2
    result = run_cli(capsys, *args, "--no-think", stdin="w40\n")
    assert result.stdout == ANSWER_TEXT + "\n" and THOUGHT_TEXT not in result.stderr, result.stderr


# ----------------------------------------------------------------------------------------------------------
# The API


@pytest.fixture(scope="module")
def server(qwen3_pair):
    from test_serve_api import start_server, stop_server

    process, url = start_server(qwen3_pair)
    try:
        yield url
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def client(server):
    from test_serve_api import KEY

    return openai.OpenAI(base_url=server, api_key=KEY, max_retries=0, timeout=120)


@pytest.mark.slow
def test_the_api_sends_reasoning_content_on_the_message_and_the_deltas(client):
    answer = client.chat.completions.create(model="m", messages=USER, max_tokens=20, seed=1)
    message = answer.choices[0].message
    assert (message.content, message.model_extra["reasoning_content"]) == (ANSWER_TEXT, THOUGHT_TEXT)
    assert answer.choices[0].finish_reason == "stop"
    assert client.models.list().data[0].specexec["thinking"] == "switchable"
    chunks = list(client.chat.completions.create(model="m", messages=USER, max_tokens=20, seed=1, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert reasoning == THOUGHT_TEXT and "".join(d.content or "" for d in deltas) == ANSWER_TEXT
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not (d.model_extra or {}).get("reasoning_content") for d in deltas[first_text:])  # thinking first
    off = client.chat.completions.create(
        model="m", messages=USER, max_tokens=20, seed=1, extra_body={"chat_template_kwargs": {"enable_thinking": False}}
    )
    assert (
        off.choices[0].message.content == ANSWER_TEXT and "reasoning_content" not in off.choices[0].message.model_extra
    )


@pytest.mark.slow
def test_the_api_takes_reasoning_content_back_in_history(client):
    history = [*USER, {"role": "assistant", "content": ANSWER_TEXT}, {"role": "user", "content": "w42"}]
    plain = client.chat.completions.create(model="m", messages=history, max_tokens=20)
    history[1] = {**history[1], "reasoning_content": THOUGHT_TEXT}
    thought = client.chat.completions.create(model="m", messages=history, max_tokens=20)
    assert thought.usage.prompt_tokens == plain.usage.prompt_tokens + 2 + len(THOUGHT)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=USER, extra_body={"chat_template_kwargs": {"tools": []}})
    assert refused.value.body["param"] == "chat_template_kwargs"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="m", messages=[*USER, {"role": "assistant", "content": "x", "reasoning_content": 5}]
        )


@pytest.mark.slow
def test_the_api_continues_the_last_answer_as_vllm_does(client, server):
    """vLLM's continue_final_message (core.text.continuation): only the new text comes back, and the prompt
    counted holds the answer so far, its thinking included; a conversation with no answer at its end is refused."""
    cut_off = {"role": "assistant", "content": "w30", "reasoning_content": THOUGHT_TEXT}
    flags = {"continue_final_message": True, "add_generation_prompt": False}
    answer = client.chat.completions.create(
        model="m", messages=[*USER, cut_off], max_tokens=20, seed=1, extra_body=flags
    )
    assert answer.choices[0].message.content == ANSWER_TEXT.removeprefix("w30")
    assert answer.choices[0].finish_reason == "stop"
    fresh = client.chat.completions.create(model="m", messages=USER, max_tokens=20, seed=1)
    assert answer.usage.prompt_tokens == fresh.usage.prompt_tokens + len(THOUGHT) + 3  # <think> ... </think> w30
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="m", messages=USER, extra_body=flags)
    assert refused.value.body["param"] == "messages" and "ends with a 'user' message" in refused.value.body["message"]
    from core.remote.endpoint import Endpoint
    from core.remote.engine import RemoteEngine
    from test_remote_serve import answer as remote_answer
    from test_serve_api import KEY

    remote = RemoteEngine(Endpoint(server, KEY))  # the app's way to a server: the flag goes along
    try:
        remote.start()
        remote.load(client.models.list().data[0].id, wait=True)
        request_id = remote.generate((*USER, cut_off), max_new_tokens=20, seed=1, continue_final_message=True)
        text, finished = remote_answer(remote, request_id)
    finally:
        remote.shutdown()
    assert isinstance(finished, P.Finished) and text == answer.choices[0].message.content


def test_a_remote_servers_reasoning_deltas_are_read_apart():
    """chat --remote (and the app) against vLLM, llama.cpp or DeepSeek: their reasoning deltas become
    TokenChunk.reasoning; chat_template_kwargs are sent on."""
    from core.remote.engine import request_options
    from core.remote.wire import parse_chunk

    piece = parse_chunk({"choices": [{"delta": {"reasoning_content": "hmm"}, "finish_reason": None}]})
    assert (piece.reasoning, piece.text) == ("hmm", "")
    assert parse_chunk({"choices": [{"delta": {"reasoning": "vLLM's newer name"}}]}).reasoning == "vLLM's newer name"
    assert parse_chunk({"choices": [{"delta": {"reasoning_content": 5, "content": "x"}}]}).reasoning == ""
    request = P.Generate(request_id="r", messages=tuple(USER), chat_template_kwargs={"enable_thinking": False})
    assert request_options(request)["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("inside", [True, False])
def test_a_grammar_holds_after_the_thinking_block(inside):
    """Structured output for a thinking model: free thinking (that cannot close early), then the grammar's
    answer; a block opened by the prompt must be closed first, one the model may open is optional."""
    import llguidance
    import llguidance.hf
    from transformers import AutoTokenizer

    from core.loading.builtin import ensure_converted
    from core.decoding.constraints import GrammarSpec, after_thinking
    from core.server.tool_calls import forced_call_grammar

    tokenizer = AutoTokenizer.from_pretrained(ensure_converted())
    bridge = llguidance.hf.from_tokenizer(tokenizer)
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    }
    cases = [
        (GrammarSpec("json_object"), '{"a": 1}'),
        (
            GrammarSpec("lark", forced_call_grammar("hermes", (tool,))),
            '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>',
        ),
    ]
    thought = "Let me see: is a < b? </thi nk> is not the end.</think>\n\n"
    for spec, answer in cases:
        grammar = llguidance.LLMatcher.grammar_from_lark(
            after_thinking(spec, ThinkingFormat(starts_inside=inside)).source
        )

        def accepts(text: str, grammar: str = grammar) -> bool:
            matcher = llguidance.LLMatcher(bridge, grammar, log_level=0)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            return bool(matcher.consume_tokens(ids)) and matcher.is_accepting()

        opened = "" if inside else "<think>"
        assert accepts(opened + thought + answer)
        assert not accepts(opened + thought + "plain words")  # after the block, the grammar holds
        assert not accepts(opened + "x</think> y</think>" + answer)  # the block closes once
        assert accepts(answer) is (not inside)  # the prompt opened the block: it must close first
