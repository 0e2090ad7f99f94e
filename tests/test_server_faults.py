"""Request checks against what a hostile or careless client sends (issue 41): each is a 400 naming the field and
saying what to do, never a 500 or a silent acceptance. The same cases over real HTTP are in test_serve_faults.py."""

from __future__ import annotations

import json

import pytest
from conftest import refused_request

from core.errors import ContextLengthError
from core.server import api_errors as E
from core.server import requests as S
from core.server.responses import parse_responses_request
from core.server.schema_check import has_finite_instance

DEFAULTS = S.Defaults()
USER = [{"role": "user", "content": "hi"}]


def test_a_lone_surrogate_is_a_400_naming_where_it_is():
    body = json.loads('{"messages": [{"role": "user", "content": "hi \\ud800"}]}')  # JSON's escapes allow it
    error = refused_request(S.parse_chat_request, body, DEFAULTS)
    assert error.param == "messages[0].content" and "lone surrogate (\\ud800 at character 3)" in error.message
    parts = json.loads('{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\udfff"}]}]}')
    assert refused_request(S.parse_chat_request, parts, DEFAULTS).param == "messages[0].content[0].text"
    assert refused_request(S.parse_completion_request, {"prompt": "a\ud800"}, DEFAULTS).param == "prompt"
    assert refused_request(parse_responses_request, {"input": "x", "instructions": "\ud800"}, DEFAULTS).param == "input"
    paired = S.parse_chat_request(json.loads('{"messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'), DEFAULTS)
    assert paired.messages[0]["content"] == "\N{GRINNING FACE}"  # a whole pair is a character


def test_a_body_nested_too_deep_is_invalid_json_without_recursion():
    deep: object = "x"
    for _ in range(10_000):  # the walk is a loop: no RecursionError however deep the decoded value is
        deep = [deep]
    error = refused_request(S.parse_chat_request, {"messages": USER, "metadata": deep}, DEFAULTS)
    assert error.code == "invalid_json" and f"more than {S.MAX_JSON_DEPTH} levels" in error.message
    S.check_tree({"messages": USER, "tools": [{"a": {"b": {"c": [1, 2, {"d": None}]}}}]})  # ordinary depth


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
        {"type": "array", "minItems": 1, "items": {"$ref": "#"}},
    ],
)
def test_a_schema_with_no_finite_instance_is_refused(schema):
    assert not has_finite_instance(schema)
    body = {
        "messages": USER,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    }
    parsed = S.parse_chat_request(body, DEFAULTS)
    with pytest.raises(E.ApiError, match="no finite JSON value matches it") as caught:
        S.check_grammar(parsed.grammar_kind, parsed.grammar_source, "response_format")
    assert caught.value.param == "response_format" and caught.value.code == "invalid_schema"
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    assert (
        refused_request(S.parse_chat_request, {"messages": USER, "tools": [tool]}, DEFAULTS).param
        == "tools[0].function.parameters"
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "#"}}},  # x may be left out
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name", "children"],
        },  # a tree: children may be []
        {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
        {"type": ["object", "null"], "properties": {"x": {"$ref": "#"}}, "required": ["x"]},
        {"$ref": "https://example.com/other.json"},  # not resolvable here: the grammar engine judges it
    ],
)
def test_recursive_schemas_that_can_end_are_kept(schema):
    assert has_finite_instance(schema)


def test_max_tokens_beyond_any_context_and_stream_options_without_stream_are_refused():
    error = refused_request(S.parse_chat_request, {"messages": USER, "max_tokens": 10**30}, DEFAULTS)
    assert error.param == "max_tokens" and f"at most {S.MAX_TOKENS_LIMIT}" in error.message
    assert (
        refused_request(S.parse_chat_request, {"messages": USER, "max_completion_tokens": 2**31}, DEFAULTS).param
        == "max_completion_tokens"
    )
    assert (
        refused_request(parse_responses_request, {"input": "x", "max_output_tokens": 10**30}, DEFAULTS).param
        == "max_output_tokens"
    )
    error = refused_request(
        S.parse_chat_request, {"messages": USER, "stream_options": {"include_usage": True}}, DEFAULTS
    )
    assert error.param == "stream_options" and '"stream": true' in error.message  # vLLM refuses it too
    refused_request(S.parse_completion_request, {"prompt": "x", "stream": False, "stream_options": {}}, DEFAULTS)
    assert S.parse_chat_request(
        {"messages": USER, "stream": True, "stream_options": {"include_usage": True}}, DEFAULTS
    ).include_usage


def test_a_prompt_too_long_names_what_takes_its_tokens():
    """Many tools: the error names the tools' definitions first; long instructions (system messages): those."""
    from app_fixtures import make_no_eos_tokenizer
    from tool_templates import HERMES_TEMPLATE

    from core.engine.session import fit_conversation

    tokenizer = make_no_eos_tokenizer()
    tools = tuple(
        {
            "type": "function",
            "function": {"name": f"tool_{n}", "description": "w5 w6 " * 20, "parameters": {"type": "object"}},
        }
        for n in range(8)
    )
    hermes = make_no_eos_tokenizer()
    hermes.chat_template = HERMES_TEMPLATE
    with pytest.raises(ContextLengthError, match=r"\(the tools' definitions about [\d,]+, the last message about"):
        fit_conversation(hermes, USER, 200, 8, trim=False, tools=tools)
    long_system = [{"role": "system", "content": "w7 " * 300}, *USER]
    with pytest.raises(ContextLengthError, match=r"\(the system messages about [\d,]+, the last message about"):
        fit_conversation(tokenizer, long_system, 100, 8, trim=True)


def test_a_ref_through_another_ref_to_a_finite_model_is_satisfiable():
    """pydantic's nested models: the output model refers to one $def, which refers to another; every target
    reached through another target is weighed too (only the first level was, which refused these)."""
    nested = {
        "$defs": {
            "Outer": {"type": "object", "properties": {"inner": {"$ref": "#/$defs/Inner"}}, "required": ["inner"]},
            "Inner": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
        "type": "object",
        "properties": {"outer": {"$ref": "#/$defs/Outer"}},
        "required": ["outer"],
    }
    assert has_finite_instance(nested)
    looping = {
        "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]},
        },
        "$ref": "#/$defs/A",
    }
    assert not has_finite_instance(looping)
