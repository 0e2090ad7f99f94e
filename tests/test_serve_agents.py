"""`specexec serve` as 2026's agent frameworks call it (issue 34), each through its own default code path
against a real server process: the Responses API through the official client (whole, streamed, tools and
their outputs, structured output, reasoning items of a model that thinks), openai-agents (which calls the
Responses API by default), pydantic-ai with a nested output model (a forced `final_result` tool call),
instructor in TOOLS mode (from its own virtual environment: it pins jiter below what openai 3 needs) with
partial objects streamed, and litellm with drop_params (its own environment too).

The models are tiny and random: only a grammar (a JSON schema, a forced call) makes them write something a
client can read, which is what these clients' structured output asks for; free text is whatever comes out.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field

from test_serve import assert_answers_in_json
from test_serve_api import KEY, LITELLM_PYTHON, spelling_models, start_server, stop_server  # noqa: F401 - fixture
from thinking_models import ANSWER_TEXT, QWEN3_TEMPLATE, THOUGHT_TEXT, save_thinking_pair

pytestmark = pytest.mark.timeout(400)

INSTRUCTOR_PYTHON = Path(__file__).resolve().parents[1] / ".venv-instructor" / "bin" / "python"
ASK = "Describe Ada Lovelace, who lived in London."


class Address(BaseModel):
    """Bounded, with no extra keys: a random model would otherwise write strings until max_tokens."""

    model_config = ConfigDict(extra="forbid")
    city: str = Field(max_length=10)
    country: str = Field(max_length=10)


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=10)
    age: int = Field(ge=0, le=120)
    home: Address


@pytest.fixture(scope="module")
def server(spelling_models):  # noqa: F811 - the fixture imported above
    process, url = start_server(spelling_models, "--max-new-tokens", "160")
    try:
        yield url
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server, api_key=KEY, max_retries=0, timeout=120)


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 10}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


# ----------------------------------------------------------------------------------------------------------
# The Responses API, through the official client


@pytest.mark.slow
def test_a_response_whole_and_streamed(client):
    """Instructions and input become the chat the model reads; the answer is one message item, streamed as
    the events the client's types read (created, item added, text deltas, done, completed) with the same
    text; a cut answer is "incomplete" for max_output_tokens; usage is reported."""
    whole = client.responses.create(
        model="m",
        instructions="Be brief.",
        input="w10 w11",
        max_output_tokens=5,
        extra_body={"seed": 4, "temperature": 0},
    )
    assert whole.status == "incomplete" and whole.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in whole.output] == ["message"] and whole.output_text
    assert whole.usage.output_tokens == 5 and whole.usage.input_tokens > 5
    events = list(
        client.responses.create(
            model="m",
            instructions="Be brief.",
            input="w10 w11",
            max_output_tokens=5,
            stream=True,
            extra_body={"seed": 4, "temperature": 0},
        )
    )
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.incomplete"
    assert "response.output_item.added" in kinds and "response.output_text.done" in kinds
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == whole.output_text == events[-1].response.output_text


@pytest.mark.slow
def test_function_tools_calls_and_their_outputs(client):
    """tool_choice required: a function_call item (its arguments match the schema), streamed with argument
    deltas; the call and its output go back in `input` and are read (more input tokens)."""
    first = client.responses.create(
        model="m", input="What is the weather in Oslo?", tools=[WEATHER], tool_choice="required", extra_body={"seed": 1}
    )
    call = first.output[-1]
    assert call.type == "function_call" and call.name == "get_weather" and first.status == "completed"
    assert set(json.loads(call.arguments)) == {"city"}
    events = list(
        client.responses.create(
            model="m",
            input="What is the weather in Oslo?",
            tools=[WEATHER],
            tool_choice={"type": "function", "name": "get_weather"},
            stream=True,
            extra_body={"seed": 1},
        )
    )
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert len(deltas) > 1 and "".join(deltas) == done.arguments == call.arguments  # same seed, same call
    follow_up = [
        {"role": "user", "content": "What is the weather in Oslo?"},
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "w40 w41 w42 w43 w44 w45"},
    ]
    answer = client.responses.create(model="m", input=follow_up, tools=[WEATHER], max_output_tokens=3)
    assert answer.usage.input_tokens > first.usage.input_tokens and answer.output


@pytest.mark.slow
def test_structured_output_and_refusals_in_words(client):
    schema = Person.model_json_schema()
    answer = client.responses.create(
        model="m",
        input=ASK,
        extra_body={"seed": 2},
        text={"format": {"type": "json_schema", "name": "person", "schema": schema}},
    )
    Person.model_validate_json(answer.output_text)
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input="w10", previous_response_id="resp_123")
    assert refused.value.param == "previous_response_id" and "stateless" in refused.value.message
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input="w10", tools=[{"type": "web_search"}])
    assert refused.value.param == "tools[0].type" and "function tools" in refused.value.message
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="m", input=[{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]
        )
    assert refused.value.param == "input[0].content"
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="gpt-5", input="w10")


@pytest.mark.slow
def test_reasoning_items_of_a_model_that_thinks(tmp_path):
    """A thinking model's thinking is a reasoning item before the message (never in output_text), streamed
    as reasoning_text deltas; a reasoning item sent back in `input` reaches a template that reads it."""
    process, url = start_server(save_thinking_pair(tmp_path, QWEN3_TEMPLATE))
    try:
        client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=120)
        answer = client.responses.create(model="m", input="w40 w41", max_output_tokens=20)
        assert [item.type for item in answer.output] == ["reasoning", "message"]
        assert answer.output[0].content[0].text == THOUGHT_TEXT and answer.output_text == ANSWER_TEXT
        events = list(client.responses.create(model="m", input="w40 w41", max_output_tokens=20, stream=True))
        thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        assert thought == THOUGHT_TEXT and events[-1].response.output_text == ANSWER_TEXT
        history = [
            {"role": "user", "content": "w40 w41"},
            *[item.model_dump(exclude_none=True) for item in answer.output],
            {"role": "user", "content": "w42"},
        ]
        with_thought = client.responses.create(model="m", input=history, max_output_tokens=20)
        without = client.responses.create(model="m", input=[history[0], history[2], history[3]], max_output_tokens=20)
        assert with_thought.usage.input_tokens == without.usage.input_tokens + 5  # <think> w20 w21 w22 </think>
        off = client.responses.create(model="m", input="w40", max_output_tokens=20, reasoning={"effort": "none"})
        assert [item.type for item in off.output] == ["message"] and off.output_text == ANSWER_TEXT
    finally:
        stop_server(process)


# ----------------------------------------------------------------------------------------------------------
# Chat completions under a grammar, through the official client


class Street(BaseModel):
    city: str = Field(max_length=12)
    street: str = Field(max_length=12)


class Resident(BaseModel):
    name: str = Field(max_length=12)
    home: Street
    past: list[Street] = Field(max_length=2)


@pytest.mark.slow
def test_a_nested_tool_call_in_the_hermes_format_whole_streamed_and_cut(client):
    """A forced call whose parameters are a nested Pydantic model ($defs, $ref) is written under a grammar in
    the template's Hermes format, read back as tool_calls, streamed with its arguments in fragments (the same
    call: same seed), and a call cut by max_tokens shows no template text."""
    tool = openai.pydantic_function_tool(Resident, name="final_result")
    assert "$defs" in tool["function"]["parameters"]
    ask = [{"role": "user", "content": ASK}]
    answer = client.chat.completions.create(
        model="m", messages=ask, tools=[tool], tool_choice="required", max_tokens=300, seed=2
    )
    call = answer.choices[0].message.tool_calls[0]
    assert answer.choices[0].finish_reason == "tool_calls" and call.function.name == "final_result"
    Resident.model_validate_json(call.function.arguments)
    stream = client.chat.completions.create(
        model="m", messages=ask, tools=[tool], tool_choice="required", max_tokens=300, seed=2, stream=True
    )
    pieces = [d for chunk in stream if chunk.choices for d in chunk.choices[0].delta.tool_calls or ()]
    assert pieces[0].function.name == "final_result" and len(pieces) > 3  # the arguments grow piece by piece
    assert "".join(p.function.arguments or "" for p in pieces) == call.function.arguments
    cut = client.chat.completions.create(
        model="m", messages=ask, tools=[tool], tool_choice="required", max_tokens=3, seed=2
    )
    assert cut.choices[0].finish_reason == "length" and not cut.choices[0].message.content


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_json_mode_and_a_json_schema_always_parse(client, seed):
    """The answer is JSON on every seed (test_serve.assert_answers_in_json: a schema's answer matches it, JSON
    mode's is an object or the start of one)."""
    assert_answers_in_json(client, "m", seed, schema_tokens=60)


# ----------------------------------------------------------------------------------------------------------
# Agent frameworks


@pytest.mark.slow
def test_openai_agents_on_its_default_responses_path(server):
    """openai-agents' Runner with OpenAIResponsesModel (its default, streamed): a function tool called under
    tool_choice "required" and run by the agent, its output sent back, then a nested output type through
    text.format."""
    import asyncio

    from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    calls: list[str] = []

    @function_tool
    def get_weather(city: Literal["Oslo", "London", "Paris"]) -> str:  # bounded: a random model writes it
        """The weather in a city."""
        calls.append(city)
        return "sunny"

    model = OpenAIResponsesModel(
        model="m", openai_client=openai.AsyncOpenAI(base_url=server, api_key=KEY, max_retries=0)
    )
    # turn 1 must call the tool; turn 2 (tool_choice back to auto) answers in the output type's schema, which
    # a random model can finish (a free answer would run to max_tokens, which an agent takes as a failure)
    agent = Agent(
        name="people",
        instructions="Look the weather up, then describe the person.",
        model=model,
        tools=[get_weather],
        output_type=Person,
        model_settings=ModelSettings(tool_choice="required"),
    )
    result = asyncio.run(Runner.run(agent, ASK, max_turns=3))
    assert len(calls) == 1 and isinstance(result.final_output, Person)
    assert isinstance(result.final_output.home, Address)
    assert [item.type for item in result.new_items][:2] == ["tool_call_item", "tool_call_output_item"]


@pytest.mark.slow
def test_pydantic_ai_with_a_nested_output_model(server):
    """pydantic-ai's default structured output: a forced `final_result` tool whose parameters refer to the
    nested model through $defs (hoisted to the grammar's root), whole and streamed."""
    import asyncio

    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class Family(BaseModel):
        model_config = ConfigDict(extra="forbid")
        parent: Person
        children: list[Address] = Field(max_length=2)

    model = OpenAIChatModel("m", provider=OpenAIProvider(base_url=server, api_key=KEY))
    agent = Agent(model, output_type=Family, retries=0)
    family = agent.run_sync(ASK).output
    assert isinstance(family.parent.home, Address)

    async def streamed() -> list:
        async with agent.run_stream(ASK) as run:
            return [partial async for partial in run.stream_output(debounce_by=None)]

    partials = asyncio.run(streamed())
    assert len(partials) > 1 and isinstance(partials[-1], Family)


@pytest.mark.slow
def test_instructor_tools_mode_and_partial_objects(server):
    """instructor (its own environment) in TOOLS mode: the object whole, and partial objects that grow as the
    call's arguments stream (one update per argument piece, not one at the end)."""
    assert INSTRUCTOR_PYTHON.is_file(), "scripts/run-tests.sh creates .venv-instructor"
    script = f"""
import json, instructor, openai
from pydantic import BaseModel, ConfigDict, Field
class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str = Field(max_length=10)
    country: str = Field(max_length=10)
class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=10)
    age: int = Field(ge=0, le=120)
    home: Address
client = instructor.from_openai(openai.OpenAI(base_url={server!r}, api_key={KEY!r}, max_retries=0), mode=instructor.Mode.TOOLS)
ask = [{{"role": "user", "content": {ASK!r}}}]
person = client.chat.completions.create(model="m", response_model=Person, messages=ask, max_retries=0)
partials = [p.model_dump() for p in client.chat.completions.create_partial(model="m", response_model=Person, messages=ask, max_retries=0)]
print(json.dumps({{"person": person.model_dump(), "partials": partials}}))
"""
    result = subprocess.run([str(INSTRUCTOR_PYTHON), "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    Person.model_validate(out["person"])
    partials = out["partials"]
    assert len(partials) > 3 and Person.model_validate(partials[-1])
    assert partials[0]["home"] is None or partials[0]["name"] != partials[-1]["name"]  # it grew


@pytest.mark.slow
def test_litellm_drop_params_reaches_the_penalties(server):
    """litellm with drop_params (its own environment: it pins openai<3): presence and frequency penalties
    are sent and served (they used to be a 400 that drop_params could not help with)."""
    assert LITELLM_PYTHON.is_file(), "scripts/run-tests.sh creates .venv-litellm"
    script = f"""
import json, litellm
reply = litellm.completion(model="openai/m", api_base={server!r}, api_key={KEY!r}, max_tokens=4, num_retries=0,
                           messages=[{{"role": "user", "content": "w10"}}], presence_penalty=0.5,
                           frequency_penalty=0.5, drop_params=True, seed=3)
print(json.dumps({{"finish": reply.choices[0].finish_reason, "tokens": reply.usage.completion_tokens}}))
"""
    result = subprocess.run(
        [str(LITELLM_PYTHON), "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"finish": "length", "tokens": 4} or out["finish"] == "stop"


@pytest.mark.slow
def test_context_errors_name_the_field_that_holds_the_prompt(client):
    too_long = "w10 " * 3000  # the tiny models' context is 2048 tokens
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="m", prompt=too_long, max_tokens=2)
    assert caught.value.param == "prompt" and caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=too_long, max_output_tokens=2)
    assert caught.value.param == "input" and caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": too_long}], max_tokens=2)
    assert caught.value.param == "messages"
