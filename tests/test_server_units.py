"""The API server's parts that need no engine: request checks, error mapping, the socket rules, the context
rules the server relies on (plain-text prompts, no silent trimming), and the no-torch rule."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from conftest import refused_request

from core.engine import protocol as P
from core.errors import ContextLengthError, ServerError
from core.server import api_errors as E
from core.server import replies as R
from core.server import requests as S

DEFAULTS = S.Defaults(temperature=0.5, top_p=0.8, max_tokens=32, seed=None, stop=("###",))
USER = [{"role": "user", "content": "hi"}]
ANSWER = {"role": "assistant", "content": "Once upon"}


def test_chat_request_defaults_roles_and_content_parts():
    request = S.parse_chat_request(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]},
            ],
        },
        DEFAULTS,
    )
    assert request.messages == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "a b"})
    assert (request.temperature, request.top_p, request.max_tokens, request.stop) == (0.5, 0.8, 32, ("###",))
    generate = request.to_generate("r1")
    assert P.validate(generate) is generate
    assert generate.cache_owner == "api" and generate.trim_context is False and generate.prompt is None
    # no seed: a new one per request (the OpenAI behaviour); a seed is kept as given
    seeds = {S.parse_chat_request({"messages": USER}, DEFAULTS).seed for _ in range(8)}
    assert len(seeds) > 1
    explicit = S.parse_chat_request({"messages": USER, "seed": 7, "max_completion_tokens": 5, "stop": "x"}, DEFAULTS)
    assert (explicit.seed, explicit.max_tokens, explicit.stop) == (7, 5, ("x",))


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        (
            {
                "messages": USER
                + [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1]"}}],
                    }
                ]
            },
            "messages[1].tool_calls[0]",
        ),
        (
            {"messages": USER, "tools": [{"type": "function", "function": {"name": "bad name"}}]},
            "tools[0].function.name",
        ),
        ({"messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}] * 2}, "tools"),
        ({"messages": USER, "tool_choice": "sometimes"}, "tool_choice"),
        (  # a forced call's grammar gathers the definitions by name: a server error once
            {
                "messages": USER,
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {"$defs": ["X"]}}}],
                "tool_choice": "required",
            },
            "tools[0].function.parameters.$defs",
        ),
        ({"messages": USER, "response_format": {"type": "xml"}}, "response_format"),
        (
            {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
            "response_format.json_schema",
        ),
        ({"messages": USER, "top_logprobs": 3}, "top_logprobs"),
        ({"messages": USER, "top_logprobs": 21, "logprobs": True}, "top_logprobs"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
        ({"messages": USER, "temperature": 2.5}, "temperature"),
        ({"messages": USER, "top_p": 0}, "top_p"),
        ({"messages": USER, "max_tokens": 0}, "max_tokens"),
        ({"messages": USER, "max_tokens": True}, "max_tokens"),
        ({"messages": USER, "stop": ["ok", ""]}, "stop"),
        ({"messages": USER, "n": 2}, "n"),
        ({"messages": USER, "tools": [{"type": "function"}]}, "tools[0]"),
        ({"messages": USER, "method": "beam"}, "method"),
        ({"messages": [{"role": {"name": "user"}, "content": "hi"}]}, "messages[0].role"),  # not hashable
        (  # arguments nested 5,000 deep in their string: a RecursionError, a server error
            {
                "messages": [
                    *USER,
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[" * 5000}}
                        ],
                    },
                ]
            },
            "messages[1].tool_calls[0]",
        ),
        ({"messages": USER, "continue_final_message": True}, "messages"),  # no answer at the end to go on with
        ({"messages": [*USER, ANSWER], "continue_final_message": 1}, "continue_final_message"),
        (
            {"messages": [*USER, ANSWER], "continue_final_message": True, "add_generation_prompt": True},
            "add_generation_prompt",
        ),
        ({"messages": USER, "add_generation_prompt": False}, "add_generation_prompt"),
        (
            {"messages": [*USER, ANSWER], "continue_final_message": True, "response_format": {"type": "json_object"}},
            "continue_final_message",
        ),
        (
            {
                "messages": [*USER, ANSWER],
                "continue_final_message": True,
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": "required",
            },
            "continue_final_message",
        ),
    ],
)
def test_bad_chat_requests_name_the_parameter(body, param):
    assert refused_request(S.parse_chat_request, body, DEFAULTS).param == param


def test_an_answer_to_continue_reaches_the_engine_flagged():
    """vLLM's spelling: continue_final_message with add_generation_prompt false (or left out)."""
    for extra in ({"add_generation_prompt": False}, {}):
        body = {"messages": [*USER, ANSWER], "continue_final_message": True, **extra}
        generate = S.parse_chat_request(body, DEFAULTS).to_generate("r1")
        assert generate.continue_final_message and generate.messages[-1] == ANSWER
    assert not S.parse_chat_request({"messages": [*USER, ANSWER]}, DEFAULTS).to_generate("r2").continue_final_message


def test_neutral_values_of_unsupported_fields_are_accepted():
    request = S.parse_chat_request(
        {
            "messages": USER,
            "n": 1,
            "presence_penalty": 0,
            "logprobs": False,
            "tool_choice": "none",
            "user": "someone",
            "response_format": {"type": "text"},
        },
        DEFAULTS,
    )
    assert request.kind == "chat" and request.tools == ()


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    },
}


def test_tools_and_a_tool_round_trip_become_template_messages():
    """Tools reach the engine as the template reads them; an assistant's call has its arguments decoded and the
    tool's result carries the call's id and function name; tool_choice none sends no tools."""
    body = {
        "messages": USER
        + [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "-3 C"}]},
        ],
        "tools": [WEATHER],
        "parallel_tool_calls": False,
    }
    request = S.parse_chat_request(body, DEFAULTS)
    assert request.tools == (
        {"type": "function", "function": {k: WEATHER["function"][k] for k in ("name", "description", "parameters")}},
    )
    assert request.tool_names == {"get_weather"} and request.parallel_tool_calls is False
    assert request.messages[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
        ],
    }
    assert request.messages[2] == {"role": "tool", "content": "-3 C", "tool_call_id": "call_1", "name": "get_weather"}
    generate = request.to_generate("r")
    assert P.validate(generate) is generate and generate.tools == request.tools
    assert P.from_dict(P.to_dict(generate)) == generate  # survives the JSON form too
    assert S.parse_chat_request({**body, "tool_choice": "none"}, DEFAULTS).tools == ()


def test_structured_output_forced_calls_and_logprobs_reach_the_engine():
    """response_format becomes the engine's grammar, logprobs its top_logprobs, and a forced tool call is
    marked for the grammar of the model's own format (built once the server knows it)."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    cases = [
        ({"response_format": {"type": "json_object"}}, ("json_object", "")),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}},
            ("json_schema", json.dumps(schema)),
        ),
    ]
    for extra, grammar in cases:
        request = S.parse_chat_request({"messages": USER, **extra}, DEFAULTS)
        generate = request.to_generate("r")
        assert (generate.grammar_kind, generate.grammar_source) == grammar and P.validate(generate) is generate
        assert P.from_dict(P.to_dict(generate)) == generate
    logprobs = S.parse_chat_request({"messages": USER, "logprobs": True, "top_logprobs": 2}, DEFAULTS)
    assert logprobs.to_generate("r").top_logprobs == 2
    assert S.parse_chat_request({"messages": USER, "logprobs": True}, DEFAULTS).top_logprobs == 0
    assert S.parse_completion_request({"prompt": "x", "logprobs": 3}, DEFAULTS).top_logprobs == 3
    assert S.parse_chat_request({"messages": USER}, DEFAULTS).to_generate("r").top_logprobs is None
    required = S.parse_chat_request({"messages": USER, "tools": [WEATHER], "tool_choice": "required"}, DEFAULTS)
    assert required.forces_tool_call and required.forced_tool is None
    strict = {**WEATHER, "function": {**WEATHER["function"], "strict": True}}
    named = S.parse_chat_request(
        {"messages": USER, "tools": [strict], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        DEFAULTS,
    )
    assert (
        named.tool_choice == "named"
        and named.forced_tool == "get_weather"
        and "strict" not in named.tools[0]["function"]
    )
    both = S.parse_chat_request(
        {
            "messages": USER,
            "tools": [WEATHER],
            "tool_choice": "required",  # openai-agents
            "response_format": {"type": "json_object"},
        },
        DEFAULTS,
    )  # sends both: the call wins
    assert both.forces_tool_call and both.grammar_kind is None


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tool_choice": "required"}, "tool_choice"),  # no tools to call
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function"}}, "tool_choice"),
    ],
)
def test_forced_calls_and_strict_schemas_are_checked(extra, param):
    assert refused_request(S.parse_chat_request, {"messages": USER, **extra}, DEFAULTS).param == param


def test_usage_reports_cached_tokens_and_answers_carry_tool_calls():
    tally = R.RunTally("specexec")
    for event in (
        P.TokenChunk("r", "hi", (5,)),
        P.PassStats("r", 1, 4, 1.0, 2.0, 3.0, 8),
        P.Finished("r", "eos", prompt_tokens=120, reused_prefix_tokens=100, generated_tokens=1),
    ):
        tally.add(event)
    assert tally.usage() == {
        "prompt_tokens": 120,
        "completion_tokens": 1,
        "total_tokens": 121,
        "prompt_tokens_details": {"cached_tokens": 100},
    }
    from core.text.tool_calls import ToolCall

    body = R.chat_response("id", "m", tally, "", [ToolCall("get_weather", '{"city": "Oslo"}')])
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    import openai.types.chat as types

    parsed = types.ChatCompletion.model_validate(body)  # the official client's own types read it
    assert parsed.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert parsed.usage.prompt_tokens_details.cached_tokens == 100
    from core.text.tool_calls import CallDelta

    first = R.chat_chunk("id", "m", {"tool_calls": [R.tool_call_delta(CallDelta(0, "f"), "call_1")]})
    more = R.chat_chunk("id", "m", {"tool_calls": [R.tool_call_delta(CallDelta(0, arguments='{"a"'), "call_1")]})
    call = types.ChatCompletionChunk.model_validate(first).choices[0].delta.tool_calls[0]
    assert (call.index, call.id, call.function.name, call.function.arguments) == (0, "call_1", "f", "")
    call = types.ChatCompletionChunk.model_validate(more).choices[0].delta.tool_calls[0]
    assert (call.index, call.id, call.function.name, call.function.arguments) == (0, None, None, '{"a"')


def test_logprob_shapes_match_the_openai_types():
    """The response shapes for log-probabilities, ready for the decoding loop's entries (issue 24's hook)."""
    import openai.types as types

    entries = [
        {"token": "Hi", "logprob": -0.1, "top": [{"token": "Hi", "logprob": -0.1}, {"token": "Yo", "logprob": -2.5}]},
        {"token": "!", "logprob": -0.7, "top": [{"token": "!", "logprob": -0.7}]},
    ]
    tally = R.RunTally("specexec")
    tally.add(P.TokenChunk("r", "Hi!", (1, 2), logprobs=tuple(entries)))
    tally.add(P.Finished("r", "eos", 3, 0, 2))
    chat = types.chat.ChatCompletion.model_validate(R.chat_response("id", "m", tally, tally.text))
    assert [(t.token, t.logprob, t.bytes) for t in chat.choices[0].logprobs.content] == [
        ("Hi", -0.1, [72, 105]),
        ("!", -0.7, [33]),
    ]
    assert chat.choices[0].logprobs.content[0].top_logprobs[1].token == "Yo"
    text = types.Completion.model_validate(R.text_response("id", "m", tally))
    assert text.choices[0].logprobs.text_offset == [0, 2] and text.choices[0].logprobs.top_logprobs[0] == {
        "Hi": -0.1,
        "Yo": -2.5,
    }


def test_openai_wording_for_context_and_key_errors():
    too_long = E.engine_error(P.Error("r", "context_length", "the messages are 9000 tokens", "shorten them"), 4096)
    assert too_long.message.startswith("This model's maximum context length is 4096 tokens: the messages are 9000")
    assert E.wrong_key_error("sk-abcdefghijk").message.startswith("Incorrect API key provided: sk-***jk.")
    assert "abcdefgh" not in E.wrong_key_error("sk-abcdefghijk").message
    assert E.missing_key_error().message.startswith("You didn't provide an API key")


def test_origins_are_checked():
    from core.server.origins import parse_origins

    assert parse_origins("http://localhost:3000, https://chat.example.com/,http://localhost:3000") == (
        "http://localhost:3000",
        "https://chat.example.com",
    )
    assert parse_origins(["*"]) == ("*",) and parse_origins("") == ()
    for bad in ("localhost:3000", "http://x/path", "ftp://x"):
        with pytest.raises(ServerError, match="is not a web origin"):
            parse_origins(bad)


def test_completion_request_takes_one_text_prompt():
    assert S.parse_completion_request({"prompt": ["Once"]}, DEFAULTS).prompt == "Once"
    assert P.validate(S.parse_completion_request({"prompt": "Once"}, DEFAULTS).to_generate("r2")).messages == ()
    for prompt in (["a", "b"], [1, 2, 3], "", None):
        assert refused_request(S.parse_completion_request, {"prompt": prompt}, DEFAULTS).param == "prompt"


def test_engine_errors_map_to_openai_statuses():
    too_long = E.engine_error(P.Error("r", "context_length", "the prompt is 9000 tokens", "shorten it"))
    assert (too_long.status, too_long.code, too_long.param) == (400, "context_length_exceeded", "messages")
    assert too_long.body()["error"]["message"].endswith("the prompt is 9000 tokens (shorten it)")
    assert E.engine_error(P.Error("r", "engine_died", "gone")).status == 503
    assert E.engine_error(P.Error("r", "internal", "bug")).status == 500
    overflow = E.engine_error(P.Error("r", "numerical", "the scores came out as NaN", "download it again"))
    assert (overflow.status, overflow.type, overflow.code) == (500, "server_error", "numerical")


def test_protocol_takes_messages_or_a_prompt_not_both():
    P.validate(P.Generate("r", (), prompt="Once upon"))
    with pytest.raises(P.ProtocolError, match="both"):
        P.validate(P.Generate("r", tuple(USER), prompt="Once upon"))
    with pytest.raises(P.ProtocolError, match="empty"):
        P.validate(P.Generate("r", ()))


def test_context_rules_for_text_prompts_and_untrimmed_conversations():
    from app_fixtures import make_no_eos_tokenizer
    from core.engine.session import fit_conversation, fit_text

    tokenizer = make_no_eos_tokenizer()
    turns = [
        {"role": "user", "content": "w9 " * 10},
        {"role": "assistant", "content": "w10 " * 10},
        {"role": "user", "content": "w11"},
    ]
    full = len(fit_conversation(tokenizer, turns, 1000, 0).prompt_ids)
    # trimming (the app's chat) drops the oldest turn to make room for the answer; the server's requests don't
    assert fit_conversation(tokenizer, turns, full + 4, 8).dropped_messages == 2
    kept = fit_conversation(tokenizer, turns, full + 4, 8, trim=False)
    assert kept.dropped_messages == 0 and len(kept.prompt_ids) == full
    # the conversation is all there is: no parts to tell apart
    with pytest.raises(ContextLengthError, match=f"the prompt is {full} tokens with the chat template, but the"):
        fit_conversation(tokenizer, turns, full, 8, trim=False)
    assert fit_text(tokenizer, "w6 w7 w8", 10).prompt_ids == tokenizer("w6 w7 w8")["input_ids"]
    with pytest.raises(ContextLengthError, match="the prompt is 3 tokens"):
        fit_text(tokenizer, "w6 w7 w8", 3)


def test_sockets_refuse_foreign_hosts_and_taken_ports():
    from core.server.runner import bind_socket, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(ServerError, match="--allow-remote"):
        bind_socket("0.0.0.0", 0)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(ServerError, match=f"port {taken.getsockname()[1]} on 127.0.0.1 is already in use"):
            bind_socket("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


def test_a_child_process_does_not_keep_the_listening_port():
    """The socket is not inheritable: a child started while the server listens (a download, the engine) does
    not hold the port once the server closed it, so the port can be bound again at once."""
    from core.server.runner import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    assert os.get_inheritable(sock.fileno()) is False
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], close_fds=False)
    try:
        sock.close()
        bind_socket("127.0.0.1", port).close()
    finally:
        child.kill()
        child.wait()


def test_the_server_package_never_imports_torch():
    code = (
        "import sys, core.server.api, core.server.runner, core.server.gateway, core.server.engine_thread, "
        "core.server.tool_calls, core.server.origins, "
        "app.api.server, app.api.settings_row; sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_the_defaults_agents_assume():
    """No max_tokens: the rest of the context for chat (None reaches the engine), OpenAI's 16 for
    /v1/completions; presence and frequency penalties reach the engine (and are checked); n > 1 is refused
    with its reason; a context error on /v1/completions names `prompt`."""
    chat = S.parse_chat_request({"messages": USER}, S.Defaults())
    assert chat.max_tokens is None and P.validate(chat.to_generate("r")).max_new_tokens is None
    assert S.parse_completion_request({"prompt": "Once"}, S.Defaults()).max_tokens == 16
    assert S.parse_chat_request({"messages": USER}, DEFAULTS).max_tokens == 32  # a server's own default stays
    penalised = S.parse_chat_request({"messages": USER, "presence_penalty": 0.5, "frequency_penalty": -1}, DEFAULTS)
    generate = penalised.to_generate("r")
    assert (generate.presence_penalty, generate.frequency_penalty) == (0.5, -1.0)
    for name in ("presence_penalty", "frequency_penalty"):
        assert refused_request(S.parse_chat_request, {"messages": USER, name: 2.5}, DEFAULTS).param == name
    refused = refused_request(S.parse_chat_request, {"messages": USER, "n": 3}, DEFAULTS)
    assert refused.param == "n" and "one at a time" in refused.message
    too_long = E.engine_error(P.Error("r", "context_length", "the prompt is 9000 tokens"), 4096, "prompt")
    assert too_long.param == "prompt"


def test_chat_template_kwargs_and_reasoning_in_history_are_checked():
    request = S.parse_chat_request(
        {
            "messages": [*USER, {"role": "assistant", "content": "a", "reasoning_content": "t"}, *USER],
            "chat_template_kwargs": {"enable_thinking": False},
        },
        DEFAULTS,
    )
    assert request.messages[1] == {"role": "assistant", "content": "a", "reasoning_content": "t"}
    assert P.validate(request.to_generate("r")).chat_template_kwargs == {"enable_thinking": False}
    for bad in ({"add_generation_prompt": False}, ["x"], {"eos_token": "<x>"}):
        assert (
            refused_request(S.parse_chat_request, {"messages": USER, "chat_template_kwargs": bad}, DEFAULTS).param
            == "chat_template_kwargs"
        )


def test_forced_calls_move_every_functions_defs_to_the_grammars_root():
    """Nested Pydantic models put their classes in `$defs` and point at them from anywhere; inside a forced
    call the parameters sit under the call's object, so the definitions move to the root (renamed where two
    functions define one name differently) and the grammar validates."""
    import llguidance

    from core.server.tool_calls import forced_call_grammar

    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    person = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address"},
            "past": {"type": "array", "items": {"$ref": "#/$defs/Address"}},
        },
        "$defs": {"Address": address},
    }
    other = {
        "type": "object",
        "properties": {"at": {"$ref": "#/definitions/Address"}},
        "definitions": {"Address": {"type": "integer"}},
    }
    tools = (
        {"type": "function", "function": {"name": "person", "parameters": person}},
        {"type": "function", "function": {"name": "other", "parameters": other}},
    )
    grammar = forced_call_grammar("hermes", tools)
    assert llguidance.LLMatcher.validate_grammar(llguidance.LLMatcher.grammar_from_lark(grammar)) == ""
    schema = json.loads(grammar.split("%json ", 1)[1])
    assert schema["$defs"] == {"Address": address, "other__Address": {"type": "integer"}}
    assert '"#/$defs/other__Address"' in grammar and "#/definitions/" not in grammar
    S.check_grammar("lark", grammar, "tools")  # no error
    with pytest.raises(E.ApiError) as caught:
        S.check_grammar("json_schema", json.dumps({"$ref": "#/$defs/Nowhere"}), "response_format")
    assert (caught.value.param, caught.value.code) == ("response_format", "invalid_schema")


def test_responses_requests_become_the_chat_the_model_reads():
    from core.server.responses import parse_responses_request

    simple = parse_responses_request(
        {"model": "m", "instructions": "Be brief.", "input": "hi", "max_output_tokens": 7, "truncation": "auto"},
        DEFAULTS,
    ).completion
    assert simple.messages == ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"})
    assert simple.max_tokens == 7 and simple.to_generate("r").trim_context
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Oslo?"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "look it up"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "-3 C"},
    ]
    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"], "strict": True}
    request = parse_responses_request(
        {
            "input": items,
            "tools": [tool],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "reasoning": {"effort": "none"},
            "text": {"format": {"type": "json_object"}},
        },
        DEFAULTS,
    ).completion
    user, assistant, result = request.messages
    assert user == {"role": "user", "content": "Weather in Oslo?"}
    assert assistant["content"] == "Checking." and assistant["reasoning_content"] == "look it up"
    assert assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert result == {"role": "tool", "content": "-3 C", "tool_call_id": "c1", "name": "get_weather"}
    assert request.forced_tool == "get_weather" and request.tools[0]["function"]["name"] == "get_weather"
    assert request.chat_template_kwargs == {"enable_thinking": False}


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": 5}, "input"),
        ({"input": []}, "input"),
        ({"input": ["hi"]}, "input[0]"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0]"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content"),
        ({"input": [{"role": "wizard", "content": "x"}]}, "input"),
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "hi", "background": True}, "background"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "tools": "all"}, "tools"),
        ({"input": "hi", "truncation": "sometimes"}, "truncation"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "hi", "text": {"format": {"type": "xml"}}}, "text.format"),
        (
            {"input": "hi", "chat_template_kwargs": ["enable_thinking"], "reasoning": {"effort": "none"}},
            "chat_template_kwargs",
        ),
        ({"input": "hi", "instructions": 3}, "instructions"),
        ({"input": "hi", "reasoning": "high"}, "reasoning"),
        ({"input": "hi", "reasoning": {"effort": ["high"]}}, "reasoning.effort"),
        ([], None),
    ],
)
def test_bad_responses_requests_name_the_field(body, param):
    from core.server.responses import parse_responses_request

    assert refused_request(parse_responses_request, body, DEFAULTS).param == param
