"""The engine process, its protocol and client: real spawned engines running tiny float64 Llamas on the CPU.

One engine is shared by most tests (a spawn costs seconds); the test that kills it runs last and restarts it.
The out-of-memory retry runs the Engine loop in-process (its fault seam injects the exception mid-pass).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import torch

from conftest import in_process_engine, make_tiny_llama, noisy_copy, sharpen, torch_threads
from core.engine import protocol as P
from core.engine.client import EngineClient

pytestmark = pytest.mark.timeout(120)

CONTEXT = 128  # the tiny models' context window (small, so trimming is cheap to reach)
TREE = dict(budget=16, max_depth=8, expand=8)
SAMPLING = dict(temperature=0.8, top_p=0.95)
READ_TIMEOUT = 60.0


# ----------------------------------------------------------------------------------------------------------
# Tiny models on disk (the engine process loads them by folder path)


def make_chat_tokenizer():
    """Word-level: id i <-> one word; role markers are ordinary words so every generated id decodes to text
    that re-tokenises to the same id (only </s>, the EOS, is special)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"</s>": 0, "<s>": 1, "<unk>": 2, "<|system|>": 3, "<|user|>": 4, "<|assistant|>": 5}
    vocab.update({f"w{i}": i for i in range(6, 64)})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>")
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    return tokenizer


def save_tiny_pair(root: Path) -> tuple[str, str]:
    """A sharpened tiny target and a noisy copy as its draft, each with the tokenizer, as model folders."""
    target = sharpen(make_tiny_llama(0), 8.0)
    draft = noisy_copy(target)
    folders = []
    for lm, name in ((target, "target"), (draft, "draft")):
        folder = root / name
        lm.model.config.max_position_embeddings = CONTEXT
        lm.model.save_pretrained(folder)
        make_chat_tokenizer().save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return save_tiny_pair(tmp_path_factory.mktemp("engine-models"))


@pytest.fixture(scope="module")
def local(model_dirs):
    """The same pair loaded in this process, for reference runs of stream_generate."""
    from core.loading.load import load_model

    with torch_threads(1):
        target = load_model(model_dirs[0], dtype="float64", device="cpu")
        draft = load_model(model_dirs[1], dtype="float64", device="cpu")
        yield target, draft


@pytest.fixture(scope="module")
def client(model_dirs):
    engine = EngineClient(torch_threads=1)
    try:
        engine.start(timeout=120)
        engine.load(model_dirs[0], model_dirs[1], dtype="float64", device="cpu", wait=True, timeout=120, **TREE)
        yield engine
    finally:
        engine.shutdown()


def collect(client: EngineClient, request_id: str) -> list[P.Event]:
    return list(client.iter_request(request_id, idle_timeout=READ_TIMEOUT))


def reference(local, messages, max_new_tokens, seed, method="specexec", **sampling):
    """In-process stream_generate for the same conversation: (prompt ids, chunks)."""
    from core.decoding.generation import stream_generate
    from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
    from core.text.prompts import Prompt, encode_prompt

    target, draft = local
    prompt = encode_prompt(target.tokenizer, Prompt(messages=tuple(messages)))
    params = SamplingParams(seed=seed, **{**SAMPLING, **sampling})
    settings = DecodingSettings(method=method, tree=TreeSettings(**TREE), max_new_tokens=max_new_tokens)
    return prompt, list(stream_generate(target.lm, draft.lm, target.tokenizer, prompt, params, settings))


def ids_of(chunks) -> list[int]:
    return [t for c in chunks for t in c.token_ids]


def long_answer_seed(local, messages, tokens: int, method="sequential") -> int:
    """A seed whose answer runs the full `tokens` without an EOS (so there is time to cancel or kill)."""
    for seed in range(50):
        _, chunks = reference(local, messages, tokens, seed, method=method)
        if len(ids_of(chunks)) == tokens:
            return seed
    raise AssertionError("no seed gives a long answer")


USER = [{"role": "user", "content": "w10 w11 w12 w13"}]


# ----------------------------------------------------------------------------------------------------------
# Protocol


def test_protocol_and_client_import_no_torch():
    code = (
        "import sys, core.engine.protocol, core.engine.client, core.engine; assert 'torch' not in sys.modules, 'torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_protocol_round_trip_and_validation():
    generate = P.Generate("r1", ({"role": "user", "content": "hi"},), stop=("x",))
    assert P.from_dict(P.to_dict(generate)) == generate
    assert P.decode_request(P.to_dict(P.Load(target="t", vram_budget_gb=8))) == P.Load(target="t", vram_budget_gb=8.0)
    bad = [
        "garbage",
        {"type": "Generate"},  # missing fields
        {"type": "Launch"},  # unknown type
        P.Generate("r1", ({"role": "user", "content": "hi"},), version=99),
        P.Generate("r1", ({"role": "user", "content": "hi"},), temperature="hot"),
        P.Generate("r1", ({"role": "user"},)),
        P.Generate("r1", ()),
        object.__new__(P.Cancel),  # fields missing altogether
        P.Finished("r1", "eos"),  # an event is not a request
    ]
    for message in bad:
        with pytest.raises(P.ProtocolError):
            P.decode_request(message)


# ----------------------------------------------------------------------------------------------------------
# Streaming, ordering, cancel, malformed input (shared engine)


@pytest.mark.slow
def test_stream_matches_in_process_generation(client, local):
    prompt, chunks = reference(local, USER, 40, seed=3)
    request_id = client.generate(USER, max_new_tokens=40, seed=3, method="specexec", **SAMPLING)
    events = collect(client, request_id)
    streamed = [e for e in events if isinstance(e, P.TokenChunk)]
    stats = [e for e in events if isinstance(e, P.PassStats)]
    finished = events[-1]
    assert [list(e.token_ids) for e in streamed] == [c.token_ids for c in chunks]  # same passes, same order
    assert "".join(e.text for e in streamed) == "".join(c.text for c in chunks)
    assert [s.tokens for s in stats] == [len(c.token_ids) for c in chunks]
    assert all(0 < s.tree_size <= TREE["budget"] and s.budget == TREE["budget"] for s in stats)
    assert isinstance(finished, P.Finished) and finished.reason == chunks[-1].finish_reason
    assert finished.prompt_tokens == len(prompt)
    assert finished.generated_tokens == len(ids_of(chunks)) - (finished.reason == "eos")  # the EOS is not counted


@pytest.mark.slow
def test_generates_are_queued_in_order_and_status_answers_while_generating(client, local):
    first = client.generate(USER, max_new_tokens=20, seed=1, method="specexec", **SAMPLING)
    second = client.generate(USER, max_new_tokens=20, seed=2, method="specexec", **SAMPLING)
    client.status()
    order, reports, queued = [], [], []
    while len([e for e in order if isinstance(e, P.Finished)]) < 2:
        event = client.poll(READ_TIMEOUT)
        assert event is not None and not isinstance(event, P.Error), event
        (reports if isinstance(event, P.StatusReport) else queued if isinstance(event, P.Queued) else order).append(
            event
        )
    ids = [e.request_id for e in order]
    assert ids == sorted(ids, key=lambda r: r != first)  # every event of the first before any of the second
    assert queued == [P.Queued(second, 1)]  # the second was told it waits behind one answer
    assert reports[0].state == "generating" and reports[0].queued == 1
    for request_id, seed in ((first, 1), (second, 2)):
        got = [t for e in order if isinstance(e, P.TokenChunk) and e.request_id == request_id for t in e.token_ids]
        assert got == ids_of(reference(local, USER, 20, seed)[1])


@pytest.mark.slow
def test_cancel_mid_answer_keeps_streamed_tokens(client, local):
    seed = long_answer_seed(local, USER, 100)
    request_id = client.generate(USER, max_new_tokens=100, seed=seed, method="sequential", **SAMPLING)
    streamed: list[int] = []
    for event in client.iter_request(request_id, idle_timeout=READ_TIMEOUT):
        if isinstance(event, P.TokenChunk):
            if not streamed:
                client.cancel(request_id)
            streamed.extend(event.token_ids)
    assert isinstance(event, P.Finished) and event.reason == "cancelled"
    assert 0 < event.generated_tokens == len(streamed) < 100
    assert streamed == ids_of(reference(local, USER, 100, seed, method="sequential")[1])[: len(streamed)]
    # a queued request can be cancelled before it starts
    running = client.generate(USER, max_new_tokens=30, seed=seed, method="sequential", **SAMPLING)
    queued = client.generate(USER, max_new_tokens=5, seed=0, method="specexec", **SAMPLING)
    client.cancel(queued)
    assert collect(client, running)[-1].reason == "length"
    assert collect(client, queued) == [P.Queued(queued, 1), P.Finished(queued, "cancelled")]


@pytest.mark.slow
def test_malformed_messages_get_errors_and_engine_lives_on(client):
    bad = [
        "garbage",
        {"type": "Generate", "request_id": "x"},
        P.Generate("x", tuple(USER), version=P.PROTOCOL_VERSION + 1),
        P.Generate("x", tuple(USER), max_new_tokens="many"),
        object.__new__(P.Generate),
        P.Finished("x", "eos"),
    ]
    for message in bad:
        client.send(message)
    errors = [client.poll(READ_TIMEOUT) for _ in bad]
    assert all(isinstance(e, P.Error) and e.kind == "protocol" and e.request_id is None for e in errors), errors
    assert "version" in errors[2].message and "max_new_tokens" in errors[3].message
    os.kill(client.engine_pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the engine too: it ignores it
    request_id = client.generate(USER, max_new_tokens=5, seed=0, method="specexec", **SAMPLING)
    assert isinstance(collect(client, request_id)[-1], P.Finished) and client.alive
    # settings the engine refuses end the request with an Error, and it still serves the next one
    request_id = client.generate(USER, max_new_tokens=5, top_p=1.5)
    assert [(e.kind, e.request_id) for e in collect(client, request_id)] == [("invalid_setting", request_id)]
    request_id = client.generate(USER, max_new_tokens=5, budget=10**9)  # terabytes of tree: said, not tried
    (refused,) = collect(client, request_id)
    assert refused.kind == "invalid_setting" and "at most 8,192 draft tokens" in refused.message


# ----------------------------------------------------------------------------------------------------------
# Chat sessions: KV reuse across turns, context trimming


@pytest.mark.slow
def test_turn_two_reuses_the_cache_and_equals_a_cold_run(client, local):
    tokenizer = local[0].tokenizer
    seed = long_answer_seed(local, USER, 12, method="specexec")
    first = client.generate(USER, max_new_tokens=12, seed=seed, method="specexec", **SAMPLING, reuse_cache=False)
    events = collect(client, first)
    answer_ids = [t for e in events if isinstance(e, P.TokenChunk) for t in e.token_ids]
    answer = "".join(e.text for e in events if isinstance(e, P.TokenChunk))
    turn1 = events[-1]
    assert turn1.reused_prefix_tokens == 0 and turn1.generated_tokens == len(answer_ids) == 12

    conversation = USER + [{"role": "assistant", "content": answer}, {"role": "user", "content": "w20 w21 w22"}]
    from core.text.prompts import Prompt, encode_prompt

    prompt2 = encode_prompt(tokenizer, Prompt(messages=tuple(conversation)))
    cached = turn1.prompt_tokens + len(answer_ids)
    assert prompt2[:cached] == encode_prompt(tokenizer, Prompt(messages=tuple(USER))) + answer_ids

    warm = collect(client, client.generate(conversation, max_new_tokens=16, seed=6, method="specexec", **SAMPLING))
    finished = warm[-1]
    # the target cached turn 1's prompt + answer except the last token (the next pass's root): only the
    # new tokens were prefilled; the draft reused at least turn 1's prompt
    assert finished.prompt_tokens == len(prompt2)
    assert finished.reused_prefix_tokens == cached - 1
    assert turn1.prompt_tokens <= finished.draft_reused_prefix_tokens <= cached

    cold = collect(
        client,
        client.generate(conversation, max_new_tokens=16, seed=6, method="specexec", **SAMPLING, reuse_cache=False),
    )
    assert cold[-1].reused_prefix_tokens == 0 and cold[-1].draft_reused_prefix_tokens == 0
    warm_ids = [t for e in warm if isinstance(e, P.TokenChunk) for t in e.token_ids]
    assert warm_ids == [t for e in cold if isinstance(e, P.TokenChunk) for t in e.token_ids]
    assert warm_ids == ids_of(reference(local, conversation, 16, seed=6)[1])


@pytest.mark.slow
def test_long_conversation_drops_oldest_turns_keeping_the_system_prompt(client, local):
    from core.engine.session import fit_conversation

    system = [{"role": "system", "content": "w7 w8 w9"}]
    turns = []
    for i in range(8):
        turns.append({"role": "user", "content": " ".join(f"w{6 + (i * 5 + k) % 58}" for k in range(9))})
        turns.append({"role": "assistant", "content": " ".join(f"w{6 + (i * 7 + k) % 58}" for k in range(9))})
    messages = system + turns + [{"role": "user", "content": "w30 w31 w32"}]
    events = collect(client, client.generate(messages, max_new_tokens=24, seed=2, method="specexec", **SAMPLING))
    trimmed = [e for e in events if isinstance(e, P.ContextTrimmed)]
    finished = events[-1]
    assert len(trimmed) == 1 and trimmed[0].dropped_messages % 2 == 0 and trimmed[0].dropped_messages > 0
    assert finished.prompt_tokens + 24 <= CONTEXT
    kept = system + turns[trimmed[0].dropped_messages :] + messages[-1:]
    # the fewest turns were dropped: one more turn would not have fitted
    longer = system + turns[trimmed[0].dropped_messages - 2 :] + messages[-1:]
    assert fit_conversation(local[0].tokenizer, longer, CONTEXT, 24).dropped_messages == 2
    prompt, chunks = reference(local, kept, 24, seed=2)
    assert finished.prompt_tokens == len(prompt)
    assert [t for e in events if isinstance(e, P.TokenChunk) for t in e.token_ids] == ids_of(chunks)
    # a message that cannot fit even alone is an error for that request only
    huge = [{"role": "user", "content": " ".join(["w9"] * 200)}]
    request_id = client.generate(huge, max_new_tokens=4, method="specexec")
    [error] = collect(client, request_id)
    assert error.kind == "context_length"
    # with its length, so that the app can offer a context that holds it ("Make room")
    from core.text.prompts import Prompt, encode_prompt

    assert error.prompt_tokens == len(encode_prompt(local[0].tokenizer, Prompt(messages=tuple(huge)))) > CONTEXT


def test_a_count_is_the_prompt_an_answer_to_the_same_messages_reads(client, local):
    """CountTokens (the app's figure for a message being typed) says what a Generate would be given: the same
    prompt length, the same oldest messages left out, and `fits` False where the Generate fails for length."""
    from core.text.prompts import Prompt, encode_prompt

    def count(messages, **settings) -> P.TokenCount:
        request_id = client.count_tokens(messages, **settings)
        (answer,) = collect(client, request_id)
        assert isinstance(answer, P.TokenCount) and answer.request_id == request_id, answer
        return answer

    prompt = encode_prompt(local[0].tokenizer, Prompt(messages=tuple(USER)))
    assert (count(USER).prompt_tokens, count(USER).dropped_messages, count(USER).fits) == (len(prompt), 0, True)
    system = [{"role": "system", "content": "w7 w8 w9"}]
    turns = [
        {"role": role, "content": " ".join(f"w{6 + (i * 5 + k) % 58}" for k in range(9))}
        for i in range(8)
        for role in ("user", "assistant")
    ]
    long = system + turns + [{"role": "user", "content": "w30 w31 w32"}]
    counted = count(long, max_new_tokens=24)
    events = collect(client, client.generate(long, max_new_tokens=24, seed=2, method="specexec", **SAMPLING))
    [trimmed] = [e for e in events if isinstance(e, P.ContextTrimmed)]
    assert counted.fits and counted.dropped_messages == trimmed.dropped_messages > 0
    assert counted.prompt_tokens == events[-1].prompt_tokens
    assert count(long, max_new_tokens=4).dropped_messages < counted.dropped_messages  # less room kept: fewer left out
    whole = count(long, max_new_tokens=24, trim_context=False)  # the API's /tokenize: nothing left out, and
    assert (whole.prompt_tokens, whole.dropped_messages, whole.fits) == (  # longer than the context: counted
        len(encode_prompt(local[0].tokenizer, Prompt(messages=tuple(long)))),
        0,
        False,
    )
    text = count([], prompt="w10 w11 w12")  # a plain prompt: no chat template
    assert text.prompt_tokens == len(encode_prompt(local[0].tokenizer, Prompt(text="w10 w11 w12")))
    huge = [{"role": "user", "content": " ".join(["w9"] * 200)}]
    (error,) = collect(client, client.generate(huge, max_new_tokens=4))
    too_long = count(huge, max_new_tokens=4)
    assert error.kind == "context_length" and (too_long.prompt_tokens, too_long.fits) == (error.prompt_tokens, False)
    # answered at once while an answer is written: between its passes, not after it
    seed = long_answer_seed(local, USER, 60)
    running = client.generate(USER, max_new_tokens=60, seed=seed, method="sequential", **SAMPLING)
    asked = client.count_tokens(USER)
    arrived: list[P.Event] = []
    while not (arrived and isinstance(arrived[-1], P.Finished)):
        event = client.poll(READ_TIMEOUT)
        assert event is not None and getattr(event, "request_id", None) in (running, asked), event
        arrived.append(event)
    kinds = [type(e).__name__ for e in arrived]
    assert kinds.count("TokenCount") == 1 and arrived[-1].generated_tokens == 60
    assert "TokenChunk" in kinds[kinds.index("TokenCount") :]  # more of the answer came after the count
    # a template variable it cannot take, or no message at all: said, and the engine goes on
    (refused,) = collect(client, client.count_tokens(USER, chat_template_kwargs={"tools": 3}))
    assert isinstance(refused, P.Error) and refused.kind == "invalid_setting"
    with pytest.raises(P.ProtocolError, match="CountTokens.messages is empty"):
        client.count_tokens([])
    with pytest.raises(P.ProtocolError, match="both messages and a prompt"):
        client.count_tokens(USER, prompt="w10")
    assert count(USER).fits


def test_a_message_too_long_even_alone_is_found_in_one_render_not_one_per_turn(monkeypatch):
    """A huge document after a long chat: the shortest conversation is tried first, so a count (asked each
    time the typing pauses) or an answer learns it is too long at once; what it says is as before."""
    import core.engine.session as session
    from core.errors import ContextLengthError
    from core.text.prompts import Prompt, encode_prompt

    tokenizer = make_chat_tokenizer()
    system = [{"role": "system", "content": "w7 w8"}]
    turns = [{"role": role, "content": "w10 w11 w12"} for _ in range(40) for role in ("user", "assistant")]
    huge = {"role": "user", "content": " ".join(["w9"] * 200)}
    renders = []
    monkeypatch.setattr(
        session, "encode_prompt", lambda tok, prompt: renders.append(prompt) or encode_prompt(tok, prompt)
    )
    with pytest.raises(ContextLengthError, match="after leaving out the older turns, the prompt is") as raised:
        session.fit_conversation(tokenizer, system + turns + [huge], CONTEXT, 24)
    assert raised.value.prompt_tokens == len(encode_prompt(tokenizer, Prompt(messages=(*system, huge))))
    assert len(renders) <= 4  # the whole chat, the shortest, and the error's two parts (one per turn before: 42)
    renders.clear()
    kept = session.fit_conversation(tokenizer, system + turns + [USER[0]], CONTEXT, 24)  # one that fits: as before
    assert kept.dropped_messages > 0 and len(kept.prompt_ids) + 24 <= CONTEXT and len(renders) > 2


def test_a_count_before_any_model_is_loaded_is_said():
    _, serve = in_process_engine()
    [error] = serve(P.CountTokens("c1", tuple(USER)))
    assert (error.request_id, error.kind) == ("c1", "not_loaded")


# ----------------------------------------------------------------------------------------------------------
# Out of memory (in-process engine loop, exception injected mid-pass through the fault seam)


def test_out_of_memory_halves_the_budget_and_retries(model_dirs, local):
    calls = []

    def fault():
        calls.append(1)
        if len(calls) in (3, 4):  # the 3rd and 4th target forwards: mid-answer, twice in a row
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")

    engine, serve = in_process_engine(fault_hook=fault)

    assert [e.kind for e in serve(P.Generate("early", tuple(USER)))] == ["not_loaded"]
    failed = serve(P.Load(target=str(Path(model_dirs[0]).parent / "missing"), draft=None))
    assert [type(e).__name__ for e in failed] == ["StatusReport", "Error"]  # said before any model loads
    assert failed[-1].kind == "model_not_found" and engine.status_report().state == "idle"
    serve(P.Load(target=model_dirs[0], draft=model_dirs[1], dtype="float64", device="cpu", **TREE))
    got = serve(P.Generate("oom", tuple(USER), max_new_tokens=40, seed=3, method="specexec", **SAMPLING))
    cuts = [(e.old_budget, e.new_budget) for e in got if isinstance(e, P.BudgetReduced)]
    assert cuts == [(16, 8), (8, 4)]
    ids = [t for e in got if isinstance(e, P.TokenChunk) for t in e.token_ids]
    text = "".join(e.text for e in got if isinstance(e, P.TokenChunk))
    _, chunks = reference(local, USER, 40, seed=3)
    assert ids == ids_of(chunks) and text == "".join(c.text for c in chunks)  # same answer as without OOM
    assert isinstance(got[-1], P.Finished) and got[-1].generated_tokens == len(ids) - (got[-1].reason == "eos")
    budgets = [e.budget for e in got if isinstance(e, P.PassStats)]
    assert budgets[:2] == [16, 16] and set(budgets[2:]) == {4}
    # the reduced budget stays the cap for later requests
    later = serve(P.Generate("after", tuple(USER), max_new_tokens=8, seed=4, method="specexec", **SAMPLING))
    assert {e.budget for e in later if isinstance(e, P.PassStats)} == {4}


def test_a_load_with_settings_the_engine_cannot_use_is_refused_before_any_model_loads():
    """A Load's tree and VRAM settings are checked before the models load: a bad depth or width used to be
    found only at the first answer, after minutes of loading a 70B, and an infinite VRAM budget not at all."""
    _, serve = in_process_engine()
    for bad, words in (
        (dict(max_depth=0), "max depth must be at least 1"),
        (dict(expand=-3), "expand (nodes per draft forward) must be at least 1"),
        (dict(vram_budget_gb=float("inf")), "VRAM budget must be a positive number of GB"),
        (dict(vram_budget_gb=float("nan")), "VRAM budget must be a positive number of GB"),
    ):
        got = serve(P.Load(target="/no/such/model", **bad))  # a load that ran would fail naming this folder
        errors = [e for e in got if isinstance(e, P.Error)]
        assert [(e.kind, words in e.message) for e in errors] == [("invalid_setting", True)], got
        assert not any(isinstance(e, P.LoadProgress) for e in got)


def test_scores_that_overflow_end_the_request_with_a_numerical_error_and_fresh_caches(model_dirs):
    """The model's NaN scores are an Error of their own kind with a hint, not an answer; the live conversation's
    caches, which the failed pass wrote, are dropped (a bad input's keep them); the engine serves on."""
    engine, serve = in_process_engine()
    serve(P.Load(target=model_dirs[0], draft=model_dirs[1], dtype="float64", device="cpu", **TREE))
    request = dict(max_new_tokens=6, seed=1, method="specexec", **SAMPLING)
    assert isinstance(serve(P.Generate("fine", tuple(USER), **request))[-1], P.Finished)
    assert engine.session.conversations.live is not None
    head = engine.session.target.model.lm_head.weight
    kept = head[5, 0].item()
    with torch.no_grad():
        head[5, 0] = float("nan")
    (error,) = [e for e in serve(P.Generate("nan", tuple(USER), **request)) if isinstance(e, P.Error)]
    assert (error.kind, error.request_id) == ("numerical", "nan") and "NaN or infinity" in error.message
    assert error.hint == "download the model again, or pick another"
    assert engine.session.conversations.live is None
    with torch.no_grad():
        head[5, 0] = kept
    assert isinstance(serve(P.Generate("again", tuple(USER), **request))[-1], P.Finished)


def test_a_full_drive_met_mid_answer_is_said_as_such_not_as_a_bug(model_dirs):
    """A write no check foresaw meets a full drive (injected mid-pass): the Error is `disk_write` with words
    about the drive, not `internal` with "this is a bug", and the engine serves on."""
    import errno

    def fault() -> None:
        if fail:
            raise OSError(errno.ENOSPC, "No space left on device")

    fail = False
    _, serve = in_process_engine(fault_hook=fault)
    serve(P.Load(target=model_dirs[0], draft=model_dirs[1], dtype="float64", device="cpu", **TREE))
    request = dict(max_new_tokens=6, seed=1, method="specexec", **SAMPLING)
    fail = True
    (error,) = [e for e in serve(P.Generate("full", tuple(USER), **request)) if isinstance(e, P.Error)]
    assert error.kind == "disk_write" and error.message.startswith("the drive is full")
    assert error.hint == "free some space on the drive, then try again"
    fail = False
    assert isinstance(serve(P.Generate("again", tuple(USER), **request))[-1], P.Finished)


def test_offloaded_target_load_progress_moves_with_the_bytes_read(model_dirs):
    """Loading a target through the offloaded path reports byte-level progress: many LoadProgress events whose
    bytes and fraction only grow, weighted by file size across draft and target, ending at 1.0."""
    _, serve = in_process_engine()
    got = serve(P.Load(target=model_dirs[0], draft=model_dirs[1], dtype="float64", device="cpu", offload="on", **TREE))
    assert isinstance(got[-1], P.StatusReport) and got[-1].state == "ready", got[-1]
    progress = [e for e in got if isinstance(e, P.LoadProgress)]
    sizes = [sum(p.stat().st_size for p in Path(d).glob("*.safetensors")) for d in model_dirs]
    assert {e.bytes_total for e in progress} == {sum(sizes)}
    assert [e.fraction for e in progress] == sorted(e.fraction for e in progress)
    assert [e.bytes_done for e in progress] == sorted(e.bytes_done for e in progress)
    target_steps = [e for e in progress if sizes[1] < e.bytes_done < sum(sizes)]
    assert len(target_steps) >= 5  # the target's weights are reported as they are read, not once at the end
    assert progress[-1].fraction == 1.0 and any("layers in host RAM" in e.stage for e in progress)


# ----------------------------------------------------------------------------------------------------------
# Process lifetime: the parent dies; the engine is killed (runs last: it restarts the shared engine)


def wait_gone(process: psutil.Process, timeout: float) -> float:
    """Wait until `process` has exited (a zombie nobody reaped counts as exited); return when it was seen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return time.monotonic()
        except psutil.NoSuchProcess:
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"process {process.pid} still runs after {timeout} s")


@pytest.mark.slow
def test_the_engine_says_when_it_starts_reading_the_prompt(client, local):
    """A long paste takes a while to prefill: PromptStarted comes before the first chunk (issue 13, #6)."""
    messages = [{"role": "user", "content": "w20 w21 w22"}]
    prompt, _ = reference(local, messages, 4, seed=1)
    request_id = client.generate(messages, max_new_tokens=4, seed=1, **SAMPLING)
    events = [e for e in collect(client, request_id) if getattr(e, "request_id", None) == request_id]
    started = events[0]
    assert isinstance(started, P.PromptStarted) and started.prompt_tokens == len(prompt)
    assert 0 <= started.reused_tokens < len(prompt)
    first_chunk = next(i for i, e in enumerate(events) if isinstance(e, P.TokenChunk))
    assert all(isinstance(e, P.AutoChoice) for e in events[1:first_chunk])  # only the tuner's choice between


def test_the_window_is_the_planned_context(local):
    """Load.context_length plans both models' context (load_model's context_length: the app's "Context
    length" setting); the session trims or refuses conversations at the smaller of the two."""
    import dataclasses

    from core.engine.session import ChatSession
    from core.errors import ContextLengthError

    target, draft = local
    session = ChatSession(dataclasses.replace(target.lm, max_context=64), draft.lm, target.tokenizer)
    assert session.context_limit == 64 < draft.lm.max_context
    with pytest.raises(ContextLengthError) as refused:
        session.prepare([{"role": "user", "content": " ".join(["w9"] * 80)}], 4)
    assert 80 < refused.value.prompt_tokens < CONTEXT  # the prompt's length: a longer load would hold it ...
    assert session.model_context == CONTEXT  # ... up to the models' own limit, which the engine reports
    config = target.lm.config  # the two models' KV rows per token of context: keys and values, float64
    per_model = (
        2
        * config.num_hidden_layers
        * config.num_key_value_heads
        * (config.hidden_size // config.num_attention_heads)
        * 8
    )
    assert session.context_bytes_per_token == 2 * per_model
    assert P.validate(P.Load(context_length=64)).context_length == 64


@pytest.mark.slow
def test_engine_exits_when_its_parent_is_killed(tmp_path):
    pid_file = tmp_path / "engine.pid"
    helper = textwrap.dedent(f"""
        import time
        from core.engine.client import EngineClient
        client = EngineClient(torch_threads=1)
        client.start(timeout=120)
        open({str(pid_file)!r}, "w").write(str(client.engine_pid))
        time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", helper])
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() or not pid_file.read_text():
            assert process.poll() is None and time.monotonic() < deadline, "the helper did not start an engine"
            time.sleep(0.1)
        engine = psutil.Process(int(pid_file.read_text()))
        assert engine.ppid() == process.pid
        process.kill()
        process.wait(10)
        killed = time.monotonic()
        assert wait_gone(engine, 10) - killed < 5
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_killed_engine_is_reported_within_a_second_and_restart_works(client, local):
    seed = long_answer_seed(local, USER, 100)
    old_pid = client.engine_pid
    # processes this worker ran before (a session-scoped engine of an app test file that ran here first)
    before = {p.pid for p in psutil.Process().children(recursive=True)} - {old_pid}
    request_id = client.generate(USER, max_new_tokens=100, seed=seed, method="sequential", **SAMPLING)
    streamed = []
    for event in client.iter_request(request_id, idle_timeout=READ_TIMEOUT):
        if isinstance(event, P.TokenChunk):
            if not streamed:
                os.kill(old_pid, signal.SIGKILL)
                killed = time.monotonic()
            streamed.append(event)
    assert isinstance(event, P.Error) and event.kind == "engine_died" and event.hint
    assert time.monotonic() - killed < 1.5
    assert "SIGKILL" in event.message and request_id not in client.in_flight
    assert client.poll(0.3) is None  # reported once

    client.restart(reload=True, wait=True)
    assert client.engine_pid != old_pid and not psutil.pid_exists(old_pid)
    request_id = client.generate(USER, max_new_tokens=10, seed=3, method="specexec", **SAMPLING)
    assert [t for e in collect(client, request_id) if isinstance(e, P.TokenChunk) for t in e.token_ids] == ids_of(
        reference(local, USER, 10, seed=3)[1]
    )
    new_pid = client.engine_pid
    client.shutdown()
    assert not psutil.pid_exists(new_pid)
    leftovers = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before
        and "resource_tracker" not in " ".join(p.cmdline())
        and p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
    ]
    assert leftovers == []


def test_an_engine_without_standard_streams_ends_with_code_0():
    """The Windows app has no console, so Python gives it and the engine it starts None for sys.stdout and
    sys.stderr: the engine's quick exit flushed them and ended in an AttributeError (exit code 1, after the
    Python teardown it is there to skip)."""
    code = textwrap.dedent(
        """
        import multiprocessing, sys
        from core.engine.process import _end_process
        events = multiprocessing.get_context("spawn").Queue()
        events.put("last event")
        sys.stdout = sys.stderr = None
        _end_process(events)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    # (stderr may hold the resource tracker's note on the queue's semaphores: this queue is not the parent's)
    assert result.returncode == 0 and "Error" not in result.stderr, result.stderr


@pytest.mark.slow  # an engine in a child process
def test_an_engine_started_in_the_background_is_waited_for_then_ends_with_code_0():
    """start(wait=False) lets the caller do other slow work (`specexec chat` starts its MCP servers) while the
    engine imports torch; wait_started then blocks until it says it runs. A Shutdown ends it with code 0 (it
    skips Python's teardown, not its own exit), and one stopped before it said it runs is ended too."""
    client = EngineClient(torch_threads=1)
    client.start(wait=False)
    assert client.engine_pid is None
    client.wait_started(timeout=120)
    process = client.process
    assert client.engine_pid == process.pid
    client.send(P.Shutdown())
    process.join(30)
    assert process.exitcode == 0
    client.shutdown()

    client.start(wait=False)
    starting = psutil.Process(client.process.pid)
    client.shutdown()  # terminated at once: an engine still starting has nothing to save
    assert client.engine_pid is None and wait_gone(starting, 10) is not None
