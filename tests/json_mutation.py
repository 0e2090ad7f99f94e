"""Seeded mutation of a JSON document, for the tests that feed files from outside (a model's headers and
tokenizer, a chat export) to their readers: each mutation replaces one node with a hostile value, deletes it, or
adds a key."""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence

HOSTILE_JSON = [
    None,
    True,
    -1,
    0,
    2**64,
    10**400,
    1e400,
    float("nan"),
    "",
    "F8_E4M3",
    "x" * 300,
    [],
    [0],
    [[[]]],
    {},
    {"a": 1},
]


def mutated_json(value, chosen: random.Random, added_keys: Sequence[str]):
    """`value` (a file's JSON) with one node replaced by a hostile value, deleted, or left with one of
    `added_keys` added."""
    if isinstance(value, dict) and value and chosen.random() < 0.7:
        key = chosen.choice(list(value))
        action = chosen.randrange(3)
        if action == 0:
            return {**value, key: mutated_json(value[key], chosen, added_keys)}
        if action == 1:
            return {k: v for k, v in value.items() if k != key}
        return {**value, chosen.choice(added_keys): chosen.choice(HOSTILE_JSON)}
    if isinstance(value, list) and value and chosen.random() < 0.7:
        at = chosen.randrange(len(value))
        return [*value[:at], mutated_json(value[at], chosen, added_keys), *value[at + 1 :]]
    return chosen.choice(HOSTILE_JSON)


DELETE = object()  # with_node's value that deletes the node


def with_node(data, path: tuple, value):
    """A deep copy of `data` with the node at `path` (keys and list indexes) set to `value`, or deleted where
    `value` is DELETE: one named hostile value where a test must say which field its refusal names."""
    data = copy.deepcopy(data)
    node = data
    for step in path[:-1]:
        node = node[step]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data
