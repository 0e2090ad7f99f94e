"""core.system.json_text: JSON from outside fails as a json.JSONDecodeError however it is malformed, nesting
that would reach Python's recursion limit (a RecursionError no caller caught) included. Its callers' hostile
cases: tests/test_loading.py, tests/test_tools_mcp.py, tests/test_server_units.py, tests/test_remote.py."""

from __future__ import annotations

import json

import pytest

from core.system.json_text import MAX_DEPTH, loads


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_real_documents_and_nesting_up_to_the_cap_are_read():
    assert loads('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}
    assert loads(b'"text"') == "text" and loads("3") == 3
    assert loads(nested(MAX_DEPTH)) is not None


@pytest.mark.parametrize(
    "text",
    [
        nested(MAX_DEPTH + 1),  # json.loads reads it; recursive code after it might not
        "[" * 100_000,  # json.loads alone: RecursionError
        '{"a": ' * 5_000 + "1" + "}" * 5_000,
        b"[" * 5_000,
        "{not json",
    ],
)
def test_malformed_and_too_deep_text_is_a_json_decode_error(text):
    with pytest.raises(json.JSONDecodeError):
        loads(text)


def test_the_cap_can_be_set_lower():
    assert loads(nested(3), max_depth=3)
    with pytest.raises(json.JSONDecodeError, match="nested more than 2 levels deep"):
        loads(nested(3), max_depth=2)
