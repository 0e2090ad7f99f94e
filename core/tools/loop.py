"""The tool loop of one answer: the model's calls read in its template's format (core.text.tool_calls, the
parser the API server uses), each run only once the user allows it, the results sent back, the model
answering again, until it answers without a call or MAX_ROUNDS answers with calls were run.

Who decides: only the user, through the `approve` callback (once, always for this tool in this chat, or
deny) or a blanket allow given before the chat started (`specexec chat --allow-tools`). A tool's output is
data: it goes into a "tool" message for the model and nowhere else, so it can neither approve a call nor
change a setting; calls are read from the model's own answer only, and each still needs the user.

The pieces (read_calls, Approvals, the message builders) are what the app's chat uses between its engine
events; run_tool_turn strings them together for the terminal, where an answer is one blocking call.
"""

from __future__ import annotations

import concurrent.futures
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.system import json_text
from core.text.tool_calls import parse_answer
from core.tools.connection import ToolResult
from core.tools.toolbox import Toolbox

MAX_ROUNDS = 8  # answers with tool calls per question: a model that calls forever is stopped here
Decision = Literal["once", "always", "deny"]
DENIED_TEXT = "The user did not allow this call."
STOPPED_TEXT = "The user stopped this call."
Waiter = Callable[[concurrent.futures.Future], "ToolResult | None"]  # a call's result, or None: stopped


def cap_note(max_rounds: int = MAX_ROUNDS) -> str:
    """What the user is told when an answer reaches the round cap."""
    return f"stopped after {max_rounds} rounds of tool calls (the most one answer may make)"


def wait_for_result(future: concurrent.futures.Future) -> ToolResult:
    return future.result()


@dataclass(frozen=True)
class PendingCall:
    """A call the model wrote: `arguments` decoded (None when they are not a JSON object), `problem` set when
    it cannot run at all (unknown tool, bad arguments): it is then answered with the problem, unasked."""

    id: str
    name: str
    arguments_text: str
    arguments: dict[str, Any] | None
    server: str | None
    problem: str | None = None


@dataclass
class Approvals:
    """The user's standing answers for one chat: every tool (`allow_all`) or the tools allowed "always", each
    as (server, tool name): a server added or replaced later that lists a tool of the same name is asked about
    anew."""

    allow_all: bool = False
    always: set[tuple[str, str]] = field(default_factory=set)

    def needs_asking(self, server: str, name: str) -> bool:
        return not self.allow_all and (server, name) not in self.always

    def record(self, server: str, name: str, decision: Decision) -> None:
        if decision == "always":
            self.always.add((server, name))


def read_calls(
    answer: str, fmt: str | None, toolbox: Toolbox, offered: frozenset[str] | None = None
) -> tuple[str, list[PendingCall]]:
    """(content, calls) of a finished answer, each call checked against the tools `offered` to the answer (all
    of the toolbox's when None): a call of any other tool is answered with a problem, never run."""
    names = frozenset(toolbox.tools) if offered is None else offered
    content, calls = parse_answer(answer, fmt, names)
    content = content.strip()
    pending = []
    for call in calls:
        call_id = f"call_{secrets.token_hex(6)}"
        tool = toolbox.tools.get(call.name) if call.name in names else None
        try:
            arguments = json_text.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError:
            arguments = None
        problem = None
        if tool is None:
            problem = f"There is no tool named {call.name!r}. The tools are: {', '.join(sorted(names)) or 'none'}."
        elif not isinstance(arguments, dict):
            arguments, problem = None, "The arguments must be a JSON object."
        pending.append(
            PendingCall(call_id, call.name, call.arguments, arguments, tool.server if tool else None, problem)
        )
    return content, pending


def assistant_message(content: str, calls: list[PendingCall], reasoning: str = "") -> dict[str, Any]:
    """The model's answer with its calls, in the form chat templates read (arguments as objects)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or {}}}
            for c in calls
        ],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def tool_message(call: PendingCall, result: ToolResult) -> dict[str, Any]:
    """A result for the model; an error is marked as one so the model does not take it for the tool's answer."""
    text = f"Error: {result.text}" if result.is_error else result.text
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}


@dataclass
class TurnOutcome:
    """The messages one question added after the user's (answers with calls, results, the final answer);
    `answered`: the final answer came; `capped`: stopped at MAX_ROUNDS; `stopped`: the user stopped a tool."""

    messages: list[dict[str, Any]]
    answered: bool
    capped: bool = False
    stopped: bool = False


def run_tool_turn(
    messages: list[dict[str, Any]],
    generate: Callable[[list[dict[str, Any]]], tuple[str, str] | None],
    toolbox: Toolbox,
    fmt: str | None,
    approvals: Approvals,
    approve: Callable[[PendingCall], Decision],
    on_result: Callable[[PendingCall, ToolResult], None] = lambda call, result: None,
    max_rounds: int = MAX_ROUNDS,
    wait: Waiter = wait_for_result,
) -> TurnOutcome:
    """Answer the conversation `messages` (ending with the user's question), running the calls the user
    allows. `generate(messages)` gives (answer text, reasoning) or None when the answer failed or was stopped;
    `wait(future)` waits for a running call (None: the user stopped it, which ends the turn).
    """
    added: list[dict[str, Any]] = []
    for round_number in range(max_rounds + 1):
        produced = generate(messages + added)
        if produced is None:
            return TurnOutcome(added, answered=False)
        answer, reasoning = produced
        content, calls = read_calls(answer, fmt, toolbox)
        if not calls:
            final: dict[str, Any] = {"role": "assistant", "content": content}
            if reasoning:
                final["reasoning_content"] = reasoning
            return TurnOutcome(added + [final], answered=True)
        if round_number == max_rounds:
            return TurnOutcome(added + [{"role": "assistant", "content": content}], answered=True, capped=True)
        added.append(assistant_message(content, calls, reasoning))
        for call in calls:
            result = run_call(call, toolbox, approvals, approve, wait)
            if result is None:
                added.append(tool_message(call, ToolResult(STOPPED_TEXT, is_error=True)))
                return TurnOutcome(added, answered=False, stopped=True)
            on_result(call, result)
            added.append(tool_message(call, result))
    raise AssertionError("unreachable: the last round returns")


def run_call(
    call: PendingCall,
    toolbox: Toolbox,
    approvals: Approvals,
    approve: Callable[[PendingCall], Decision],
    wait: Waiter = wait_for_result,
) -> ToolResult | None:
    """One call: its problem, the user's refusal, or the tool's result (None: the user stopped it)."""
    if call.problem is not None:
        return ToolResult(call.problem, is_error=True)
    if approvals.needs_asking(call.server or "", call.name):
        decision = approve(call)
        approvals.record(call.server or "", call.name, decision)
        if decision == "deny":
            return ToolResult(DENIED_TEXT, is_error=True)
    return wait(toolbox.submit(call.name, call.arguments))
