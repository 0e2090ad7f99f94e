"""The API server's parts that need no engine: request checks, error mapping, the socket rules, the context
rules the server relies on (plain-text prompts, no silent trimming), and the no-torch rule."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from core.engine import protocol as P
from core.errors import ContextLengthError, ServerError
from core.server import schemas as S

DEFAULTS = S.Defaults(temperature=0.5, top_p=0.8, max_tokens=32, seed=None, stop=("###",))
USER = [{"role": "user", "content": "hi"}]


def _error(parse, body) -> S.ApiError:
    with pytest.raises(S.ApiError) as caught:
        parse(body, DEFAULTS)
    assert caught.value.status == 400
    return caught.value


def test_chat_request_defaults_roles_and_content_parts():
    request = S.parse_chat_request({"model": "m", "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]},
    ]}, DEFAULTS)
    assert request.messages == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "a b"})
    assert (request.temperature, request.top_p, request.max_tokens, request.stop) == (0.5, 0.8, 32, ("###",))
    generate = request.to_generate("r1")
    assert P.validate(generate) is generate
    assert generate.reuse_cache is False and generate.trim_context is False and generate.prompt is None
    # no seed: a new one per request (the OpenAI behaviour); a seed is kept as given
    seeds = {S.parse_chat_request({"messages": USER}, DEFAULTS).seed for _ in range(8)}
    assert len(seeds) > 1
    explicit = S.parse_chat_request({"messages": USER, "seed": 7, "max_completion_tokens": 5, "stop": "x"}, DEFAULTS)
    assert (explicit.seed, explicit.max_tokens, explicit.stop) == (7, 5, ("x",))


@pytest.mark.parametrize("body, param", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
    ({"messages": USER, "temperature": 2.5}, "temperature"),
    ({"messages": USER, "top_p": 0}, "top_p"),
    ({"messages": USER, "max_tokens": 0}, "max_tokens"),
    ({"messages": USER, "max_tokens": True}, "max_tokens"),
    ({"messages": USER, "stop": ["ok", ""]}, "stop"),
    ({"messages": USER, "n": 2}, "n"),
    ({"messages": USER, "tools": [{"type": "function"}]}, "tools"),
    ({"messages": USER, "method": "beam"}, "method"),
])
def test_bad_chat_requests_name_the_parameter(body, param):
    assert _error(S.parse_chat_request, body).param == param


def test_neutral_values_of_unsupported_fields_are_accepted():
    request = S.parse_chat_request({"messages": USER, "n": 1, "presence_penalty": 0, "logprobs": False,
                                    "tool_choice": "none", "user": "someone"}, DEFAULTS)
    assert request.kind == "chat"


def test_completion_request_takes_one_text_prompt():
    assert S.parse_completion_request({"prompt": ["Once"]}, DEFAULTS).prompt == "Once"
    assert P.validate(S.parse_completion_request({"prompt": "Once"}, DEFAULTS).to_generate("r2")).messages == ()
    for prompt in (["a", "b"], [1, 2, 3], "", None):
        assert _error(S.parse_completion_request, {"prompt": prompt}).param == "prompt"


def test_engine_errors_map_to_openai_statuses():
    too_long = S.engine_error(P.Error("r", "context_length", "the prompt is 9000 tokens", "shorten it"))
    assert (too_long.status, too_long.code, too_long.param) == (400, "context_length_exceeded", "messages")
    assert too_long.body()["error"]["message"] == "the prompt is 9000 tokens (shorten it)"
    assert S.engine_error(P.Error("r", "engine_died", "gone")).status == 503
    assert S.engine_error(P.Error("r", "internal", "bug")).status == 500


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
    turns = [{"role": "user", "content": "w9 " * 10}, {"role": "assistant", "content": "w10 " * 10},
             {"role": "user", "content": "w11"}]
    full = len(fit_conversation(tokenizer, turns, 1000, 0).prompt_ids)
    # trimming (the app's chat) drops the oldest turn to make room for the answer; the server's requests don't
    assert fit_conversation(tokenizer, turns, full + 4, 8).dropped_messages == 2
    kept = fit_conversation(tokenizer, turns, full + 4, 8, trim=False)
    assert kept.dropped_messages == 0 and len(kept.prompt_ids) == full
    with pytest.raises(ContextLengthError, match=f"the messages are {full} tokens"):
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


def test_the_server_package_never_imports_torch():
    code = ("import sys, core.server.api, core.server.runner, core.server.gateway, core.server.engine_thread, "
            "app.api.server, app.api.settings_row; sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
