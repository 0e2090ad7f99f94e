"""Grammars that force a tool call in the model's own format (what `tool_choice` "required" or a named function
asks of the API server); reading calls out of answers is core.text.tool_calls, shared with the chat's tool loop."""

from __future__ import annotations

import json

from core.text.tool_calls import CLOSE, OPEN
from core.text.tool_format import HERMES

# JSON inside a forced call is written compactly, as the chat templates show it, never padded with newlines
_COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def _rename_refs(schema: object, renames: dict[str, str]) -> object:
    """`schema` with every local reference "#/$defs/X" or "#/definitions/X" pointed at "#/$defs/<renames[X]>"."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                for prefix in ("#/$defs/", "#/definitions/"):
                    if value.startswith(prefix):
                        head, _, rest = value[len(prefix) :].partition("/")
                        value = "#/$defs/" + renames.get(head, head) + (f"/{rest}" if rest else "")
                out[key] = value
            else:
                out[key] = _rename_refs(value, renames)
        return out
    if isinstance(schema, list):
        return [_rename_refs(item, renames) for item in schema]
    return schema


def hoist_definitions(functions: list[dict]) -> tuple[list[dict], dict[str, object]]:
    """Each function's parameters without their `$defs` / `definitions`, and all of those gathered for the
    grammar's root (where a forced call's references must point, since the parameters sit inside the call's
    object; vLLM does the same). A name two functions define differently is renamed "<function>__<name>"
    in that function, with its references."""
    gathered: dict[str, object] = {}
    hoisted = []
    for function in functions:
        parameters = dict(function.get("parameters") or {"type": "object"})
        local = {**(parameters.pop("definitions", None) or {}), **(parameters.pop("$defs", None) or {})}
        renames = {
            name: name if gathered.get(name, body) == body else f"{function['name']}__{name}"
            for name, body in local.items()
        }
        for name, body in local.items():
            gathered[renames[name]] = _rename_refs(body, renames)
        hoisted.append({**function, "parameters": _rename_refs(parameters, renames)})
    return hoisted, gathered


def forced_call_grammar(fmt: str, tools: tuple[dict, ...], name: str | None = None) -> str:
    """An llguidance Lark grammar for exactly one call, in the model's own format `fmt`, to the function
    `name` (None: any of `tools`), its arguments matching the function's JSON schema: what `tool_choice`
    "required" or a named function asks for (core.decoding.constraints decodes under it). The functions' `$defs` move
    to the grammar's root (nested Pydantic models refer to them from anywhere in the parameters)."""
    key = "arguments" if fmt == HERMES else "parameters"
    functions, definitions = hoist_definitions(
        [tool["function"] for tool in tools if name is None or tool["function"]["name"] == name]
    )
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": f["name"]}, key: f["parameters"]},
            "required": ["name", key],
            "additionalProperties": False,
        }
        for f in functions
    ]
    schema = dict(options[0]) if len(options) == 1 else {"anyOf": options}
    if definitions:
        schema["$defs"] = definitions
    schema["x-guidance"] = _COMPACT_JSON
    call = "call: %json " + json.dumps(schema)
    if fmt == HERMES:
        return f'start: "{OPEN}\\n" call "\\n{CLOSE}"\n{call}'
    return f"start: call\n{call}"
