"""`specexec serve` for real tools (issue 24), end to end: a real server process on loopback serving a tiny
pair whose chat template has tools (Hermes format), driven by the official `openai` client, langchain-openai,
litellm (from its own virtual environment, in a subprocess), and raw HTTP for the hardening cases.

The tiny pair never emits its EOS (answers run to max_tokens) and cannot be steered to write a tool call
without grammar-constrained decoding, so tool calls are tested here as a round trip: tools and tool results
reach the model through its template (the prompt token counts match a local rendering), and requests with
tools are answered; reading calls out of answers is tested on real-format strings in test_tool_calls.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from app_fixtures import save_tiny_pair
from core.text.document_text import fenced
from test_document_text import write_pdf
from tool_templates import HERMES_TEMPLATE

pytestmark = pytest.mark.timeout(300)

KEY = "sk-tools-test-key"
ORIGIN = "http://localhost:5173"
FLAGS = [
    "--served-model-name",
    "m",
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
    "6",
    "--max-queue",
    "1",
    "--keepalive",
    "0.3",
    "--allowed-origins",
    ORIGIN,
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
# a function whose one argument is an enum: a forced call to it is short, whatever the model
UNIT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["unit"],
            "additionalProperties": False,
        },
    },
}
QUESTION = [{"role": "user", "content": "w10 w11 w12"}]
LITELLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-litellm" / "bin" / "python"


@pytest.fixture(scope="module")
def tool_models(tmp_path_factory) -> tuple[str, str]:
    """The tiny pair with a chat template in the Hermes tool format."""
    from transformers import AutoTokenizer

    folders = save_tiny_pair(tmp_path_factory.mktemp("tool-models"))
    for folder in folders:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.chat_template = HERMES_TEMPLATE
        tokenizer.save_pretrained(folder)
    return folders


def start_server(models: tuple[str, str], *extra: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.cli.main",
            "serve",
            "--port",
            "0",
            "--api-key",
            KEY,
            "--target",
            models[0],
            "--draft",
            models[1],
            *FLAGS,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("API key:"):
            break
    url = next((line.split()[-1] for line in lines if line.startswith("Serving the OpenAI API at ")), None)
    if url is None:
        process.kill()
        raise AssertionError((lines, process.stderr.read()))
    return process, url


def stop_server(process: subprocess.Popen) -> str:
    """SIGTERM, which must exit 0; returns what the server wrote on stderr."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(timeout=30) == 0
        return process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


@pytest.fixture(scope="module")
def server(tool_models):
    process, url = start_server(tool_models)
    try:
        yield url
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server, api_key=KEY, max_retries=0, timeout=120)


def connect(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=60)


def post(url: str, body: bytes | str, headers: dict[str, str], path: str = "/v1/chat/completions"):
    connection = connect(url)
    connection.request("POST", path, body, {"Authorization": f"Bearer {KEY}", **headers})
    response = connection.getresponse()
    return response.status, response.headers, response.read()


def local_prompt_tokens(models: tuple[str, str], body: dict) -> int:
    """The prompt tokens of a chat request rendered here, with the served model's tokenizer."""
    from transformers import AutoTokenizer

    from core.text.prompts import Prompt, encode_prompt
    from core.server.requests import Defaults, parse_chat_request

    request = parse_chat_request(body, Defaults())
    tokenizer = AutoTokenizer.from_pretrained(models[0])
    return len(encode_prompt(tokenizer, Prompt(messages=request.messages, tools=request.tools)))


# ----------------------------------------------------------------------------------------------------------
# Tools


@pytest.mark.slow
def test_the_model_card_says_how_it_calls_tools(client):
    model = client.models.list().data[0]
    assert client.models.retrieve(model.id).specexec["tool_call_format"] == "hermes"
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("gpt-4o")
    assert caught.value.code == "model_not_found" and model.id in caught.value.message


@pytest.mark.slow
def test_a_tool_round_trip_reaches_the_model_through_its_template(client, tool_models):
    """A request with tools is answered; the next one carries the assistant's call and the tool's result, and
    the server reads exactly the prompt the template renders for them (counted here with the same tokenizer);
    a longer tool result is that many more prompt tokens."""
    first = client.chat.completions.create(model="m", messages=QUESTION, tools=[WEATHER], seed=1)
    assert first.choices[0].finish_reason == "length" and isinstance(first.choices[0].message.content, str)

    def round_trip(result: str) -> dict:
        return {
            "model": "m",
            "tools": [WEATHER],
            "max_tokens": 2,
            "messages": QUESTION
            + [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "w20"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": result},
            ],
        }

    short, long = round_trip("w30"), round_trip("w30 w31 w32")
    answer = client.chat.completions.create(**short)
    assert answer.usage.prompt_tokens == local_prompt_tokens(tool_models, short)
    assert client.chat.completions.create(**long).usage.prompt_tokens == answer.usage.prompt_tokens + 2
    chunks = list(client.chat.completions.create(**long, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(c.choices[0].delta.content or "" for c in chunks)  # streamed through the tool-call reader


@pytest.fixture(scope="module")
def spelling_models(tmp_path_factory) -> tuple[str, str]:
    """A tiny random pair that can spell anything: the built-in model's tokenizer (byte-level BPE), its
    vocabulary, and a chat template in the Hermes tool format. Random weights, so only a grammar makes it
    write a tool call."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from core.loading.builtin import ensure_converted

    tokenizer = AutoTokenizer.from_pretrained(ensure_converted())
    tokenizer.chat_template = HERMES_TEMPLATE
    folders = []
    for seed, name in ((0, "target"), (1, "draft")):
        torch_seed(seed)
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=2048,
            eos_token_id=tokenizer.eos_token_id,
            tie_word_embeddings=True,
        )
        folder = tmp_path_factory.mktemp("spelling") / name
        LlamaForCausalLM(config).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]


def torch_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


@pytest.mark.slow
def test_a_forced_tool_call_round_trip_through_the_official_client(spelling_models):
    """tool_choice required and a named function: the grammar makes even a random model write one call in its
    template's format, with arguments matching the function's schema; the client reads it as tool_calls,
    whole and streamed; the tool's result goes back in the next turn."""
    pages = {
        "type": "function",
        "function": {
            "name": "search",
            "parameters": {
                "type": "object",
                "properties": {"page": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["page"],
                "additionalProperties": False,
            },
        },
    }
    process, url = start_server(spelling_models)
    try:
        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=120)
        ask = [{"role": "user", "content": "What is the weather?"}]
        for seed in range(3):
            answer = client.chat.completions.create(
                model="m", messages=ask, tools=[UNIT_TOOL, pages], tool_choice="required", seed=seed, max_tokens=48
            )
            choice = answer.choices[0]
            assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1, choice.message
            call = choice.message.tool_calls[0].function
            arguments = json.loads(call.arguments)
            assert (call.name, sorted(arguments)) in (("get_weather", ["unit"]), ("search", ["page"]))
        named = client.chat.completions.create(
            model="m",
            messages=ask,
            tools=[UNIT_TOOL, pages],
            max_tokens=48,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
        )
        call = named.choices[0].message.tool_calls[0]
        assert call.function.name == "get_weather" and json.loads(call.function.arguments)["unit"] in (
            "celsius",
            "fahrenheit",
        )
        streamed = list(
            client.chat.completions.create(
                model="m",
                messages=ask,
                tools=[UNIT_TOOL, pages],
                max_tokens=48,
                stream=True,
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            )
        )
        deltas = [c.choices[0].delta.tool_calls for c in streamed if c.choices and c.choices[0].delta.tool_calls]
        assert (
            deltas
            and deltas[0][0].function.name == "get_weather"
            and streamed[-1].choices[0].finish_reason == "tool_calls"
        )
        follow_up = ask + [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": call.function.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "21 degrees"},
        ]
        done = client.chat.completions.create(model="m", messages=follow_up, tools=[UNIT_TOOL, pages], max_tokens=4)
        assert done.choices[0].finish_reason in ("length", "stop")
    finally:
        stop_server(process)


def tokenize(url: str, body: object, key: str = KEY) -> tuple[int, dict]:
    """POST /tokenize (at the server's root, as vLLM serves it): the status and the decoded answer."""
    status, _, text = post(
        url, json.dumps(body), {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}, "/tokenize"
    )
    return status, json.loads(text)


@pytest.mark.slow
def test_tokenize_counts_the_prompt_an_answer_reads(server, client, tool_models):
    """vLLM's POST /tokenize: a chat (with tools) counts what the template renders and what the answer then
    reports reading; a plain prompt what a completion reads; a prompt longer than the context is counted, not
    refused (the client decides); bad requests are 400s naming the field, another model a 404, no key a 401."""
    chat = {"model": "m", "messages": QUESTION, "tools": [WEATHER], "add_generation_prompt": True}
    status, counted = tokenize(server, chat)
    context = client.models.retrieve("m").specexec["max_context"]
    assert status == 200 and counted == {"count": local_prompt_tokens(tool_models, chat), "max_model_len": context}
    answer = client.chat.completions.create(model="m", messages=QUESTION, tools=[WEATHER], max_tokens=1)
    assert answer.usage.prompt_tokens == counted["count"]
    status, text_count = tokenize(server, {"prompt": "w10 w11 w12 w13"})
    completion = client.completions.create(model="m", prompt="w10 w11 w12 w13", max_tokens=1)
    assert status == 200 and text_count["count"] == completion.usage.prompt_tokens > 0
    long = [{"role": "user", "content": " ".join(f"w{i % 90 + 10}" for i in range(context))}]
    status, too_long = tokenize(server, {"messages": long})
    assert status == 200 and too_long["count"] > too_long["max_model_len"] == context
    for body, param in (
        ({"messages": QUESTION, "prompt": "w1"}, "prompt"),
        ({"model": "m"}, "messages"),
        ({"messages": "w1"}, "messages"),
        ({"messages": QUESTION, "add_generation_prompt": False}, "add_generation_prompt"),
        ({"messages": QUESTION, "continue_final_message": True}, "continue_final_message"),
        ({"messages": [{"role": {"name": "user"}, "content": "w1"}]}, "messages[0].role"),
        ([QUESTION], None),
    ):
        status, refused = tokenize(server, body)
        assert status == 400 and refused["error"]["param"] == param, (body, refused)
    status, refused = tokenize(server, {"model": "gpt-4o", "messages": QUESTION})
    assert status == 404 and refused["error"]["code"] == "model_not_found"
    status, refused = tokenize(server, chat, key="sk-wrong")
    assert status == 401 and refused["error"]["code"] == "invalid_api_key"


@pytest.mark.slow
def test_the_input_token_counts_answer_openais_client_and_llama_cpps_route(server, client, tool_models):
    """OpenAI's POST /v1/responses/input_tokens (the official client's `responses.input_tokens.count`) and
    llama.cpp's POST /v1/chat/completions/input_tokens: the body an answer would be asked with, its prompt
    counted as that answer reads it; the body checked as its answer's route checks it."""
    counted = client.responses.input_tokens.count(
        model="m", instructions="w30 w31", input="w10 w11 w12", tools=[{"type": "function", **WEATHER["function"]}]
    )
    response = client.responses.create(
        model="m",
        instructions="w30 w31",
        input="w10 w11 w12",
        tools=[{"type": "function", **WEATHER["function"]}],
        max_output_tokens=1,
    )
    assert counted.object == "response.input_tokens" and counted.input_tokens == response.usage.input_tokens > 0
    chat = {"model": "m", "messages": QUESTION, "tools": [WEATHER], "max_tokens": 3, "stream": True, "seed": 4}
    headers = {"Content-Type": "application/json"}
    status, _, raw = post(server, json.dumps(chat), headers, "/v1/chat/completions/input_tokens")
    assert status == 200 and json.loads(raw) == {
        "object": "response.input_tokens",
        "input_tokens": local_prompt_tokens(tool_models, chat),
    }
    assert json.loads(raw)["input_tokens"] == tokenize(server, {"messages": QUESTION, "tools": [WEATHER]})[1]["count"]
    for path, body, param in (
        ("/v1/chat/completions/input_tokens", {**chat, "temperature": "hot"}, "temperature"),
        ("/v1/chat/completions/input_tokens", {"model": "m"}, "messages"),
        ("/v1/responses/input_tokens", {"input": "w1", "previous_response_id": "resp_1"}, "previous_response_id"),
        ("/v1/responses/input_tokens", {"input": 7}, "input"),
    ):
        status, _, raw = post(server, json.dumps(body), headers, path)
        assert status == 400 and json.loads(raw)["error"]["param"] == param, (path, body, raw)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="gpt-4o", input="w1")
    status, _, raw = post(
        server, json.dumps(chat), {**headers, "Authorization": "Bearer sk-wrong"}, "/v1/chat/completions/input_tokens"
    )
    assert status == 401 and json.loads(raw)["error"]["code"] == "invalid_api_key"


@pytest.mark.slow
def test_a_follow_up_turn_reports_its_cached_tokens(client):
    messages = [{"role": "user", "content": " ".join(f"w{6 + i % 50}" for i in range(300))}]
    first = client.chat.completions.create(model="m", messages=messages, seed=3, max_tokens=6)
    assert first.usage.prompt_tokens_details.cached_tokens <= 1
    for seed in range(4, 40):  # an answer whose text holds every token (a random model may write <unk>, a special
        if len(first.choices[0].message.content.split()) == first.usage.completion_tokens:  # token that decodes to
            break  # nothing, so the next turn's prompt cannot hold it)
        first = client.chat.completions.create(model="m", messages=messages, seed=seed, max_tokens=6)
    messages += [
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "w40 w41"},
    ]
    second = client.chat.completions.create(model="m", messages=messages, seed=3, max_tokens=2)
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached == first.usage.prompt_tokens + first.usage.completion_tokens - 1  # all of turn 1 and its answer
    assert second.usage.prompt_tokens - cached < 20


@pytest.mark.slow
def test_langchain_agents_get_answers_tools_bound_and_streams(server):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="m", base_url=server, api_key=KEY, max_retries=0, timeout=60, max_tokens=4, seed=2)
    answer = chat.invoke([HumanMessage("w10 w11")])
    assert answer.content and answer.response_metadata["finish_reason"] == "length"
    assert answer.usage_metadata["input_tokens"] > 0
    with_tools = chat.bind_tools([WEATHER])
    reply = with_tools.invoke(
        [
            HumanMessage("w10"),
            answer.model_copy(
                update={
                    "tool_calls": [
                        {"name": "get_weather", "args": {"city": "w20"}, "id": "call_9", "type": "tool_call"}
                    ]
                }
            ),
            ToolMessage("w30", tool_call_id="call_9"),
        ]
    )
    assert reply.response_metadata["finish_reason"] == "length" and reply.tool_calls == []
    assert "".join(chunk.content for chunk in chat.stream("w10")) == chat.invoke("w10").content


# ----------------------------------------------------------------------------------------------------------
# Files


@pytest.mark.slow
def test_a_file_sent_with_a_message_is_read_as_the_app_reads_it(client, tool_models, tmp_path):
    """A PDF in a chat message, as OpenAI's client sends one (a `file` part), and in Responses input: the model
    reads, token for token, the prompt of the same message with the PDF's text in the block the app would
    insert for it, and with the same seed answers the same. A file sent by id is refused in words."""
    pdf = write_pdf(tmp_path / "notes.pdf", ["w20 w21", "w22"]).read_bytes()
    file_data = f"data:application/pdf;base64,{base64.b64encode(pdf).decode()}"
    sent = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "w10 w11"},
                {"type": "file", "file": {"filename": "notes.pdf", "file_data": file_data}},
            ],
        }
    ]
    typed = [{"role": "user", "content": "w10 w11\n" + fenced("notes.pdf", "w20 w21\n\nw22")}]
    answer = client.chat.completions.create(model="m", messages=sent, max_tokens=4, seed=3)
    same = client.chat.completions.create(model="m", messages=typed, max_tokens=4, seed=3)
    assert (
        answer.usage.prompt_tokens == same.usage.prompt_tokens == local_prompt_tokens(tool_models, {"messages": typed})
    )
    assert answer.choices[0].message.content == same.choices[0].message.content
    response = client.responses.create(
        model="m",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "w10 w11"},
                    {"type": "input_file", "filename": "notes.pdf", "file_data": file_data},
                ],
            }
        ],
        max_output_tokens=4,
    )
    assert response.usage.input_tokens == answer.usage.prompt_tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]
        )
    assert caught.value.code == "unsupported_content" and "send the file itself as 'file_data'" in caught.value.message


# ----------------------------------------------------------------------------------------------------------
# Hardening


@pytest.mark.slow
def test_only_json_bodies_of_a_sane_size_are_read(server):
    body = json.dumps({"model": "m", "messages": QUESTION})
    status, _, text = post(server, body, {"Content-Type": "text/plain"})
    assert status == 415 and json.loads(text)["error"]["code"] == "unsupported_media_type"
    huge = json.dumps({"model": "m", "messages": [{"role": "user", "content": "w10 " * 600_000}]})  # 2.4 MB
    status, _, text = post(server, huge, {"Content-Type": "application/json"})
    assert status == 413 and json.loads(text)["error"]["code"] == "request_too_large"
    # a file may make a body 32 MB longer, the text besides it not
    with_file = [{"type": "text", "text": "w10 " * 600_000}, {"type": "file", "file": {"file_data": "aGk="}}]
    status, _, text = post(
        server,
        json.dumps({"model": "m", "messages": [{"role": "user", "content": with_file}]}),
        {"Content-Type": "application/json"},
    )
    assert status == 413 and "bytes besides its files" in json.loads(text)["error"]["message"]

    def chunks(count: int):  # no Content-Length: the cap holds while the body streams in
        for _ in range(count):
            yield b" " * 65536

    for path, count in [("/v1/completions", 40), ("/v1/chat/completions", 560), ("/v1/responses", 560)]:  # 2.6, 37 MB
        connection = connect(server)
        connection.request(
            "POST",
            path,
            chunks(count),
            {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        assert connection.getresponse().status == 413, path


@pytest.mark.slow
def test_web_pages_need_an_allowed_origin(server):
    connection = connect(server)
    connection.request(
        "GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}", "Origin": "https://evil.example"}
    )
    refused = connection.getresponse()
    assert refused.status == 403 and json.loads(refused.read())["error"]["code"] == "origin_not_allowed"
    connection.request(
        "OPTIONS",
        "/v1/chat/completions",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    preflight = connection.getresponse()
    preflight.read()
    assert preflight.status == 200 and preflight.getheader("Access-Control-Allow-Origin") == ORIGIN
    assert "authorization" in preflight.getheader("Access-Control-Allow-Headers").lower()
    connection.request("GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}", "Origin": ORIGIN})
    allowed = connection.getresponse()
    allowed.read()
    assert allowed.status == 200 and allowed.getheader("Access-Control-Allow-Origin") == ORIGIN


def _open_stream(
    url: str, max_tokens: int, method: str = "sequential"
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    connection = connect(url)
    body = {"model": "m", "messages": QUESTION, "max_tokens": max_tokens, "stream": True, "method": method}
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200
    return connection, response


@pytest.mark.slow
def test_a_waiting_stream_hears_its_place_and_a_full_queue_says_when_to_retry(server, tool_models):
    """With --max-queue 1: one request answered, one waiting (its stream's keep-alive comments say it is
    queued behind one), and a third refused with 503 and Retry-After; one with a file is refused so before its
    file is read (a damaged PDF: read, it would be the reader's 400). A count (/tokenize) is answered at once
    all the same: it waits for no answer."""
    running, running_body = _open_stream(server, max_tokens=4000)
    running_body.readline()
    waiting, waiting_body = _open_stream(server, max_tokens=2)
    try:
        deadline = time.monotonic() + 30
        while (line := waiting_body.readline()) != b": queued, 1 ahead\n":
            assert time.monotonic() < deadline and line, line
        status, headers, text = post(
            server, json.dumps({"model": "m", "messages": QUESTION}), {"Content-Type": "application/json"}
        )
        assert status == 503 and json.loads(text)["error"]["code"] == "queue_full"
        assert 1 <= int(headers["Retry-After"]) <= 300
        damaged = base64.b64encode(b"%PDF-1.7 not really").decode()
        file = {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{damaged}"}}
        with_file = {"model": "m", "messages": [{"role": "user", "content": [file]}]}
        status, _, text = post(server, json.dumps(with_file), {"Content-Type": "application/json"})
        assert status == 503 and json.loads(text)["error"]["code"] == "queue_full", text
        status, counted = tokenize(server, {"messages": QUESTION})
        assert status == 200 and counted["count"] == local_prompt_tokens(tool_models, {"messages": QUESTION})
    finally:
        for connection in (running, waiting):
            connection.sock.close()


@pytest.mark.slow
def test_litellm_maps_our_errors_to_its_own(server):
    """litellm (its own environment: it pins openai<3) raises ContextWindowExceededError for a prompt that
    does not fit and AuthenticationError for a wrong key, as it does against OpenAI, and answers otherwise. The
    answer is asked with a seed: two sampled tokens of the scripted model were now and then none of its text
    (a fresh-clone run got an empty answer), which the test is not about."""
    assert LITELLM_PYTHON.is_file(), "scripts/run-tests.sh creates .venv-litellm"
    script = f"""
import json, litellm
base = dict(model="openai/m", api_base={server!r}, max_tokens=2, num_retries=0)
out = {{}}
def kind(**settings):
    try:
        reply = litellm.completion(**{{**base, **settings}})
        return "ok:" + reply.choices[0].message.content
    except Exception as error:
        return type(error).__name__
out["answer"] = kind(api_key={KEY!r}, seed=0, messages=[{{"role": "user", "content": "w10"}}])
out["too_long"] = kind(api_key={KEY!r}, messages=[{{"role": "user", "content": "w10 " * 5000}}])
out["wrong_key"] = kind(api_key="sk-wrong-key-123", messages=[{{"role": "user", "content": "w10"}}])
print(json.dumps(out))
"""
    result = subprocess.run(
        [str(LITELLM_PYTHON), "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["answer"].startswith("ok:") and len(out["answer"]) > 3
    assert out["too_long"] == "ContextWindowExceededError"
    assert out["wrong_key"] == "AuthenticationError"


def test_remote_listening_needs_a_key(capsys):
    from core.cli.main import main

    assert main(["serve", "--host", "0.0.0.0", "--allow-remote", "--no-api-key", "--port", "0"]) == 2
    assert "--allow-remote needs an API key" in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_ends_open_streams_with_server_stopping(tool_models):
    """SIGTERM while a stream is open: the stream ends with a server_stopping error event (not cut off), the
    server exits 0 and logs no traceback."""
    process, url = start_server(tool_models)
    try:
        _, response = _open_stream(url, max_tokens=4000)
        while not response.readline().startswith(b"data: {"):
            pass
        process.send_signal(signal.SIGTERM)
        events = [line for line in response.read().split(b"\n") if line.startswith(b"data: ")]
        assert json.loads(events[-1][6:])["error"]["code"] == "server_stopping"
    finally:
        stderr = stop_server(process)
    assert "Traceback" not in stderr, stderr[-3000:]
