"""The API server's request readers under mutation: valid chat, completion, Responses and forced-tool-call
requests with fields replaced by values of every JSON type (and some hostile ones), deleted, or added. Each
must be read or refused with an ApiError (a 400 in words); anything else is a server error a client can
cause. Four such cases were found this way (a role that is an object, a `reasoning` that is a string, tool
`$defs` that are not an object, tool-call arguments nested thousands deep). Seeded: a failure repeats."""

from __future__ import annotations

import copy
import random

import pytest

from core.server import requests as S
from core.server.api_errors import ApiError
from core.server.file_parts import file_parts
from core.server.responses import parse_responses_request
from core.server.tool_calls import forced_call_grammar

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "pattern": "^[A-Z]"},
        "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}},
        "unit": {"anyOf": [{"enum": ["C", "F"]}, {"type": "null"}]},
    },
    "required": ["city"],
    "$defs": {"Day": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}},
}
CHAT = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather?"}, {"type": "file", "file": {"file_data": "aGk="}}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
    ],
    "tools": [{"type": "function", "function": {"name": "w", "description": "d", "parameters": WEATHER}}],
    "tool_choice": {"type": "function", "function": {"name": "w"}},
    "max_tokens": 5,
    "temperature": 0.5,
    "stop": ["x"],
    "seed": 3,
    "stream": True,
    "stream_options": {"include_usage": True},
    "logprobs": True,
    "top_logprobs": 2,
    "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": WEATHER}},
}
COMPLETION = {"model": "m", "prompt": "abc", "max_tokens": 3, "logprobs": 2, "stop": "q", "frequency_penalty": 0.1}
RESPONSES = {
    "model": "m",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "a"}]},
        {"type": "function_call", "call_id": "c", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ],
    "instructions": "be",
    "tools": [{"type": "function", "name": "w", "parameters": WEATHER}],
    "tool_choice": "required",
    "reasoning": {"effort": "low"},
    "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}},
    "truncation": "auto",
}
TOKENIZE = {  # vLLM's POST /tokenize, a chat's prompt
    "model": "m",
    "messages": [{"role": "system", "content": "be"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}],
    "tools": [{"type": "function", "function": {"name": "w", "parameters": WEATHER}}],
    "add_generation_prompt": True,
    "chat_template_kwargs": {"enable_thinking": False},
}
VALUES = [None, True, False, 0, -1, 2**70, 10**400, 1.5, float("nan"), float("inf"), "", "x", "\ud800", "a" * 300, [], [None],
          {}, {"a": 1}, {"type": None}, [{}], {"type": "text"}, {"role": "user"}, "user", "tool", "required", "none",
          "json_object", {"$ref": "#/$defs/Nope"}, {"type": "string", "pattern": "("}, "[" * 3000, {"not": {}}]  # fmt: skip
EXTRA_KEYS = ["n", "tools", "tool_choice", "logit_bias", "name", "content", "tool_calls", "reasoning", "metadata",
              "chat_template_kwargs", "continue_final_message", "add_generation_prompt", "method", "text"]  # fmt: skip


def mutated(body: dict, rng: random.Random) -> object:
    """`body` with one to four fields replaced, deleted or added, anywhere in it."""
    body = copy.deepcopy(body)
    for _ in range(rng.randint(1, 4)):
        places = []
        stack: list[object] = [body]
        while stack:
            node = stack.pop()
            keys = node.keys() if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else ()
            for key in keys:
                places.append((node, key))
                stack.append(node[key])
        if not places:
            return body
        parent, key = rng.choice(places)
        roll = rng.random()
        if roll < 0.15 and isinstance(parent, dict):
            del parent[key]
        elif roll < 0.25 and isinstance(parent, dict):
            parent[rng.choice(EXTRA_KEYS)] = copy.deepcopy(rng.choice(VALUES))
        else:
            parent[key] = copy.deepcopy(rng.choice(VALUES))
    return body


def read_as_the_server_does(body: object, route: str | None) -> None:
    """The checks a POST's decoded body passes before the engine (api.read_json and prepare); a file part is
    only checked (tests/test_server_files.py reads them)."""
    S.check_tree(body)
    if route is not None and file_parts(body, "chat" if route == "tokenize" else route):
        return
    if route == "tokenize":
        parsed = S.parse_tokenize_request(body, S.Defaults())
    elif route == "responses":
        parsed = parse_responses_request(body, S.Defaults()).completion
    elif route == "chat":
        parsed = S.parse_chat_request(body, S.Defaults())
    else:
        parsed = S.parse_completion_request(body, S.Defaults())
    if parsed.forces_tool_call:
        for fmt in ("hermes", "llama3_json"):
            S.check_grammar("lark", forced_call_grammar(fmt, parsed.tools, parsed.forced_tool), "tools")
    elif parsed.grammar_kind is not None:
        S.check_grammar(parsed.grammar_kind, parsed.grammar_source, "response_format")


@pytest.mark.parametrize(
    "route, body", [("chat", CHAT), (None, COMPLETION), ("responses", RESPONSES), ("tokenize", TOKENIZE)]
)
@pytest.mark.parametrize("seed", range(3))
def test_mutated_requests_are_read_or_refused_in_words(route, body, seed):
    read_as_the_server_does(copy.deepcopy(body), route)  # the request itself is valid
    rng = random.Random(seed)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(150):
        request = mutated(body, rng)
        try:
            read_as_the_server_does(request, route)
        except ApiError:
            outcomes["refused"] += 1
        except Exception as error:  # noqa: BLE001 - any other is the finding, said with the request
            pytest.fail(f"{type(error).__name__}: {error} for {request!r:.1500}")
        else:
            outcomes["read"] += 1
    assert outcomes["read"] and outcomes["refused"]  # the mutations reach past the first checks
