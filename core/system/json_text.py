"""JSON from outside (an API request's tool arguments, a model's tool call, a remote server's reply, a pasted
MCP settings text, a model folder's files) decoded so that every malformed or hostile text fails the same way,
as a json.JSONDecodeError (a ValueError) that the callers already catch and say in words.

`json.loads` alone raises RecursionError for arrays or objects nested deeper than Python's recursion limit
(about a thousand levels: a few kilobytes of "[", or a small model that loops on a bracket), which no
`except ValueError` catches, and text nested a little less deep decodes but makes later recursive code (a
template, a schema compiler, `json.dumps`) hit the limit. No real document nests anywhere near MAX_DEPTH."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # a tool schema or a model's config nests a few levels; the API server holds bodies to it too


def loads(text: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads(text)`, refused as a json.JSONDecodeError when arrays and objects nest more than `max_depth`
    deep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _too_deep(max_depth) from None
    if _nests_deeper(value, max_depth):
        raise _too_deep(max_depth)
    return value


def _too_deep(max_depth: int) -> json.JSONDecodeError:
    return json.JSONDecodeError(f"the JSON is nested more than {max_depth} levels deep", "", 0)


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether arrays and objects in `value` nest more than `limit` deep, walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def is_whole(value: object) -> bool:
    """Whether a value read from outside (decoded JSON, a file header's metadata) is a whole number: an int
    that is not a bool (Python's booleans are ints, and `true` is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Whether a value read from outside is a number, whole or not, and not a bool (NaN and the infinities
    included: Python's json reads them, so a range check must still follow)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
