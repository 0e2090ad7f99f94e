"""Structured output after a thinking block (issue 44): whitespace a model writes before `<think>` belongs to
the thinking part, and a thought that runs on ends at the request's thinking budget, after which the forced
answer still comes. A scripted thinking model (Qwen3's way with the block, Hermes tool calls, a byte-level
tokenizer that can spell JSON) behind a real `specexec serve`."""

from __future__ import annotations

import json
from collections import Counter

import openai
import pytest

from thinking_models import save_byte_thinking_pair

pytestmark = pytest.mark.timeout(600)

# a nested schema whose every value is bounded, so that a call written by a model that has no opinion on it
# (the scripted model's distribution is flat outside its script) ends well within the answer's limit
PLACE = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                                          "days": {"type": "integer", "minimum": 1, "maximum": 9}},
         "required": ["city", "days"], "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "plan", "parameters": {
    "type": "object", "properties": {"place": PLACE, "note": {"type": "string", "maxLength": 4},
                                     "sunny": {"type": "boolean"}},
    "required": ["place", "note", "sunny"], "additionalProperties": False}}}
USER = [{"role": "user", "content": "Plan a trip."}]


def _valid_call(choice) -> bool:
    """The choice is one call to `plan` whose arguments match TOOL's schema (checked by hand: no validator
    is a dependency of the project)."""
    if choice.finish_reason != "tool_calls" or len(choice.message.tool_calls or []) != 1:
        return False
    call = choice.message.tool_calls[0].function
    arguments = json.loads(call.arguments)
    place = arguments["place"]
    return (call.name == "plan" and set(arguments) == {"place", "note", "sunny"} and set(place) == {"city", "days"}
            and place["city"] in ("Paris", "Rome") and 1 <= place["days"] <= 9 and len(arguments["note"]) <= 4
            and isinstance(arguments["sunny"], bool))


def _serve(folders):
    from test_serve_api import KEY, start_server

    process, url = start_server(folders)
    return process, openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def newline_first(tmp_path_factory):
    """A model that writes a newline before it opens its thought (as several fine-tunes of Qwen3 do)."""
    from test_serve_api import stop_server

    process, client = _serve(save_byte_thinking_pair(tmp_path_factory.mktemp("newline"), "\n<think>Because sky</think>Blue"))
    try:
        yield client
    finally:
        stop_server(process)


@pytest.mark.slow
def test_a_forced_call_comes_after_a_thought_that_starts_with_a_newline(newline_first):
    """Before the fix the newline was read as the answer's start, `<think>` was masked and most seeds wrote
    until the length limit; now every seed thinks "Because sky" and then calls."""
    outcomes = []
    for seed in range(24):
        answer = newline_first.chat.completions.create(model="m", messages=USER, tools=[TOOL], tool_choice="required",
                                                       max_tokens=300, seed=seed, temperature=1.0)
        choice = answer.choices[0]
        outcomes.append((choice.finish_reason, _valid_call(choice), choice.message.model_extra.get("reasoning_content")))
    assert Counter(outcomes) == {("tool_calls", True, "Because sky"): 24}
