"""MCP servers through core.tools: the settings checked as hostile input, a real server (tests/mcp_test_server.py,
written with the official SDK) over stdio and over streamable HTTP on loopback, and what broken servers do:
one that will not start, exits at once, babbles non-JSON, hangs, dies mid-call, answers megabytes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from core.errors import InvalidSettingError, ToolServerError
from core.tools.config import (
    MAX_CONFIG_BYTES,
    ServerConfig,
    parse_servers,
    read_config_file,
)
from core.tools.connection import MAX_RESULT_CHARS, ServerConnection
from core.tools.loop import read_calls
from core.tools.toolbox import Toolbox, model_name

sys.path.insert(0, str(Path(__file__).parent))
from remote_servers import stop

SERVER = str(Path(__file__).parent / "mcp_test_server.py")


def stdio_config(mode: str = "stdio", name: str = "calc", **env: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=(SERVER, mode), env=env)


# ------------------------------------------------------------------------------------------------------------
# Settings


def test_the_common_mcpservers_shape_is_read():
    servers = parse_servers(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"], "env": {"TOKEN": "t"}},
                    "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer k"}},
                    "off": {"command": "uvx", "args": ["x"], "disabled": True},
                }
            }
        )
    )
    files, search, off = servers
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio",
        "npx",
        ("-y", "server-filesystem", "/tmp"),
        {"TOKEN": "t"},
    )
    assert (search.transport, search.url, search.headers) == (
        "http",
        "https://example.com/mcp",
        {"Authorization": "Bearer k"},
    )
    assert off.enabled is False and files.enabled and search.enabled
    assert parse_servers(json.dumps({"mcpServers": {s.name: s.to_json() for s in servers}})) == servers
    assert "TOKEN" not in files.where and "Bearer" not in search.where  # what is shown carries no secret


@pytest.mark.parametrize(
    "text, words",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({"mcpServers": []}), "'mcpServers' must be an object"),
        (json.dumps({"mcpServers": {"../x": {"command": "a"}}}), "server name"),
        (json.dumps({"mcpServers": {"a": {"command": "a", "url": "http://x"}}}), "either a 'command'"),
        (json.dumps({"mcpServers": {"a": {}}}), "either a 'command'"),
        (json.dumps({"mcpServers": {"a": {"command": "a\nrm -rf /"}}}), "must be one line"),
        (json.dumps({"mcpServers": {"a": {"command": "a", "args": ["x\u0000y"]}}}), "NUL"),
        (json.dumps({"mcpServers": {"a": {"command": "a", "args": "x"}}}), "args must be a list"),
        (json.dumps({"mcpServers": {"a": {"command": "a", "env": {"A=B": "c"}}}}), "environment variable name"),
        (json.dumps({"mcpServers": {"a": {"url": "file:///etc/passwd"}}}), "http:// or https://"),
        (json.dumps({"mcpServers": {"a": {"url": "javascript:alert(1)"}}}), "http:// or https://"),
        (json.dumps({"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"X": "a\r\nInjected: 1"}}}}), "one line"),
        (json.dumps({"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Bad Header": "v"}}}}), "header name"),
        (json.dumps({"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}), "SSE transport is not supported"),
        (json.dumps({"mcpServers": {f"s{i}": {"command": "a"} for i in range(65)}}), "more than 64"),
        ("{" + " " * MAX_CONFIG_BYTES + "}", "larger than"),
        ('{"mcpServers": ' + "[" * 5000, "not valid JSON .*nested more than"),  # was a RecursionError
    ],
)
def test_hostile_settings_are_refused_in_plain_words(text, words):
    with pytest.raises(InvalidSettingError, match=words):
        parse_servers(text)


def test_a_settings_file_is_checked_before_it_is_read(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_config_file(tmp_path / "missing.json")
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(InvalidSettingError, match="larger than"):
        read_config_file(huge)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(InvalidSettingError, match="not UTF-8"):
        read_config_file(binary)


def test_tool_names_the_model_can_write():
    assert model_name("get weather/now") == "get_weather_now"
    assert model_name("...") == "tool"
    assert len(model_name("x" * 200)) == 64


# ------------------------------------------------------------------------------------------------------------
# A real server over stdio


@pytest.fixture(scope="module")
def calc(tmp_path_factory):
    log = tmp_path_factory.mktemp("mcp") / "calls.log"
    connection = ServerConnection(stdio_config(MCP_TEST_LOG=str(log)), start_timeout=60, call_timeout=8)
    connection.start()
    yield connection, log
    connection.close()


def test_stdio_server_lists_and_runs_its_tools(calc):
    connection, log = calc
    names = [tool.name for tool in connection.tools]
    assert {"add", "echo", "hang", "crash", "big", "inject"} <= set(names)
    add = next(tool for tool in connection.tools if tool.name == "add")
    assert add.description == "Add two integers." and set(add.parameters["properties"]) == {"a", "b"}
    result = connection.call("add", {"a": 2, "b": 3})
    assert (result.text, result.is_error) == ("5", False)
    assert "add 2 3" in log.read_text()


def test_megabytes_of_output_are_cut_for_the_model(calc):
    result = calc[0].call("big", {})
    assert result.cut_chars == 5_000_000 - MAX_RESULT_CHARS
    assert len(result.text) < MAX_RESULT_CHARS + 200 and "more characters cut" in result.text


def test_a_hanging_tool_times_out_and_the_server_still_serves(calc):
    connection = calc[0]
    result = connection.call("hang", {})
    assert result.is_error and "no answer within 8 s" in result.text
    assert connection.call("echo", {"text": "still here"}).text == "still here"


def test_a_stopped_call_is_cancelled_and_the_server_still_serves(calc):
    connection = calc[0]
    future = connection.submit("hang", {})
    assert future.cancel() or future.done()
    assert connection.call("add", {"a": 1, "b": 1}).text == "2"


def test_a_wrong_argument_is_the_tools_error_not_a_crash(calc):
    result = calc[0].call("add", {"a": "two"})
    assert result.is_error and result.text


def test_a_server_that_dies_mid_call_is_reported_and_started_again(tmp_path):
    connection = ServerConnection(stdio_config(), start_timeout=60, call_timeout=20)
    try:
        connection.start()
        result = connection.call("crash", {})
        assert result.is_error and "stopped during the call" in result.text
        assert not connection.alive
        assert connection.call("add", {"a": 4, "b": 5}).text == "9"  # started again for the next call
    finally:
        connection.close()


def test_servers_that_cannot_start_say_why():
    missing = ServerConnection(ServerConfig(name="gone", command="specexec-no-such-program-xyz"), start_timeout=20)
    with pytest.raises(ToolServerError, match="'specexec-no-such-program-xyz' was not found"):
        missing.start()
    exits = ServerConnection(stdio_config("exit"), start_timeout=30)
    with pytest.raises(ToolServerError) as error:
        exits.start()
    assert "stopped before it was ready" in str(error.value) and "refusing to start" in error.value.details
    babble = ServerConnection(stdio_config("babble"), start_timeout=5)
    with pytest.raises(ToolServerError, match="did not finish starting within 5 s"):
        babble.start()
    assert not babble.alive


def test_a_toolbox_keeps_the_servers_that_start():
    toolbox = Toolbox(
        [
            stdio_config(name="calc"),
            stdio_config("exit", name="broken"),
            ServerConfig(name="off", command="x", enabled=False),
        ],
        start_timeout=60,
        call_timeout=10,
    )
    try:
        failures = toolbox.start()
        assert set(failures) == {"broken"} and "off" not in toolbox.connections
        assert {"add", "echo"} <= set(toolbox.tools)
        definition = next(d for d in toolbox.definitions() if d["function"]["name"] == "add")
        assert definition["type"] == "function" and definition["function"]["parameters"]["required"] == ["a", "b"]
        assert toolbox.call("add", {"a": 20, "b": 22}).text == "42"
        deep = "[" * 5000 + "]" * 5000  # a small model looping on a bracket: a RecursionError once
        answer = f'<tool_call>\n{{"name": "add", "arguments": {deep}}}\n</tool_call>'
        _, (call,) = read_calls(answer, "hermes", toolbox)
        assert (call.name, call.arguments, call.problem) == ("add", None, "The arguments must be a JSON object.")
    finally:
        toolbox.close()


# ------------------------------------------------------------------------------------------------------------
# A real server over streamable HTTP on loopback


@pytest.fixture(scope="module")
def http_server():
    import subprocess

    process = subprocess.Popen(
        [sys.executable, SERVER, "http", "--key", "s3cret"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        stop(process)


def test_http_server_with_its_key_in_a_header(http_server):
    config = ServerConfig(name="web", url=http_server, headers={"Authorization": "Bearer s3cret"})
    connection = ServerConnection(config, start_timeout=30, call_timeout=10)
    try:
        assert "add" in [tool.name for tool in connection.start()]
        assert connection.call("add", {"a": 7, "b": 8}).text == "15"
    finally:
        connection.close()


def test_http_server_without_its_key_is_a_clear_error(http_server):
    connection = ServerConnection(ServerConfig(name="web", url=http_server), start_timeout=15)
    with pytest.raises(ToolServerError, match="could not be reached or is not an MCP server"):
        connection.start()


def test_nothing_listening_is_a_clear_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    connection = ServerConnection(ServerConfig(name="none", url=f"http://127.0.0.1:{port}/mcp"), start_timeout=15)
    with pytest.raises(ToolServerError, match="at http://127.0.0.1"):
        connection.start()
