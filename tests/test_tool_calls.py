"""Tool calls (issue 24): reading a model's own tool-call format from its answer, whole and while streaming
(split at every place a chunk boundary can fall), and rendering tools and tool results through chat
templates in the Hermes / Qwen2.5 and Llama 3.1 formats. Pure functions on real-format strings: a tiny
random model cannot be steered to write a call (that waits for grammar-constrained decoding)."""

from __future__ import annotations

import json
import random

import pytest

from core.text.tool_format import HERMES, LLAMA3_JSON
from core.text.tool_calls import CallDelta, ToolCall, ToolCallStream, parse_answer

NAMES = frozenset({"get_current_temperature", "get_current_conditions", "search"})

# As Qwen2.5-Instruct writes them (its template's instructions: a JSON object inside <tool_call></tool_call>).
QWEN_ONE = (
    '<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA", '
    '"unit": "celsius"}}\n</tool_call>'
)
QWEN_TWO = (
    QWEN_ONE + '\n<tool_call>\n{"name": "search", "arguments": {"query": "weather \\"today\\" <b>"}}\n</tool_call>'
)
QWEN_AFTER_TEXT = "Let me check the weather for you.\n\n" + QWEN_ONE
# As Llama 3.1-Instruct writes them with JSON-based tool calling (custom tools), and with its python tag.
LLAMA_ONE = '{"name": "get_current_conditions", "parameters": {"location": "Clinton, SC", "unit": "Fahrenheit"}}'
LLAMA_TAGGED = "<|python_tag|>" + LLAMA_ONE
LLAMA_TWO = LLAMA_ONE + '; {"name": "search", "parameters": {"query": "SC"}}'


def test_hermes_calls_are_read_with_arguments_as_json_text():
    content, calls = parse_answer(QWEN_TWO, HERMES, NAMES)
    assert content == ""
    assert calls == [
        ToolCall("get_current_temperature", json.dumps({"location": "San Francisco, CA, USA", "unit": "celsius"})),
        ToolCall("search", json.dumps({"query": 'weather "today" <b>'})),
    ]
    content, calls = parse_answer(QWEN_AFTER_TEXT, HERMES, NAMES)
    assert content == "Let me check the weather for you." and [c.name for c in calls] == ["get_current_temperature"]


def test_hermes_text_that_is_not_a_call_is_kept_as_content():
    assert parse_answer("The sky is blue.\n", HERMES, NAMES) == ("The sky is blue.\n", [])
    not_a_call = "<tool_call>\nI would call search here.\n</tool_call>"
    assert parse_answer(not_a_call, HERMES, NAMES) == (not_a_call, [])
    assert parse_answer("a < b and <tool", HERMES, NAMES) == ("a < b and <tool", [])  # a tag never finished
    unclosed = QWEN_ONE.removesuffix("</tool_call>")  # cut by the end of the answer after the JSON
    assert [c.name for c in parse_answer(unclosed, HERMES, NAMES)[1]] == ["get_current_temperature"]
    # once `{"name": ..., "arguments": ` is read it is a call (its arguments stream from there), as written
    broken = '<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call>'
    assert parse_answer(broken, HERMES, NAMES) == ("", [ToolCall("search", '{"query": }')])


def test_a_forced_call_cut_by_max_tokens_never_shows_the_template():
    """With a grammar forcing the call, an answer cut before the call's name is complete is no call and no
    content; one cut inside the arguments is the call with the arguments written so far."""
    for cut in ('<tool_call>\n{"name', "<tool", '<tool_call>\n{"name": "sea'):
        assert parse_answer(cut, HERMES, NAMES, forced=True) == ("", [])
        assert parse_answer(cut, HERMES, NAMES) == (cut, [])  # unforced: the text as written
    cut = '<tool_call>\n{"name": "search", "arguments": {"query": "wea'
    assert parse_answer(cut, HERMES, NAMES, forced=True) == ("", [ToolCall("search", '{"query": "wea')])
    assert parse_answer('{"name": "sea', LLAMA3_JSON, NAMES, forced=True) == ("", [])


def test_llama_json_calls_need_declared_names_and_nothing_else():
    for text in (LLAMA_ONE, LLAMA_TAGGED, "\n" + LLAMA_ONE + "\n"):
        content, calls = parse_answer(text, LLAMA3_JSON, NAMES)
        assert content == "" and calls == [
            ToolCall("get_current_conditions", json.dumps({"location": "Clinton, SC", "unit": "Fahrenheit"}))
        ]
    assert [c.name for c in parse_answer(LLAMA_TWO, LLAMA3_JSON, NAMES)[1]] == ["get_current_conditions", "search"]
    plain_json = '{"name": "Ada", "parameters": {"age": 36}}'  # a JSON answer, not a declared tool
    assert parse_answer(plain_json, LLAMA3_JSON, NAMES) == (plain_json, [])
    assert parse_answer(plain_json + "; " + LLAMA_ONE, LLAMA3_JSON, NAMES) == (plain_json + "; " + LLAMA_ONE, [])
    content, calls = parse_answer(LLAMA_ONE + " and more", LLAMA3_JSON, NAMES)  # prose after a call is content
    assert content == " and more" and [c.name for c in calls] == ["get_current_conditions"]
    assert parse_answer("It is sunny.", LLAMA3_JSON, NAMES) == ("It is sunny.", [])


def _stream(text: str, fmt: str, cuts: list[int]) -> list:
    stream = ToolCallStream(fmt, NAMES)
    pieces, last = [], 0
    for cut in cuts + [len(text)]:
        pieces += stream.push(text[last:cut])
        last = cut
    return pieces + stream.finish()


def _merged(pieces: list) -> list:
    """Adjacent content pieces joined and each call's pieces added up into a ToolCall (how a client
    concatenates content and argument deltas)."""
    out: list = []
    for piece in pieces:
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] += piece
        elif isinstance(piece, CallDelta) and piece.name is None:
            out[-1] = ToolCall(out[-1].name, out[-1].arguments + piece.arguments)
        elif isinstance(piece, CallDelta):
            out.append(ToolCall(piece.name, piece.arguments))
        elif piece != "":
            out.append(piece)
    return out


@pytest.mark.parametrize(
    "text, fmt",
    [
        (QWEN_TWO, HERMES),
        (QWEN_AFTER_TEXT, HERMES),
        ("No tools needed: 2 < 3 <tool", HERMES),
        (LLAMA_TAGGED, LLAMA3_JSON),
        (LLAMA_TWO, LLAMA3_JSON),
        ("Plain answer {with braces}", LLAMA3_JSON),
    ],
)
def test_streaming_gives_the_same_calls_and_content_wherever_the_chunks_are_cut(text, fmt):
    content, calls = parse_answer(text, fmt, NAMES)
    whole = _merged(_stream(text, fmt, []))  # content and calls in order, as sent for one big chunk
    assert (
        "".join(p for p in whole if isinstance(p, str)) == content
        and [p for p in whole if isinstance(p, ToolCall)] == calls
    )
    for cut in range(len(text) + 1):  # every two-chunk split
        assert _merged(_stream(text, fmt, [cut])) == whole
    rng = random.Random(0)
    for _ in range(50):  # token-sized chunks: many small random cuts
        cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(3, 30))))
        assert _merged(_stream(text, fmt, cuts)) == whole


def test_streamed_content_is_sent_before_the_call_and_no_tag_leaks():
    stream = ToolCallStream(HERMES, NAMES)
    assert stream.push("Let me check.") == ["Let me check."]  # content goes out at once
    assert stream.push("\n\n<tool") == []  # a possible tag start and the whitespace before it are held
    assert stream.push('_call>\n{"name": "search", ') == []
    assert stream.push('"arguments": {"query": "x"}}\n</tool_call>') == [
        CallDelta(0, "search"),
        CallDelta(0, arguments='{"query": "x"}'),
    ]
    assert stream.finish() == []


@pytest.mark.parametrize(
    "fmt, head",
    [
        (HERMES, '<tool_call>\n{"name": "search", "arguments": '),
        (LLAMA3_JSON, '<|python_tag|>{"name": "search", "parameters": '),
    ],
)
def test_arguments_stream_in_fragments_as_they_are_written(fmt, head):
    """The name goes out once the arguments' key is read, then every piece of the arguments as it comes
    (instructor's partial objects and the Responses API's argument deltas need them), and nothing of the
    template's own text."""
    stream = ToolCallStream(fmt, NAMES)
    assert stream.push(head) == [CallDelta(0, "search")]
    pieces = ['{"query": ', '"weather ', "in {Oslo}", '", "page": ', "2}"]
    for piece in pieces:
        assert stream.push(piece) == [CallDelta(0, arguments=piece)]
    assert stream.push("}" + ("\n</tool_call>" if fmt == HERMES else "")) == []
    assert stream.finish() == []


def test_without_a_format_everything_is_content():
    assert parse_answer(QWEN_ONE, None, NAMES) == (QWEN_ONE, [])


# ----------------------------------------------------------------------------------------------------------
# Chat templates with tools


def _tokenizer(template: str | None):
    from conftest import make_word_tokenizer

    tokenizer = make_word_tokenizer()
    tokenizer.chat_template = template
    return tokenizer


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ROUND_TRIP = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
        ],
    },
    {"role": "tool", "content": "-3 C and snow", "tool_call_id": "c1", "name": "get_weather"},
]


def test_the_tool_call_format_is_read_from_the_template():
    from core.text.tool_format import tool_call_format
    from tool_templates import HERMES_TEMPLATE, LLAMA31_TEMPLATE

    assert tool_call_format(_tokenizer(HERMES_TEMPLATE)) == HERMES
    assert tool_call_format(_tokenizer(LLAMA31_TEMPLATE)) == LLAMA3_JSON
    assert tool_call_format(_tokenizer(None)) is None
    assert tool_call_format(_tokenizer("{% for m in messages %}{{ m.content }}{% endfor %}")) is None  # no tools


@pytest.mark.parametrize(
    "template_name, call_text",
    [
        ("HERMES_TEMPLATE", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'),
        ("LLAMA31_TEMPLATE", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}'),
    ],
)
def test_tools_calls_and_results_are_rendered_in_the_models_format(template_name, call_text):
    """The prompt carries the tool's definition, the earlier call in the model's own format (so the model sees
    what it wrote) and the tool's result; and what the model wrote reads back as the same call."""
    import tool_templates
    from core.text.prompts import render_chat
    from core.text.tool_format import tool_call_format

    tokenizer = _tokenizer(getattr(tool_templates, template_name))
    prompt = render_chat(tokenizer, ROUND_TRIP, (WEATHER,))
    assert json.dumps(WEATHER) in prompt and call_text in prompt and "-3 C and snow" in prompt
    assert "Weather in Oslo?" in prompt
    fmt = tool_call_format(tokenizer)
    assert parse_answer(call_text, fmt, frozenset({"get_weather"})) == (
        "",
        [ToolCall("get_weather", '{"city": "Oslo"}')],
    )


def test_a_template_without_tools_refuses_them_clearly():
    from core.errors import InvalidSettingError
    from core.text.prompts import render_chat

    tokenizer = _tokenizer("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    with pytest.raises(InvalidSettingError, match="chat template has no tool support"):
        render_chat(tokenizer, ROUND_TRIP[:1], (WEATHER,))
