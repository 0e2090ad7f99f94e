"""The remote-endpoint client (core/remote) against real server processes on loopback: the independent
OpenAI-compatible server (tests/other_openai_server.py: no usage, no [DONE], plain-text errors, several
models), a plain web server, a TLS server with an untrusted certificate, and a closed port; plus the pure
parsers on hostile input, the key store and `specexec chat --remote`."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from conftest import run_cli
from core.engine import protocol as P
from core.engine.client import EngineClient
from core.engine.connection import EngineConnection
from core.errors import (
    InvalidSettingError,
    RemoteAuthError,
    RemoteContextLengthError,
    RemoteNotOpenAIError,
    RemoteRejectedError,
    RemoteTLSError,
    RemoteUnreachableError,
)
from core.remote.check import check_endpoint
from core.remote.endpoint import Endpoint, normalise_base_url
from core.remote.engine import PROMPT_REFUSED, RemoteEngine
from core.remote.wire import (
    PromptCount,
    decode_body,
    error_from_body,
    parse_chunk,
    parse_input_tokens,
    parse_model_list,
    parse_prompt_count,
    parse_served_context,
    refused_field,
)
from other_openai_server import CONTEXT_WORDS, answer_words, prompt_words
from remote_servers import other_server, server_state, stop, wait_until

pytestmark = pytest.mark.timeout(120)

KEY = "sk-other-key"
HELLO = [{"role": "user", "content": "hello there friend"}]


@pytest.fixture(scope="module")
def other():
    """The independent server with a key, answering one word per 20 ms."""
    with other_server("--key", KEY, "--token-delay", "0.02") as (url, _process):
        yield url


@pytest.fixture
def engine(other):
    engine = RemoteEngine(Endpoint(other, KEY, "other"))
    engine.start()
    yield engine
    engine.shutdown()


def drain(engine: RemoteEngine, request_id: str | None = None, timeout: float = 30) -> tuple[str, list[P.Event]]:
    """The text and events until `request_id` ends (or, with None, until the connection is reported lost)."""
    text, events, deadline = "", [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = engine.poll(0.1)
        if event is None:
            continue
        events.append(event)
        if isinstance(event, P.TokenChunk) and request_id in (event.request_id, None):
            text += event.text
        if isinstance(event, (P.Finished, P.Error)) and event.request_id in (request_id, None):
            return text, events
    raise AssertionError(f"no end within {timeout} s: {events}")


# ----------------------------------------------------------------------------------------------------------
# Addresses and what servers send (pure functions)


@pytest.mark.parametrize(
    "given, expected",
    [
        ("192.168.1.20:8765", "http://192.168.1.20:8765/v1"),
        ("http://GPU-box:8000/", "http://gpu-box:8000/v1"),
        ("http://localhost:11434/v1/", "http://localhost:11434/v1"),
        ("https://example.com/api/v1/chat/completions", "https://example.com/api/v1"),
        ("  http://[::1]:8080/v1/models ", "http://[::1]:8080/v1"),
    ],
)
def test_addresses_people_paste_become_the_api_root(given, expected):
    assert normalise_base_url(given) == expected


@pytest.mark.parametrize(
    "given, words",
    [
        ("", "empty"),
        ("ftp://host/v1", "http:// or https://"),
        ("http://user:secret@host/v1", "API key in its own field"),
        ("http://host/v1?key=1", "query"),
        ("http://host:99999/v1", "port"),
        ("http://host /v1", "spaces"),
        ("http:///v1", "no host"),
        ("http://" + "a" * 3000, "longer than"),
    ],
)
def test_unusable_addresses_are_refused_in_plain_words(given, words):
    with pytest.raises(InvalidSettingError, match=words):
        normalise_base_url(given)


def test_a_key_that_cannot_travel_as_a_header_is_refused_without_repeating_it():
    assert (
        Endpoint.from_address("h", "  sk-abc\n").api_key == "sk-abc" and Endpoint.from_address("h", " ").api_key is None
    )
    for bad in ("sk-a b", "sk-\x00", "sk-é"):
        with pytest.raises(InvalidSettingError, match="copy it again") as caught:
            Endpoint.from_address("h", bad)
        assert bad not in str(caught.value)


def test_a_key_over_plain_http_is_flagged_only_off_the_private_network():
    assert Endpoint.from_address("http://example.com", "k").key_in_clear
    assert not Endpoint.from_address("https://example.com", "k").key_in_clear
    assert not Endpoint.from_address("http://192.168.1.20:8765", "k").key_in_clear
    assert not Endpoint.from_address("http://example.com").key_in_clear  # no key, nothing to leak
    assert "sk-secret" not in repr(Endpoint.from_address("http://h", "sk-secret"))  # never the key in a log


def test_model_lists_are_read_defensively():
    vllm = {
        "object": "list",
        "data": [
            {"id": "llama-70b", "max_model_len": 32768},
            {"id": "qwen", "meta": {"n_ctx": 4096}},
            {"id": "llama-70b"},
        ],
    }
    assert [(m.id, m.context_length) for m in parse_model_list(vllm, "s")] == [("llama-70b", 32768), ("qwen", 4096)]
    bare = [
        {"id": "a", "context_length": True},
        {"id": ""},
        {"id": 7},
        {"id": "b\x00c"},
        "junk",
        {"id": "x" * 300},
        {"id": "ok", "specexec": {"max_context": 4096}},
        {"id": "huge", "context_length": 10**12},
    ]
    assert [(m.id, m.context_length) for m in parse_model_list(bare, "s")] == [
        ("a", None),
        ("ok", 4096),
        ("huge", None),
    ]
    for junk in ({"data": "x"}, "<html>", {"models": []}, None):
        with pytest.raises(RemoteNotOpenAIError, match="not a model list"):
            parse_model_list(junk, "s")
    with pytest.raises(RemoteNotOpenAIError, match="at most 1000"):
        parse_model_list({"data": [{"id": str(i)} for i in range(1001)]}, "s")


def test_stream_chunks_are_read_defensively():
    piece = parse_chunk({"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]})
    assert (piece.text, piece.finish_reason, piece.usage) == ("Hi", None, None)
    last = parse_chunk({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
    assert last.usage is not None and (last.usage.prompt_tokens, last.usage.completion_tokens) == (5, 2)
    assert parse_chunk({"choices": [{"text": "t", "finish_reason": "length"}]}).finish_reason == "length"
    assert (
        parse_chunk({"choices": [{"delta": {}}], "usage": {"prompt_tokens": -1, "completion_tokens": 2}}).usage is None
    )
    with pytest.raises(RemoteNotOpenAIError):
        parse_chunk({"choices": [{"delta": {"content": 42}}]})
    with pytest.raises(RemoteNotOpenAIError):
        parse_chunk(["not", "a", "chunk"])
    with pytest.raises(RemoteContextLengthError):
        parse_chunk({"error": {"message": "This model's maximum context length is 4096 tokens"}})


def test_counts_are_read_only_from_vllms_answer():
    assert parse_prompt_count({"count": 12, "max_model_len": 8192, "tokens": [1] * 12}) == PromptCount(12, 8192)
    assert parse_prompt_count({"count": 0}) == PromptCount(0, None)
    assert parse_prompt_count({"count": 12, "max_model_len": "8k"}) == PromptCount(12, None)
    for not_a_count in (
        {"tokens": [1, 2, 3]},  # llama.cpp's answer to /tokenize: it counts text, not our messages
        {"count": -1},
        {"count": True},
        {"count": 1.5},
        {"count": "12"},
        {"count": 10**12},
        [12],
        "<html>Not Found</html>",
        None,
    ):
        assert parse_prompt_count(not_a_count) is None, not_a_count


def test_llama_cpp_counts_and_window_are_read_only_from_their_answers():
    assert parse_input_tokens({"object": "response.input_tokens", "input_tokens": 11}) == PromptCount(11, None)
    assert parse_input_tokens({"input_tokens": 0}) == PromptCount(0, None)
    for not_a_count in (
        {"object": "chat.completion", "input_tokens": 11},
        {"input_tokens": -1},
        {"input_tokens": True},
        {"input_tokens": 2.5},
        {"input_tokens": "11"},
        {"input_tokens": 10**400},
        {"tokens": [1, 2]},
        [11],
        "<html>Not Found</html>",
        None,
    ):
        assert parse_input_tokens(not_a_count) is None, not_a_count
    assert parse_served_context({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}) == 4096
    for no_window in (
        {"default_generation_settings": {"n_ctx": 0}},
        {"default_generation_settings": {"n_ctx": "4096"}},
        {"default_generation_settings": {"n_ctx": 10**400}},
        {"default_generation_settings": [4096]},
        {"n_ctx": 4096},
        "<html>props</html>",
        None,
    ):
        assert parse_served_context(no_window) is None, no_window


def test_error_answers_become_plain_words():
    assert isinstance(error_from_body("Unauthorized", 401, "box", has_key=True), RemoteAuthError)
    assert "needs an API key" in str(error_from_body({"error": {"message": "no key"}}, 401, "box"))
    html = "<html><body><h1>404 Not Found</h1></body></html>"
    not_openai = error_from_body(html, 404, "box", route="models")
    assert isinstance(not_openai, RemoteNotOpenAIError) and "404 Not Found" in not_openai.details
    assert "<" not in not_openai.details  # the tags are gone
    assert isinstance(error_from_body({"detail": "model 'x' not found"}, 404, "box"), RemoteRejectedError)
    assert (
        error_from_body({"object": "error", "message": "context length exceeded", "code": 400}, 400, "b").kind
        == "context_length"
    )
    assert error_from_body("overloaded", 503, "box").kind == "remote_server"
    assert refused_field({"error": {"message": "bad", "param": "seed"}}, ["seed", "top_k"]) == "seed"
    assert refused_field("unsupported parameter: top_k", ["seed", "top_k"]) == "top_k"
    assert refused_field("top_kx is wrong", ["top_k"]) is None
    nested = b"[" * 5000  # json.loads alone: a RecursionError out of the client
    assert decode_body(nested) == nested.decode() and error_from_body(decode_body(nested), 500, "box").kind


# ----------------------------------------------------------------------------------------------------------
# The independent server


def test_both_engines_speak_one_interface():
    assert isinstance(EngineClient(), EngineConnection)
    assert isinstance(RemoteEngine(Endpoint("http://127.0.0.1:9/v1")), EngineConnection)


def test_a_server_is_not_asked_to_count_a_prompt_and_says_so_in_words(engine, other):
    """A server without vLLM's POST /tokenize (this one answers it 404) says so when it connects, and a count
    asked anyway is said to be impossible in words: nothing sent, no guess."""
    assert engine.load("alpha-7b", wait=True).models["counts_prompts"] is False
    before = server_state(other)["last_request"]
    request_id = engine.count_tokens(HELLO, max_new_tokens=9)
    refused = next(e for e in iter(lambda: engine.poll(5), None) if getattr(e, "request_id", None) == request_id)
    assert isinstance(refused, P.Error) and refused.kind == "invalid_setting"
    assert "does not say how long a message is before it answers" in refused.message
    assert server_state(other)["last_request"] == before
    asked = engine.count_tokens([], prompt="w1 w2")  # a count of plain text, which a server is never asked
    refused = next(e for e in iter(lambda: engine.poll(5), None) if getattr(e, "request_id", None) == asked)
    assert isinstance(refused, P.Error) and refused.message == PROMPT_REFUSED
    with pytest.raises(P.ProtocolError, match="messages is empty"):
        engine.count_tokens([])


def test_a_server_that_counts_as_llama_cpp_does_is_asked_there_with_its_window(tmp_path):
    """llama.cpp counts a chat on POST /v1/chat/completions/input_tokens (its /tokenize counts text only) and
    says each request's window on GET /props: the count is the server's, whole, and a prompt that leaves the
    answer no room does not fit; a model list's own window wins over /props."""
    with other_server("--key", KEY, "--llama-cpp-counts") as (url, _process):
        engine = RemoteEngine(Endpoint(url, KEY, "llama"))
        engine.start()
        try:
            assert engine.load("alpha-7b", wait=True).models["max_context"] == 8192  # its list says
            ready = engine.load("beta-13b", wait=True)
            assert ready.models["counts_prompts"] is True and ready.models["max_context"] == CONTEXT_WORDS
            messages = [{"role": "system", "content": "be brief"}, *HELLO]
            count = engine.count_tokens(messages, max_new_tokens=9, chat_template_kwargs={"enable_thinking": False})
            event = next(e for e in iter(lambda: engine.poll(5), None) if getattr(e, "request_id", None) == count)
            assert event == P.TokenCount(count, prompt_words({"messages": messages}), 0, True)
            sent = server_state(url)["last_request"]
            assert sent["model"] == "beta-13b" and sent["messages"] == messages
            assert sent["chat_template_kwargs"] == {"enable_thinking": False}
            tight = engine.count_tokens(messages, max_new_tokens=CONTEXT_WORDS - event.prompt_tokens + 1)
            event = next(e for e in iter(lambda: engine.poll(5), None) if getattr(e, "request_id", None) == tight)
            assert isinstance(event, P.TokenCount) and event.fits is False
        finally:
            engine.shutdown()


def test_the_check_lists_every_model_and_gets_a_short_answer(other):
    check = check_endpoint(Endpoint(other, KEY))
    assert [(m.id, m.context_length) for m in check.models] == [
        ("alpha-7b", 8192),
        ("beta-13b", None),
        ("strict-3b", None),
    ]
    assert check.model == "alpha-7b" and check.reply.startswith("You said: Reply with one word: hello.")
    assert check.refused == frozenset()
    strict = check_endpoint(Endpoint(other, KEY), "strict-3b")
    assert strict.refused == {"seed", "stream_options"}  # asked again without them, and the answer came


def test_a_stream_without_usage_or_done_is_a_complete_answer(engine, other):
    ready = engine.load("alpha-7b", wait=True)
    assert ready.models["max_context"] == 8192 and ready.models["models"] == ["alpha-7b", "beta-13b", "strict-3b"]
    started = time.monotonic()
    request_id = engine.generate(HELLO, max_new_tokens=9, seed=5, temperature=0.3, top_p=0.8, stop=["zz"])
    text, events = drain(engine, request_id)
    words, _ = answer_words({"messages": HELLO, "seed": 5, "max_tokens": 9})
    assert text == " ".join(words)
    assert sum(isinstance(e, P.TokenChunk) for e in events) == 9  # streamed word by word, not in one block
    finished = events[-1]
    assert isinstance(finished, P.Finished) and finished.reason == "length"
    assert (finished.prompt_tokens, finished.generated_tokens) == (0, 0)  # the server does not count
    assert time.monotonic() - started < 9 * 0.02 + 1.5  # the closed connection ended it, not a timeout
    sent = server_state(other)["last_request"]
    assert {k: sent[k] for k in ("model", "max_tokens", "seed", "temperature", "top_p", "stop", "stream")} == {
        "model": "alpha-7b",
        "max_tokens": 9,
        "seed": 5,
        "temperature": 0.3,
        "top_p": 0.8,
        "stop": ["zz"],
        "stream": True,
    }
    assert "top_k" not in sent and "repetition_penalty" not in sent  # left out at their neutral values
    natural = engine.generate(HELLO, max_new_tokens=100)
    _text, events = drain(engine, natural)
    assert events[-1].reason == "eos"


def test_thinking_a_server_leaves_in_the_answer_comes_apart_from_it(engine):
    """A server without a reasoning parser sends a thinking model's `<think>` block in the answer's text, its
    markers cut across chunks: the reasoning reaches the app apart, the answer after it as text; a continued
    answer's text comes as it is."""
    engine.load("alpha-7b", wait=True)
    asked = [{"role": "user", "content": "think first"}]
    request_id = engine.generate(asked, max_new_tokens=6, seed=3)
    text, events = drain(engine, request_id)
    chunks = [e for e in events if isinstance(e, P.TokenChunk)]
    assert "".join(chunk.reasoning for chunk in chunks) == "Let me see."
    assert text == " ".join(answer_words({"messages": asked, "seed": 3, "max_tokens": 6})[0])
    assert not any(chunk.reasoning and chunk.text for chunk in chunks)  # the answer starts after the thought
    assert isinstance(events[-1], P.Finished) and events[-1].reason == "length"
    continued = engine.generate(
        [*asked, {"role": "assistant", "content": "So"}], max_new_tokens=6, continue_final_message=True
    )
    text, _events = drain(engine, continued)
    assert text.startswith("<think>\nLet me see.</think>\n\nYou said:")


def test_fields_a_strict_server_refuses_are_dropped_and_remembered(engine, other):
    engine.load("strict-3b", wait=True)
    first = engine.generate(HELLO, max_new_tokens=4, seed=9, top_k=40)
    text, events = drain(engine, first)
    assert isinstance(events[-1], P.Finished) and text.startswith("You said:")
    assert engine.refused_settings == {"seed", "top_k", "stream_options"}
    second = engine.generate(HELLO, max_new_tokens=4, seed=9, top_k=40)
    drain(engine, second)
    sent = server_state(other)["last_request"]
    assert not {"seed", "top_k", "stream_options"} & set(sent)


def test_the_chosen_model_must_be_one_the_server_has(engine):
    with pytest.raises(RemoteRejectedError, match="has no model 'gamma'.*alpha-7b, beta-13b, strict-3b"):
        engine.load("gamma", wait=True)
    engine.load("gamma")  # in the background: an Error event for the app's banner
    event = next(e for e in iter(lambda: engine.poll(5), None) if isinstance(e, P.Error))
    assert event.request_id is None and event.kind == "remote_rejected" and event.hint


def test_a_conversation_over_the_servers_context_is_a_context_length_error(engine):
    engine.load("beta-13b", wait=True)
    request_id = engine.generate([{"role": "user", "content": "word " * 500}], max_new_tokens=4)
    _text, events = drain(engine, request_id)
    assert isinstance(events[-1], P.Error) and events[-1].kind == "context_length"
    assert "too long" in events[-1].message and events[-1].hint


def test_stop_closes_the_stream_and_frees_the_server(engine, other):
    engine.load("alpha-7b", wait=True)
    before = server_state(other)
    request_id = engine.generate([{"role": "user", "content": "a long answer please"}], max_new_tokens=400)
    text = ""
    while len(text.split()) < 3:  # a few words in
        event = engine.poll(5)
        text += event.text if isinstance(event, P.TokenChunk) else ""
    engine.cancel(request_id)
    rest, events = drain(engine, request_id)
    text += rest
    assert isinstance(events[-1], P.Finished) and events[-1].reason == "cancelled"
    assert text.startswith("You said:")  # what came before Stop stays
    wait_until(lambda: server_state(other)["active"] == 0, timeout=2.0)  # the server noticed and stopped
    after = server_state(other)
    assert after["disconnected"] == before["disconnected"] + 1 and after["finished"] == before["finished"]


def test_answers_run_one_at_a_time_and_a_queued_one_can_be_dropped(engine):
    engine.load("alpha-7b", wait=True)
    first = engine.generate(HELLO, max_new_tokens=6)
    queued = engine.generate([{"role": "user", "content": "second"}], max_new_tokens=6)
    third = engine.generate([{"role": "user", "content": "third"}], max_new_tokens=3)
    engine.cancel(queued)
    texts: dict[str, str] = {first: "", queued: "", third: ""}
    ended: list[tuple[str, str]] = []
    while len(ended) < 3:
        event = engine.poll(5)
        assert event is not None
        if isinstance(event, P.TokenChunk):
            assert event.request_id != third or (first, "length") in ended  # never interleaved
            texts[event.request_id] += event.text
        if isinstance(event, (P.Finished, P.Error)):
            ended.append((event.request_id, event.reason if isinstance(event, P.Finished) else event.kind))
    assert (queued, "cancelled") in ended and texts[queued] == ""
    assert [r for r, _ in ended if r != queued] == [first, third]
    assert texts[first] == "You said: hello there friend. amber" and texts[third] == "You said: third."
    assert engine.in_flight == frozenset()


def test_wrong_or_missing_key_is_said_plainly(other):
    for key, words in (("sk-wrong", "refused the API key"), (None, "needs an API key")):
        with pytest.raises(RemoteAuthError, match=words) as caught:
            check_endpoint(Endpoint(other, key, "box"))
        assert caught.value.kind == "remote_auth" and "Unauthorized" in caught.value.details


def test_a_killed_server_ends_the_answer_as_a_lost_connection_keeping_its_text():
    with other_server("--token-delay", "0.05") as (url, process):
        engine = RemoteEngine(Endpoint(url, name="box"))
        try:
            engine.start()
            engine.load("alpha-7b", wait=True)
            engine.generate([{"role": "user", "content": "a long answer"}], max_new_tokens=400)
            text = ""
            while len(text.split()) < 4:
                event = engine.poll(5)
                assert event is not None
                if isinstance(event, P.TokenChunk):
                    text += event.text
            os.kill(process.pid, signal.SIGKILL)
            rest, events = drain(engine, None, timeout=10)
            lost = events[-1]
            assert isinstance(lost, P.Error) and lost.kind == "engine_died" and lost.request_id is None
            assert "box" in lost.message and "kept" in lost.hint
            assert (text + rest).startswith("You said: a long") and len((text + rest).split()) < 100
            assert not engine.alive and engine.in_flight == frozenset()
            engine.restart(reload=True, wait=False)  # Retry while the server is still gone
            events = [engine.poll(10) for _ in range(2)]
            assert isinstance(events[0], P.LoadProgress) and "Connecting to box" in events[0].stage
            error = events[1]
            assert error.kind == "remote_unreachable" and "nothing is listening" in error.message
        finally:
            engine.shutdown()


# ----------------------------------------------------------------------------------------------------------
# Servers that are not what they should be


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_is_unreachable():
    with pytest.raises(RemoteUnreachableError, match="nothing is listening") as caught:
        check_endpoint(Endpoint(f"http://127.0.0.1:{free_port()}/v1", name="box"))
    assert "server is running" in caught.value.hint


def test_a_plain_web_server_is_not_an_openai_server(tmp_path):
    (tmp_path / "index.html").write_text("<html><body>My photos</body></html>")
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _accepts(port), timeout=20)
        with pytest.raises(RemoteNotOpenAIError, match="no OpenAI API at this address") as caught:
            check_endpoint(Endpoint(f"http://127.0.0.1:{port}/v1"))
        assert "/v1" in caught.value.hint
    finally:
        stop(web)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_problems_are_named(self_signed, other):
    cert, key = self_signed
    with other_server("--tls-cert", str(cert), "--tls-key", str(key)) as (url, _process):
        assert url.startswith("https://")
        with pytest.raises(RemoteTLSError, match="certificate is not trusted") as caught:
            check_endpoint(Endpoint(url))
        assert "SSL_CERT_FILE" in caught.value.hint
        with pytest.raises(RemoteNotOpenAIError, match="without an HTTP answer") as caught:
            check_endpoint(Endpoint(url.replace("https://", "http://")))  # plain http to a TLS server
        assert "https://" in caught.value.hint
    with pytest.raises(RemoteTLSError, match="secure connection") as caught:  # https to a plain http server
        check_endpoint(Endpoint(other.replace("http://", "https://"), KEY))
    assert "http://" in caught.value.hint


# ----------------------------------------------------------------------------------------------------------
# Keys and the terminal chat


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECEXEC_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    return tmp_path / "config"


def test_without_a_keyring_keys_go_to_a_file_only_the_user_can_read(config_home):
    from core.remote.key_store import delete_key, keys_file, save_key, stored_key

    assert save_key("http://a:1/v1", " sk-a ") == str(keys_file())
    save_key("http://b:2/v1", "sk-b")
    assert stat.S_IMODE(keys_file().stat().st_mode) == 0o600
    assert (stored_key("http://a:1/v1"), stored_key("http://b:2/v1"), stored_key("http://c/v1")) == (
        "sk-a",
        "sk-b",
        None,
    )
    assert delete_key("http://a:1/v1") and stored_key("http://a:1/v1") is None and stored_key("http://b:2/v1") == "sk-b"
    save_key("http://b:2/v1", "")  # an empty key forgets it
    assert not keys_file().exists()
    keys_file().parent.mkdir(parents=True, exist_ok=True)
    keys_file().write_text("{not json")
    assert stored_key("http://b:2/v1") is None  # a damaged file is no key, not a crash


def test_with_a_keyring_the_key_goes_there(config_home, dict_keyring):
    from core.remote.key_store import delete_key, keys_file, save_key, stored_key

    assert save_key("http://a:1/v1", "sk-a") == "the system keyring"
    assert not keys_file().exists() and stored_key("http://a:1/v1") == "sk-a"
    assert dict_keyring == {("SpecExec Desktop", "endpoint-key:http://a:1/v1"): "sk-a"}
    assert delete_key("http://a:1/v1") and dict_keyring == {}


@pytest.fixture
def chat(capsys) -> Callable[..., subprocess.CompletedProcess]:
    """`specexec chat ARGS` in this process, reading `script` as piped input."""

    def run(*args: str, script: str) -> subprocess.CompletedProcess:
        return run_cli(capsys, "chat", *args, stdin=script)

    return run


def test_terminal_chat_through_a_remote_server_keeps_the_history(other, config_home, chat):
    from core.remote.key_store import save_key

    save_key(other, KEY)  # as the app keeps it: `chat --remote` finds it without --api-key
    result = chat(
        "--remote",
        other.removesuffix("/v1"),
        "--model",
        "beta-13b",
        "--max-new-tokens",
        "5",
        "--seed",
        "2",
        script="hello there\n/system be brief\nsecond question\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        " ".join(answer_words({"messages": [{"role": "user", "content": q}], "seed": 2, "max_tokens": 5})[0])
        for q in ("hello there", "second question")
    ]
    assert "chatting with beta-13b on" in result.stderr
    sent = server_state(other)["last_request"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["messages"][2]["content"] == result.stdout.splitlines()[0]


def test_terminal_chat_says_why_a_server_cannot_be_used(other, chat):
    wrong = chat("--remote", other, "--api-key", "sk-wrong", script="hi\n")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "refused the API key" in wrong.stderr and "check the key" in wrong.stderr
    bad = chat("--remote", "ftp://box", script="hi\n")
    assert bad.returncode == 2 and "must start with http:// or https://" in bad.stderr
