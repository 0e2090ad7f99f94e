"""MCP servers' secrets in the keyring, and running servers updated to new settings (core.tools.server_secrets,
core.tools.toolbox.Toolbox.update), with the real test server (tests/mcp_test_server.py) over stdio and over
streamable HTTP on loopback. The keyring is the dictionary backend of tests/conftest.py (`dict_keyring`),
behind keyring's own API, which is all the secret store talks to; without it, keyring's own "fail" backend."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import ToolServerError
from core.tools.config import ServerConfig, parse_servers
from core.tools.connection import ServerConnection
from core.tools.loop import Approvals
from core.tools.server_secrets import (
    SECRET_REF,
    forget_secrets,
    is_secret,
    resolve_secrets,
    secret_refs,
    store_secrets,
)
from core.tools.toolbox import Toolbox

sys.path.insert(0, str(Path(__file__).parent))
from remote_servers import stop, wait_until

SERVER = str(Path(__file__).parent / "mcp_test_server.py")


NEEDS_K123 = "API_KEY=" + hashlib.sha256(b"k-123").hexdigest()  # the server starts only with API_KEY=k-123


def calc(name: str = "calc", *args: str, **env: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=(SERVER, "stdio", *args), env=env)


@pytest.mark.parametrize(
    "name, secret",
    [
        ("API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("Authorization", True),
        ("X-Api-Key", True),
        ("DB_PASSWORD", True),
        ("client_secret", True),
        ("PATH", False),
        ("MCP_TEST_LOG", False),
        ("Accept", False),
    ],
)
def test_which_names_hold_secrets(name, secret):
    assert is_secret(name) is secret


def test_a_secret_goes_to_the_keyring_and_reaches_the_server_when_it_starts(dict_keyring, tmp_path):
    server = calc(API_KEY="k-123", MCP_TEST_NEEDS=NEEDS_K123)
    stored, warning = store_secrets(server)
    assert warning == "" and stored.env == {"API_KEY": SECRET_REF, "MCP_TEST_NEEDS": NEEDS_K123}
    assert list(dict_keyring.values()) == ["k-123"]
    file_text = json.dumps({"mcpServers": {stored.name: stored.to_json()}})
    assert "k-123" not in file_text  # the settings file keeps only the reference
    [read_back] = parse_servers(file_text)
    assert resolve_secrets(read_back).env["API_KEY"] == "k-123"
    connection = ServerConnection(read_back, start_timeout=60, call_timeout=10)
    try:
        connection.start()  # the server refuses to start without API_KEY=k-123 in its environment
        assert connection.call("add", {"a": 1, "b": 2}).text == "3"
    finally:
        connection.close()
    assert store_secrets(read_back) == (read_back, "")  # saved again: nothing moves twice


def test_a_secret_is_never_given_to_another_program_or_address(dict_keyring):
    stored, _ = store_secrets(calc(API_KEY="k-123", MCP_TEST_NEEDS=NEEDS_K123))
    impostor = ServerConfig(name="calc", command="/bin/sh", args=("-c", "env"), env=dict(stored.env))
    with pytest.raises(ToolServerError, match="its API_KEY is not in the system keyring"):
        ServerConnection(impostor).start()
    elsewhere = ServerConfig(name="calc", url="https://evil.example/mcp", headers={"Authorization": SECRET_REF})
    with pytest.raises(ToolServerError, match="add the server again in Settings"):
        resolve_secrets(elsewhere)


def test_forgotten_secrets_leave_the_keyring(dict_keyring):
    one, _ = store_secrets(calc("one", API_KEY="a"))
    two, _ = store_secrets(calc("two", API_KEY="b"))
    assert len(dict_keyring) == 2
    forget_secrets(secret_refs(one))
    assert list(dict_keyring.values()) == ["b"] and resolve_secrets(two).env["API_KEY"] == "b"
    with pytest.raises(ToolServerError):
        resolve_secrets(one)


def test_without_a_keyring_the_secret_stays_in_the_file_and_the_warning_says_so(no_keyring):
    server = calc(API_KEY="k-123", MCP_TEST_LOG="/tmp/x")
    stored, warning = store_secrets(server)
    assert stored == server
    assert "No usable system keyring" in warning and "API_KEY" in warning and "MCP_TEST_LOG" not in warning
    with pytest.raises(ToolServerError, match="not in the system keyring"):
        resolve_secrets(ServerConfig(name="calc", command="x", env={"API_KEY": SECRET_REF}))


@pytest.fixture(scope="module")
def http_server():
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", "--key", "s3cret"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.split()[-1]
    finally:
        stop(process)


def test_an_authorization_header_from_the_keyring_opens_an_http_server(dict_keyring, http_server):
    stored, _ = store_secrets(ServerConfig(name="web", url=http_server, headers={"Authorization": "Bearer s3cret"}))
    assert stored.headers == {"Authorization": SECRET_REF} and list(dict_keyring.values()) == ["Bearer s3cret"]
    connection = ServerConnection(stored, start_timeout=30, call_timeout=10)
    try:
        connection.start()
        assert connection.call("add", {"a": 7, "b": 8}).text == "15"
    finally:
        connection.close()


@pytest.mark.slow
def test_an_update_starts_new_servers_stops_removed_ones_and_keeps_the_rest(tmp_path):
    gate = tmp_path / "gate"
    slow = calc("slow", MCP_TEST_GATE=str(gate))
    steady = calc("steady")
    toolbox = Toolbox([slow, steady], start_timeout=60, call_timeout=60)
    try:
        assert toolbox.start() == {}
        kept = toolbox.connections["steady"]
        gate.touch()
        running = toolbox.submit("slow__add", {"a": 1, "b": 1})
        wait_until(lambda: Path(f"{gate}.entered").exists(), timeout=60)
        changed = calc("steady", MCP_TEST_LOG=str(tmp_path / "log"))
        failures = toolbox.update([changed, calc("fresh"), ServerConfig(name="off", command="x", enabled=False)])
        result = running.result(timeout=30)  # the removed server's call ends with a line, not a hang
        assert (
            result.is_error and "'slow' was stopped" in result.text and "removed or changed in Settings" in result.text
        )
        assert failures == {} and set(toolbox.connections) == {"steady", "fresh"}
        assert toolbox.connections["steady"] is not kept and not kept.alive  # changed: started anew
        late = kept.submit("add", {"a": 1, "b": 1}).result(timeout=5)  # a retired server is not started again
        assert late.is_error and "'steady' was stopped" in late.text and not kept.alive
        assert {tool.server for tool in toolbox.tools.values()} == {"steady", "fresh"}
        fresh = toolbox.connections["fresh"]
        assert toolbox.update([changed, calc("fresh")]) == {}  # nothing changed: nothing restarts
        assert toolbox.connections["fresh"] is fresh and fresh.alive
        assert toolbox.call("fresh__add", {"a": 2, "b": 2}).text == "4"
        gone = toolbox.submit("slow__add", {"a": 1, "b": 1}).result(timeout=5)
        assert gone.is_error and "is gone" in gone.text
    finally:
        gate.unlink(missing_ok=True)
        toolbox.close()


def test_names_for_leaves_out_the_servers_a_chat_switched_off():
    toolbox = Toolbox([calc("a"), calc("b")], start_timeout=60)
    try:
        toolbox.start()
        only_a = toolbox.names_for(["b"])
        assert only_a and {toolbox.tools[name].server for name in only_a} == {"a"}
        assert toolbox.names_for([]) == frozenset(toolbox.tools)
        assert {d["function"]["name"] for d in toolbox.definitions(only_a)} == set(only_a)
    finally:
        toolbox.close()


def test_always_holds_for_a_tool_of_one_server_only():
    approvals = Approvals()
    approvals.record("calc", "add", "always")
    assert not approvals.needs_asking("calc", "add")
    assert approvals.needs_asking("other", "add")  # a server added later with a tool of that name is asked about
    approvals.record("other", "add", "once")
    assert approvals.needs_asking("other", "add")
