"""The remote-endpoint client against a real `specexec serve` on loopback, started as its own process: with an
API key (the built-in pair, SmolLM2-135M and its 4-bit draft) and without one (tiny random models)."""

from __future__ import annotations

import time

import openai
import pytest

from core.engine import protocol as P
from core.errors import RemoteAuthError
from core.remote.check import check_endpoint
from core.remote.endpoint import Endpoint
from core.remote.engine import RemoteEngine
from remote_servers import get_json, specexec_serve, wait_until
from test_engine import save_tiny_pair

pytestmark = pytest.mark.timeout(300)

KEY = "sk-remote-test"
SMALL = [
    "--threads",
    "1",
    "--method",
    "specexec",
    "--budget",
    "8",
    "--max-depth",
    "4",
    "--expand",
    "4",
    "--device",
    "cpu",
]
QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture(scope="module")
def keyed():
    with specexec_serve("--api-key", KEY, "--max-new-tokens", "8", *SMALL) as (url, _process):
        yield url


@pytest.fixture(scope="module")
def keyless(tmp_path_factory):
    target, draft = save_tiny_pair(tmp_path_factory.mktemp("remote-serve-models"))
    with specexec_serve("--no-api-key", "--target", target, "--draft", draft, *SMALL) as (url, _process):
        yield url


def answer(engine: RemoteEngine, request_id: str, timeout: float = 120) -> tuple[str, P.Event]:
    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = engine.poll(0.1)
        if isinstance(event, P.TokenChunk) and event.request_id == request_id:
            text += event.text
        elif isinstance(event, (P.Finished, P.Error)) and event.request_id in (request_id, None):
            return text, event
    raise AssertionError("no answer in time")


def counted(engine: RemoteEngine, request_id: str, timeout: float = 60) -> P.TokenCount | P.Error:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = engine.poll(0.1)
        if isinstance(event, (P.TokenCount, P.Error)) and event.request_id in (request_id, None):
            return event
    raise AssertionError("no count in time")


def health(url: str) -> dict:
    return get_json(url.removesuffix("/v1") + "/health")


@pytest.mark.slow
def test_a_remote_specexec_serve_answers_like_its_own_api(keyed):
    """The check sees the built-in model and its planned context; an answer through RemoteEngine (streamed)
    is the server's own answer for that seed, as the official client gets it, with the server's usage; the
    server counts a message before it is sent (its /tokenize), as many tokens as the answer then reads, and
    one whose answer would pass the context does not fit."""
    check = check_endpoint(Endpoint(keyed, KEY, "gpu box"))
    assert [(m.id, m.context_length) for m in check.models] == [("builtin", 4096)]
    assert check.reply and check.refused == frozenset()
    official = openai.OpenAI(base_url=keyed, api_key=KEY, max_retries=0, timeout=120).chat.completions.create(
        model="builtin", messages=QUESTION, max_tokens=8, seed=77, temperature=0.9, top_p=0.95
    )
    engine = RemoteEngine(Endpoint(keyed, KEY, "gpu box"))
    try:
        engine.start()
        ready = engine.load("builtin", wait=True)
        assert ready.models["max_context"] == 4096 and ready.models["remote"] == "gpu box"
        assert ready.models["counts_prompts"] is True
        count = counted(engine, engine.count_tokens(QUESTION, max_new_tokens=8))
        too_long = counted(engine, engine.count_tokens(QUESTION, max_new_tokens=4096))
        request_id = engine.generate(QUESTION, max_new_tokens=8, seed=77, temperature=0.9, top_p=0.95)
        text, finished = answer(engine, request_id)
    finally:
        engine.shutdown()
    assert isinstance(finished, P.Finished), finished
    assert text == official.choices[0].message.content != ""
    assert finished.generated_tokens == official.usage.completion_tokens
    assert finished.prompt_tokens == official.usage.prompt_tokens > 5
    assert count == P.TokenCount(count.request_id, official.usage.prompt_tokens, 0, True)
    assert too_long == P.TokenCount(too_long.request_id, official.usage.prompt_tokens, 0, False)


@pytest.mark.slow
def test_stop_frees_the_remote_engine_at_once(keyed):
    """Stop mid-answer closes the stream; on the server's side the engine is free (no request answered or
    queued, none still cancelling) within a second plus two target passes, and the next request is served. A
    count asked mid-answer comes while the answer goes on, not behind it."""
    engine = RemoteEngine(Endpoint(keyed, KEY))
    try:
        engine.start()
        engine.load("builtin", wait=True)
        request_id = engine.generate(QUESTION, max_new_tokens=300, seed=1)
        stamps = []
        while len(stamps) < 3:
            event = engine.poll(60)
            if isinstance(event, P.TokenChunk) and event.text:
                stamps.append(time.monotonic())
        one_pass = (stamps[2] - stamps[0]) / 2
        asked = engine.count_tokens(QUESTION)
        event = engine.poll(60)
        while not (isinstance(event, P.TokenCount) and event.request_id == asked):
            assert event is not None and not isinstance(event, (P.Finished, P.Error)), event  # it waited
            event = engine.poll(60)
        assert health(keyed)["requests"] == 1
        engine.cancel(request_id)
        stopped = time.monotonic()
        _text, finished = answer(engine, request_id)
        assert isinstance(finished, P.Finished) and finished.reason == "cancelled"
        freed = wait_until(lambda: health(keyed)["requests"] == 0 and health(keyed)["cancelling"] == 0, timeout=30)
        print(f"server free {time.monotonic() - stopped:.2f} s after Stop (one target pass: {one_pass:.2f} s)")
        assert time.monotonic() - stopped < 1.0 + 2 * one_pass, freed
        after = engine.generate(QUESTION, max_new_tokens=2, seed=2)
        _text, done = answer(engine, after)
        assert isinstance(done, P.Finished) and done.generated_tokens == 2
    finally:
        engine.shutdown()


@pytest.mark.slow
def test_a_wrong_or_missing_key_is_refused_in_plain_words(keyed):
    with pytest.raises(RemoteAuthError, match="refused the API key.*Incorrect API key provided"):
        check_endpoint(Endpoint(keyed, "sk-wrong"))
    with pytest.raises(RemoteAuthError, match="needs an API key"):
        check_endpoint(Endpoint(keyed))


@pytest.mark.slow  # a `specexec serve` process and its engine
def test_a_server_without_a_key_needs_none(keyless):
    engine = RemoteEngine(Endpoint(keyless))
    try:
        engine.start()
        ready = engine.load("", wait=True)  # its one model, whatever it is called
        assert ready.models["target"].endswith("target") and ready.models["max_context"] > 0
        request_id = engine.generate([{"role": "user", "content": "w10 w11"}], max_new_tokens=6, temperature=0)
        text, finished = answer(engine, request_id)
        assert isinstance(finished, P.Finished) and finished.generated_tokens >= 1 and text
    finally:
        engine.shutdown()
