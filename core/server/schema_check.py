"""Whether a JSON schema has any finite instance: a schema whose `$ref` points back to itself through required
properties (`{"properties": {"x": {"$ref": "#"}}, "required": ["x"]}`), or only to itself (`{"$ref": "#"}`), is
read by the grammar engine without complaint, and then decoding under it can only stop part-way (an answer of
`''` or `'{"x": '`), which breaks the promise that a structured answer parses. Such a schema is refused at the
request instead.

The check is a least fixpoint over the schema's local `$ref` targets: every target starts as "no finite
instance", and each round recomputes them from the rules below until nothing changes (each round can only turn
a target from no to yes). Rules: `true`, enums, consts and scalar types have an instance; `false` has none;
`anyOf`/`oneOf` need one branch with an instance, `allOf` all of them (siblings of a `$ref` too); an object
needs every required property to have one; an array with `minItems` > 0 needs its items to have one. What the
check cannot resolve (a `$ref` to another document) counts as having an instance: the grammar engine judges it.
"""

from __future__ import annotations

from typing import Any


def has_finite_instance(schema: Any) -> bool:
    """True when some finite JSON value matches `schema` (as far as the rules above can tell)."""
    known: dict[str, bool] = {}
    while True:
        seen: set[str] = set()
        whole = _finite(schema, schema, known, seen)
        updated: dict[str, bool] = {}
        pending = list(seen)  # every target reachable from the schema, through other targets too
        while pending:
            pointer = pending.pop()
            if pointer in updated:
                continue
            found: set[str] = set()
            updated[pointer] = _finite(_resolve(schema, pointer), schema, known, found)
            pending.extend(found - updated.keys())
        if all(known.get(pointer, False) == value for pointer, value in updated.items()):
            return whole
        known.update(updated)


def _resolve(root: Any, pointer: str) -> Any:
    """The subschema at a local JSON pointer ("#", "#/$defs/a"); True (anything) when it cannot be found."""
    node = root
    for part in pointer.removeprefix("#").split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return True
    return node


def _finite(node: Any, root: Any, known: dict[str, bool], seen: set[str]) -> bool:
    if node is False:
        return False
    if not isinstance(node, dict):
        return True
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        seen.add(ref)
        if not known.get(ref, False):
            return False
    if "enum" in node or "const" in node:
        return True
    for key, need_all in (("allOf", True), ("anyOf", False), ("oneOf", False)):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            results = [_finite(branch, root, known, seen) for branch in branches]
            if not (all(results) if need_all else any(results)):
                return False
    types = node.get("type")
    types = [types] if isinstance(types, str) else types if isinstance(types, list) else None
    if types is None:
        types = ["object"] if "properties" in node or "required" in node else ["array"] if "items" in node else []
        if not types:
            return True
    return any(_type_finite(kind, node, root, known, seen) for kind in types)


def _type_finite(kind: str, node: dict, root: Any, known: dict[str, bool], seen: set[str]) -> bool:
    if kind == "object":
        properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        required = node.get("required") if isinstance(node.get("required"), list) else []
        return all(
            _finite(properties.get(name, node.get("additionalProperties", True)), root, known, seen)
            for name in required
            if isinstance(name, str)
        )
    if kind == "array":
        minimum = node.get("minItems", 0)
        if not isinstance(minimum, int) or minimum <= 0:
            return True
        prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
        items = node.get("items", True)
        return all(_finite(item, root, known, seen) for item in prefix[:minimum]) and (
            len(prefix) >= minimum or _finite(items, root, known, seen)
        )
    return True
