"""The engine's conversation cache (issue 24): a follow-up request reads only its new tokens, counted as the
tokens the target model actually runs through its embedding layer; the app's chat survives API requests in
between; API conversations are evicted first; saved conversations live in host RAM, never in a second
device cache. An in-process engine (no child process) on a tiny float64 pair saved as model folders."""

from __future__ import annotations

import pytest

from app_fixtures import save_tiny_pair
from conftest import in_process_engine, torch_threads
from core.engine import protocol as P
from core.engine.conversation_cache import MAX_SAVED

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def engine_and_serve(tmp_path_factory):
    target, draft = save_tiny_pair(tmp_path_factory.mktemp("cache-models"))
    with torch_threads(1):
        engine, serve = in_process_engine()
        ready = serve(
            P.Load(target=target, draft=draft, dtype="float64", device="cpu", budget=8, max_depth=4, expand=4)
        )
        assert ready[-1].state == "ready", ready
        yield engine, serve


class TargetTokens:
    """Counts the tokens the target's embedding layer reads (every forward: prefill chunks and passes)."""

    def __init__(self, engine) -> None:
        self.count = 0
        embed = engine.session.target.model.model.embed_tokens
        self.handle = embed.register_forward_pre_hook(lambda _m, args: self._add(args[0].numel()))

    def _add(self, n: int) -> None:
        self.count += n

    def close(self) -> None:
        self.handle.remove()


def words(start: int, count: int) -> str:
    return " ".join(f"w{6 + (start + i) % 58}" for i in range(count))


def ask(serve, request_id: str, messages: list[dict], owner: str, max_new_tokens: int = 1, **settings):
    """(answer text, Finished) of one sequential request: with one new token the target reads exactly the
    prompt tokens that were not cached."""
    settings = {"method": "sequential", **settings}
    events = serve(
        P.Generate(
            request_id,
            tuple(messages),
            max_new_tokens=max_new_tokens,
            seed=7,
            temperature=0.9,
            cache_owner=owner,
            **settings,
        )
    )
    assert isinstance(events[-1], P.Finished), events[-1]
    return "".join(e.text for e in events if isinstance(e, P.TokenChunk)), events[-1]


def follow_up(messages: list[dict], answer: str, start: int) -> list[dict]:
    return messages + [{"role": "assistant", "content": answer}, {"role": "user", "content": words(start, 5)}]


def test_a_follow_up_reads_only_its_new_tokens_and_reports_them(engine_and_serve):
    engine, serve = engine_and_serve
    first = [{"role": "user", "content": words(0, 300)}]
    answer, done = ask(serve, "t1", first, "api", max_new_tokens=6)
    counter = TargetTokens(engine)
    try:
        _, again = ask(serve, "t2", follow_up(first, answer, 40), "api")
    finally:
        counter.close()
    assert again.reused_prefix_tokens == done.prompt_tokens + 6 - 1  # the whole first turn, its answer too
    new_tokens = again.prompt_tokens - again.reused_prefix_tokens
    assert counter.count == new_tokens and new_tokens < 20  # the model read the new message, not 300 tokens


def test_the_app_chat_survives_api_requests_in_between(engine_and_serve):
    engine, serve = engine_and_serve
    chat = [{"role": "user", "content": words(1, 250)}]
    chat_answer, chat_done = ask(serve, "c1", chat, "chat", max_new_tokens=4)
    api = [{"role": "user", "content": words(2, 250)}]  # another conversation: shares only the first marker
    api_answer, api_done = ask(serve, "a1", api, "api", max_new_tokens=4)
    assert api_done.reused_prefix_tokens <= 1
    counter = TargetTokens(engine)
    try:
        _, chat_again = ask(serve, "c2", follow_up(chat, chat_answer, 9), "chat")
        chat_read = counter.count
        _, api_again = ask(serve, "a2", follow_up(api, api_answer, 11), "api")  # and the API's came back too
    finally:
        counter.close()
    assert chat_again.reused_prefix_tokens == chat_done.prompt_tokens + 4 - 1
    assert chat_read == chat_again.prompt_tokens - chat_again.reused_prefix_tokens
    assert api_again.reused_prefix_tokens == api_done.prompt_tokens + 4 - 1
    assert counter.count - chat_read == api_again.prompt_tokens - api_again.reused_prefix_tokens


def test_api_conversations_are_evicted_before_the_chat(engine_and_serve):
    engine, serve = engine_and_serve
    chat = [{"role": "user", "content": words(3, 200)}]
    chat_answer, chat_done = ask(serve, "e-chat", chat, "chat", max_new_tokens=3)
    for index in range(MAX_SAVED + 2):  # more API conversations than the store keeps
        ask(serve, f"e-api{index}", [{"role": "user", "content": words(20 + index, 200)}], "api")
    cache = engine.session.conversations
    assert len(cache.saved) == MAX_SAVED and any(s.owner == "chat" for s in cache.saved)
    _, again = ask(serve, "e-chat2", follow_up(chat, chat_answer, 5), "chat")
    assert again.reused_prefix_tokens == chat_done.prompt_tokens + 3 - 1


def test_saved_conversations_are_host_copies_and_the_device_cache_is_the_planned_one(engine_and_serve):
    engine, serve = engine_and_serve
    ask(serve, "h1", [{"role": "user", "content": words(4, 200)}], "api")
    cache = engine.session.conversations
    live = cache.live.target_cache
    ask(serve, "h2", [{"role": "user", "content": words(5, 200)}], "api")
    assert cache.live.target_cache is live  # switching conversations allocates no second cache
    buffer = live.layers[0].keys.untyped_storage().data_ptr()
    for saved in cache.saved:
        keys, values = saved.target_rows[0]
        assert keys.device.type == "cpu" and keys.untyped_storage().data_ptr() != buffer
        assert keys.shape[-2] == saved.target_length == len(saved.tokens) - 1


def test_a_cold_request_reads_no_rows_but_keeps_the_conversations_and_the_same_tokens(engine_and_serve):
    engine, serve = engine_and_serve
    chat = [{"role": "user", "content": words(6, 200)}]
    chat_answer, chat_done = ask(serve, "k1", chat, "chat", max_new_tokens=4)
    turn2 = follow_up(chat, chat_answer, 7)
    cold_text, cold = ask(serve, "k2", turn2, "api", max_new_tokens=8, reuse_cache=False)
    assert cold.reused_prefix_tokens == 0
    warm_text, warm = ask(serve, "k3", turn2, "chat", max_new_tokens=8)
    assert warm.reused_prefix_tokens >= chat_done.prompt_tokens + 4 - 1
    assert warm_text == cold_text  # float64: the cached prefix gives the same tokens as a cold run


def test_the_draft_rows_come_back_with_the_conversation(engine_and_serve):
    """SpecExec uses the draft's cache too: after another conversation ran, both models' rows are restored."""
    engine, serve = engine_and_serve
    chat = [{"role": "user", "content": words(8, 200)}]
    answer, done = ask(serve, "d1", chat, "chat", max_new_tokens=6, method="specexec")
    ask(serve, "d2", [{"role": "user", "content": words(9, 200)}], "api", method="specexec")
    text, again = ask(serve, "d3", follow_up(chat, answer, 3), "chat", max_new_tokens=6, method="specexec")
    assert again.reused_prefix_tokens == done.prompt_tokens + 6 - 1
    assert again.draft_reused_prefix_tokens >= done.prompt_tokens
    cold_text, _ = ask(
        serve, "d4", follow_up(chat, answer, 3), "api", max_new_tokens=6, method="specexec", reuse_cache=False
    )
    assert text == cold_text


def test_going_back_to_a_saved_conversation_when_the_store_is_full(engine_and_serve):
    """With room for one saved conversation: returning to the saved one saves the live one in its place."""
    engine, serve = engine_and_serve
    cache = engine.session.conversations
    cache.max_saved = 1
    cache.saved.clear()  # the earlier tests' chat conversations would keep the one place (chats go last)
    try:
        first = [{"role": "user", "content": words(30, 150)}]
        first_answer, first_done = ask(serve, "f1", first, "api", max_new_tokens=3)
        other = [{"role": "user", "content": words(31, 150)}]
        other_answer, other_done = ask(serve, "f2", other, "api", max_new_tokens=3)
        _, back = ask(serve, "f3", follow_up(first, first_answer, 2), "api")
        assert back.reused_prefix_tokens == first_done.prompt_tokens + 3 - 1
        assert len(cache.saved) == 1
        _, again = ask(serve, "f4", follow_up(other, other_answer, 4), "api")
        assert again.reused_prefix_tokens == other_done.prompt_tokens + 3 - 1
    finally:
        cache.max_saved = MAX_SAVED
