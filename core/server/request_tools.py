"""A request's tools checked before they reach a chat template or the grammar: the function definitions
(`tools`), the choice among them (`tool_choice`) and the calls in earlier assistant messages. What a client
sends is hostile until checked: each refusal is a 400 naming the field (OpenAI's error shape)."""

from __future__ import annotations

import re
from typing import Any

from core.server.api_errors import ApiError
from core.server.schema_check import has_finite_instance
from core.system import json_text

MAX_TOOLS = 128
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for function names


def parse_tools(body: dict) -> tuple[dict[str, Any], ...]:
    """The checked function definitions, as the chat template reads them."""
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise ApiError(
            400, f"'tools' must be a list of at most {MAX_TOOLS} functions", param="tools", code="invalid_value"
        )
    checked = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict):
            raise ApiError(
                400, f'{where} must be {{"type": "function", "function": {{...}}}}', param=where, code="invalid_value"
            )
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
            raise ApiError(
                400,
                f"{where}.function.name must be 1-64 letters, digits, '_' or '-', got {name!r}",
                param=f"{where}.function.name",
                code="invalid_value",
            )
        parameters = function.get("parameters", {})
        if not isinstance(function.get("description", ""), str) or not isinstance(parameters, dict):
            raise ApiError(
                400,
                f"{where}.function: 'description' must be a string and 'parameters' an object",
                param=f"{where}.function",
                code="invalid_value",
            )
        for key in ("$defs", "definitions"):  # a forced call's grammar gathers them by name
            if parameters.get(key) is not None and not isinstance(parameters[key], dict):
                raise ApiError(
                    400,
                    f"{where}.function.parameters.{key} must be an object of named schemas",
                    param=f"{where}.function.parameters.{key}",
                    code="invalid_schema",
                )
        if not has_finite_instance(parameters):
            raise ApiError(
                400,
                f"{where}.function.parameters: no finite JSON value matches the schema (a '$ref' "
                "leads back to itself through required properties), so no call could be complete: give "
                "the recursion a way to end",
                param=f"{where}.function.parameters",
                code="invalid_schema",
            )
        kept = {key: function[key] for key in ("name", "description", "parameters") if key in function}
        checked.append({"type": "function", "function": kept})
    if len({t["function"]["name"] for t in checked}) != len(checked):
        raise ApiError(400, "'tools' names a function twice", param="tools", code="invalid_value")
    return tuple(checked)


def parse_tool_choice(body: dict, tools: tuple[dict[str, Any], ...]) -> tuple[str, str | None]:
    """(mode, function name): "auto", "none", "required" (some call), or "named" (that function), checked
    against the tools."""
    choice = body.get("tool_choice")
    if choice is None or choice in ("auto", "none"):
        return choice or "auto", None
    if choice == "required":
        mode, name = "required", None
    elif (
        isinstance(choice, dict)
        and choice.get("type") == "function"
        and isinstance(choice.get("function"), dict)
        and isinstance(choice["function"].get("name"), str)
    ):
        mode, name = "named", choice["function"]["name"]
    else:
        raise ApiError(
            400,
            "'tool_choice' must be 'auto', 'none', 'required' or {\"type\": \"function\", "
            '"function": {"name": ...}}',
            param="tool_choice",
            code="invalid_value",
        )
    if not tools:
        raise ApiError(400, f"'tool_choice' {mode} needs 'tools'", param="tool_choice", code="invalid_value")
    if name is not None and name not in {t["function"]["name"] for t in tools}:
        raise ApiError(
            400, f"'tool_choice' names {name!r}, which is not in 'tools'", param="tool_choice", code="invalid_value"
        )
    return mode, name


def call_arguments(call: object, where: str) -> tuple[str, str, dict[str, Any]]:
    """(id, name, arguments) of an assistant message's tool call; the arguments decoded (templates read objects)."""
    function = call.get("function") if isinstance(call, dict) else None
    if (
        not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not isinstance(call.get("id", ""), str)
    ):
        raise ApiError(
            400,
            f'{where} must be {{"id", "type": "function", "function": {{"name", "arguments"}}}}',
            param=where,
            code="invalid_value",
        )
    try:
        arguments = json_text.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError) as error:
        raise ApiError(
            400, f"{where}.function.arguments must be a JSON object in a string", param=where, code="invalid_value"
        ) from error
    if not isinstance(arguments, dict):
        raise ApiError(
            400, f"{where}.function.arguments must be a JSON object in a string", param=where, code="invalid_value"
        )
    return call.get("id", ""), function["name"], arguments
