"""`specexec chat --mcp-config FILE`: a real CLI process, a real engine process running a scripted model that
writes a Hermes tool call (tests/tool_models.py), and a real MCP server (tests/mcp_test_server.py) whose log
says which calls really ran. Approval by --allow-tools and by y / a / n lines on stdin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tool_models import ANSWER_TEXT, LOOPING_TEMPLATE, save_tool_pair

pytestmark = pytest.mark.timeout(600)

SERVER = str(Path(__file__).parent / "mcp_test_server.py")
FLAGS = [
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
    "20",
    "--temperature",
    "0",
]


@pytest.fixture(scope="module")
def tool_pair(tmp_path_factory):
    return save_tool_pair(tmp_path_factory.mktemp("tool-model"))


@pytest.fixture
def mcp_config(tmp_path):
    """An mcp.json naming the test server over stdio; the calls that ran are in the returned log file."""
    log = tmp_path / "calls.log"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "calc": {"command": sys.executable, "args": [SERVER, "stdio"], "env": {"MCP_TEST_LOG": str(log)}}
                }
            }
        )
    )
    return config, log


def chat(pair, config: Path, stdin: str, *extra: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "core.cli.main",
        "chat",
        "--target",
        pair[0],
        "--draft",
        pair[1],
        *FLAGS,
        "--mcp-config",
        str(config),
        *extra,
    ]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=540, check=False)


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.slow  # `specexec chat` and its engine in child processes
def test_allow_tools_runs_the_call_and_the_model_answers_with_the_result(tool_pair, mcp_config):
    config, log = mcp_config
    result = chat(tool_pair, config, "add two and three\n", "--allow-tools")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ANSWER_TEXT + "\n"  # the call's text is not part of the answer
    assert calls(log) == ["add 2 3"]
    assert "[add gave: 5]" in result.stderr and "allow?" not in result.stderr


@pytest.mark.slow  # `specexec chat` and its engine in child processes
def test_each_call_is_asked_about_and_n_or_the_end_of_input_refuses_it(tool_pair, mcp_config):
    config, log = mcp_config
    result = chat(tool_pair, config, "add two and three\nn\nagain\n")  # the second question's call meets EOF
    assert result.returncode == 0, result.stderr
    assert 'tool call: add {"a": 2, "b": 3} (MCP server calc)' in result.stderr
    assert result.stderr.count("(denied: add)") == 2 and calls(log) == []
    assert result.stdout == (ANSWER_TEXT + "\n") * 2  # the model was told, and answered


@pytest.mark.slow  # `specexec chat` and its engine in child processes
def test_y_allows_once_and_a_allows_for_the_rest_of_the_chat(tool_pair, mcp_config):
    config, log = mcp_config
    once = chat(tool_pair, config, "first\ny\nsecond\nn\n")
    assert once.returncode == 0, once.stderr
    assert calls(log) == ["add 2 3"] and once.stderr.count("allow?") == 2
    log.unlink()
    always = chat(tool_pair, config, "first\na\nsecond\nthird\n")
    assert always.returncode == 0, always.stderr
    assert calls(log) == ["add 2 3"] * 3 and always.stderr.count("allow?") == 1
    assert always.stdout.split("\n") == [ANSWER_TEXT] * 3 + [""]


@pytest.mark.slow
def test_a_model_that_calls_forever_stops_at_the_round_cap(tmp_path, mcp_config):
    from core.tools.loop import MAX_ROUNDS

    config, log = mcp_config
    pair = save_tool_pair(tmp_path / "looping", LOOPING_TEMPLATE)
    result = chat(pair, config, "add\n", "--allow-tools")
    assert result.returncode == 0, result.stderr
    assert calls(log) == ["add 2 3"] * MAX_ROUNDS
    assert f"stopped after {MAX_ROUNDS} rounds of tool calls" in result.stderr


@pytest.mark.slow  # `specexec chat` and its engine in child processes
def test_broken_servers_and_bad_settings_are_plain_errors(tool_pair, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"mcpServers": {"gone": {"command": "specexec-no-such-program-xyz"}}}))
    result = chat(tool_pair, broken, "hi\n", "--allow-tools")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'specexec-no-such-program-xyz' was not found" in result.stderr and "no tools" in result.stderr
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps({"mcpServers": {"x": {"url": "file:///etc/passwd"}}}))
    result = chat(tool_pair, hostile, "hi\n")
    assert result.returncode == 2 and "http:// or https://" in result.stderr and "Loading" not in result.stderr


def test_allow_tools_without_servers_is_refused(tool_pair):
    command = [sys.executable, "-m", "core.cli.main", "chat", "--target", tool_pair[0], "--allow-tools"]
    result = subprocess.run(command, input="", capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "--allow-tools needs --mcp-config" in result.stderr
