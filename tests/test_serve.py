"""`specexec serve` end to end: the official `openai` client against a real server on loopback, driving a
real engine process with the built-in pair (SmolLM2-135M and its 4-bit draft), short answers."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
import psutil
import pytest
from test_serve_api import UNIT_TOOL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

KEY = "sk-test-key"
FLAGS = [
    "--threads",
    "1",
    "--method",
    "specexec",
    "--budget",
    "8",
    "--max-depth",
    "4",
    "--expand",
    "4",
    "--device",
    "cpu",
]
QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def served():
    """A `specexec serve --port 0` process and its base URL. Stopped with SIGTERM, which must exit 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "core.cli.main", "serve", "--port", "0", "--api-key", KEY, *FLAGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if line.startswith("API key:"):
                break
        url = next((line.split()[-1] for line in lines if line.startswith("Serving the OpenAI API at ")), None)
        assert url is not None and lines[-1].strip() == f"API key: {KEY}", (lines, process.stderr.read())
        yield url, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=30) == 0, process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()


@pytest.fixture(scope="module")
def server(served):
    return served[0]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server, api_key=KEY, max_retries=0, timeout=120)


def health(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=10) as response:
        return json.loads(response.read())


def test_models_lists_the_target(client):
    models = client.models.list().data
    assert [m.id for m in models] == ["builtin"]
    assert (
        models[0].specexec["draft"] == "builtin-draft" and models[0].specexec["max_context"] == 4096
    )  # the planned context


def test_wrong_or_missing_key_is_401_in_openai_format(server):
    wrong = openai.OpenAI(base_url=server, api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=2)
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    assert caught.value.body["message"].startswith("Incorrect API key provided: ***.")  # OpenAI's words, key hidden
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(server + "/models", timeout=10)
    assert missing.value.code == 401
    assert json.loads(missing.value.read())["error"]["code"] == "missing_api_key"


def test_same_seed_same_text_streaming_or_not(client):
    """Two plain requests and one streamed request with one seed: the same text, usage and method fields."""
    settings = dict(model="builtin", messages=QUESTION, max_tokens=8, seed=1234, temperature=0.9)
    first = client.chat.completions.create(**settings)
    second = client.chat.completions.create(**settings)
    assert first.choices[0].message.content == second.choices[0].message.content != ""
    assert first.choices[0].finish_reason in ("length", "stop")
    usage = first.usage
    assert usage.completion_tokens <= 8 and usage.prompt_tokens > 5
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = first.specexec
    assert extra["method"] == "specexec" and extra["budget"] == 8
    assert extra["target_passes"] >= 1
    assert extra["tokens_per_pass"] == pytest.approx(usage.completion_tokens / extra["target_passes"], abs=1e-3)

    chunks = list(client.chat.completions.create(**settings, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == first.choices[0].message.content
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 2  # streamed, not one block
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == [first.choices[0].finish_reason]
    streamed = finals[0].specexec  # its pass count may differ: the search's depth adapts to measured time
    assert (streamed["method"], streamed["budget"]) == (extra["method"], extra["budget"])
    assert streamed["target_passes"] >= 1
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == usage.completion_tokens


def test_max_tokens_and_stop_are_honoured(client):
    """Text completions at temperature 0: max_tokens cuts the answer at that many tokens; a stop string taken
    from inside the answer cuts it just before the stop string, with finish_reason 'stop'."""
    settings = dict(model="builtin", prompt="The three primary colours are", temperature=0)
    long = client.completions.create(**settings, max_tokens=12)
    assert long.usage.completion_tokens == 12 and long.choices[0].finish_reason == "length"
    short = client.completions.create(**settings, max_tokens=3)
    assert short.usage.completion_tokens == 3 and short.choices[0].finish_reason == "length"
    assert long.choices[0].text.startswith(short.choices[0].text)
    text = long.choices[0].text
    words = text.split()
    stop = words[len(words) // 2]
    cut = client.completions.create(**settings, max_tokens=12, stop=[stop, "never-seen-zz"])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[: text.index(stop)]
    streamed = client.completions.create(**settings, max_tokens=12, stop=stop, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == cut.choices[0].text


def test_prompt_longer_than_the_context_is_400(client):
    too_long = [{"role": "user", "content": "sky " * 9000}]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="builtin", messages=too_long, max_tokens=4, stream=stream)
        error = caught.value
        assert error.status_code == 400 and error.code == "context_length_exceeded"
        assert error.body["message"].startswith("This model's maximum context length is 4096 tokens")
        assert "context window is 4,096 tokens" in error.message and "shorten" in error.message


def test_the_built_in_pair_calls_tools_in_the_hermes_format(client):
    """The built-in pair's ChatML template has Hermes tool calls, and a forced call comes back as tool_calls.
    Nested schemas, streamed arguments and a call cut by max_tokens: test_serve_agents.py, on a tiny pair with
    the same tokenizer (the real weights would only make those answers slower)."""
    assert client.models.retrieve("builtin").specexec["tool_call_format"] == "hermes"
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    answer = client.chat.completions.create(
        model="builtin", messages=ask, tools=[UNIT_TOOL], tool_choice="required", max_tokens=60, seed=2
    )
    call = answer.choices[0].message.tool_calls[0]
    assert answer.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["unit"] in ("celsius", "fahrenheit")


def test_a_nested_schema_the_grammar_cannot_read_names_the_tools(client):
    broken = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}},
    }
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="builtin", messages=QUESTION, tools=[broken], tool_choice="required")
    assert caught.value.param == "tools" and caught.value.code == "invalid_schema"
    assert "Missing" in caught.value.message and "sampling" not in caught.value.message


def test_requests_for_another_model_are_404(client):
    for call in (
        lambda: client.chat.completions.create(model="gpt-4o", messages=QUESTION, max_tokens=2),
        lambda: client.completions.create(model="gpt-4o", prompt="Hi", max_tokens=2),
    ):
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.code == "model_not_found" and "builtin" in caught.value.message
    assert client.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=1).model == "builtin"


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def assert_answers_in_json(client: openai.OpenAI, model: str, seed: int, schema_tokens: int) -> None:
    """Structured output through the official client, with SpecExec's trees (the server's method): the answer
    under PERSON is JSON that matches it, and JSON mode's answer is an object (the start of one when
    max_tokens cuts it). `schema_tokens`: the schema answer's max_tokens."""
    ask = [{"role": "user", "content": "Describe a person as JSON."}]
    answer = client.chat.completions.create(
        model=model,
        messages=ask,
        seed=seed,
        max_tokens=schema_tokens,
        temperature=0.9,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
    )
    person = json.loads(answer.choices[0].message.content)
    assert set(person) == {"name", "age"} and isinstance(person["age"], int)
    assert answer.choices[0].finish_reason == "stop" and answer.specexec["method"] == "specexec"
    mode = client.chat.completions.create(
        model=model, messages=ask, seed=seed, max_tokens=60, response_format={"type": "json_object"}
    )
    text = mode.choices[0].message.content
    assert isinstance(json.loads(text), dict) if mode.choices[0].finish_reason == "stop" else text.startswith("{")


def test_the_built_in_pair_writes_json_in_json_mode_and_under_a_schema(client):
    """The real built-in pair's JSON answers; the same on several seeds: test_serve_agents.py, on a tiny pair."""
    assert_answers_in_json(client, "builtin", seed=0, schema_tokens=40)


def test_a_schema_the_grammar_engine_cannot_use_is_a_clear_400(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="builtin",
            messages=QUESTION,
            max_tokens=4,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "object", "$ref": "#/nowhere"}},
            },
        )
    assert "cannot be used" in caught.value.message


def test_logprobs_come_with_every_token_streamed_or_not(client):
    """Each token's log-probability and its alternatives, in OpenAI's shape; greedy reports the model's own
    distribution, so the chosen token is the most likely one."""
    answer = client.chat.completions.create(
        model="builtin", messages=QUESTION, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3
    )
    content = answer.choices[0].logprobs.content
    assert "".join(t.token for t in content) == answer.choices[0].message.content and len(content) == 8
    for token in content:
        assert token.logprob <= 0 and len(token.top_logprobs) == 3
        assert token.top_logprobs[0].token == token.token and token.top_logprobs[0].logprob == pytest.approx(
            token.logprob
        )
        assert [t.logprob for t in token.top_logprobs] == sorted((t.logprob for t in token.top_logprobs), reverse=True)
    streamed = client.chat.completions.create(
        model="builtin", messages=QUESTION, max_tokens=8, temperature=0, logprobs=True, top_logprobs=3, stream=True
    )
    tokens = [
        t
        for chunk in streamed
        if chunk.choices and chunk.choices[0].logprobs
        for t in chunk.choices[0].logprobs.content
    ]
    assert [t.token for t in tokens] == [t.token for t in content]  # the prompt's KV may be reused: equal to rounding
    assert [t.logprob for t in tokens] == pytest.approx([t.logprob for t in content], abs=1e-4)
    text = client.completions.create(model="builtin", prompt="The sky is", max_tokens=4, temperature=0, logprobs=2)
    assert len(text.choices[0].logprobs.token_logprobs) == 4 and len(text.choices[0].logprobs.top_logprobs[0]) == 2


def test_bad_parameters_are_400_naming_the_parameter(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="builtin", messages=QUESTION, temperature=5)
    assert caught.value.param == "temperature"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="builtin", messages=QUESTION, n=2)
    assert caught.value.param == "n" and "send n requests" in caught.value.message


def _open_stream(url: str, max_tokens: int) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    body = {"model": "builtin", "messages": QUESTION, "max_tokens": max_tokens, "stream": True, "seed": 3}
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200
    return connection, response


def test_a_client_that_disconnects_cancels_its_generation(server, client):
    """Read two chunks of a 400-token stream, hang up: the engine is free within a second plus the target pass
    that was running (the engine checks for Cancel between passes; the bound allows two passes, as timed from
    the stream, for a busy machine) instead of ~100 passes later, and answers the next request."""
    connection, response = _open_stream(server, max_tokens=400)
    stamps = []
    while len(stamps) < 3:  # the role chunk, then two chunks of text (two target passes)
        line = response.readline()
        if line.startswith(b"data: "):
            stamps.append(time.monotonic())
    one_pass = stamps[2] - stamps[1]
    sock = connection.sock
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    response.close()
    hung_up = time.monotonic()
    while True:
        state = health(server)
        if state["requests"] == 0 and state["cancelling"] == 0:
            break
        assert time.monotonic() - hung_up < 30, state
        time.sleep(0.02)
    freed_after = time.monotonic() - hung_up
    print(f"engine free {freed_after:.2f} s after the disconnect (one target pass: {one_pass:.2f} s)")
    assert freed_after < 1.0 + 2 * one_pass
    after = client.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=2)
    assert after.usage.completion_tokens == 2


def test_two_clients_at_once_are_both_answered_as_if_alone(client):
    results: dict[int, str] = {}

    def ask(seed: int) -> None:
        answer = client.chat.completions.create(
            model="builtin", messages=QUESTION, max_tokens=6, seed=seed, temperature=1.0
        )
        results[seed] = answer.choices[0].message.content

    threads = [threading.Thread(target=ask, args=(seed,)) for seed in (11, 12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert set(results) == {11, 12} and all(results.values())
    alone = client.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=6, seed=12, temperature=1.0)
    assert alone.choices[0].message.content == results[12]  # never interleaved
    assert alone.usage.prompt_tokens_details.cached_tokens > 0  # the same question: its prompt was kept


def test_a_killed_engine_ends_its_request_with_an_error_and_comes_back(served, client):
    """SIGKILL the engine process mid-stream: the stream ends with an error (not a hang), the server starts a
    new engine with the same models, and the next request is answered."""
    url, process = served
    engines = [p for p in psutil.Process(process.pid).children() if "spawn_main" in " ".join(p.cmdline())]
    assert len(engines) == 1, engines
    stream = client.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=400, stream=True)
    with pytest.raises(openai.APIError, match="killed by SIGKILL"):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                engines[0].kill()
    answer = client.chat.completions.create(model="builtin", messages=QUESTION, max_tokens=2)
    assert answer.usage.completion_tokens == 2
    assert health(url) == {"status": "ok", "model": "builtin", "requests": 0, "cancelling": 0}


def test_a_non_loopback_host_needs_allow_remote(capsys):
    from core.cli.main import main

    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    error = capsys.readouterr().err
    assert "0.0.0.0 is not a loopback address" in error and "--allow-remote" in error
