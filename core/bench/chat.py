"""`specexec bench chat`: what the engine process and the chat KV-cache reuse cost and save.

1. Time to first token of turn 2 of a conversation with a long first turn: warm (the engine reuses the KV
   cache of turn 1's prompt + answer and prefills only the new tokens) against the same turn cold
   (reuse_cache=False: everything is prefilled). Measured from Generate sent to the first TokenChunk received,
   through the engine process, median over --repeats.
2. Streaming: the interval between chunks (one chunk per target pass) received through the engine's queue
   against the interval between chunks of stream_generate in this process, for the same greedy answer; and
   the queue transit time of a chunk (engine's send time to our receive time, on the shared monotonic
   clock).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from core.cli.pair import load_pair
from core.cli.options import add_engine_benchmark_arguments, engine_load_settings
from core.engine import protocol as P
from core.engine.client import EngineClient
from core.errors import EngineError, InvalidSettingError
from core.system.threads import apply_torch_threads

FILLER = (
    "The history of the printing press begins with movable type in East Asia and continues with Gutenberg's "
    "workshop in Mainz, where metal type, oil-based ink and a screw press were combined into a system that "
    "could produce books at a scale no scribe could match. "
)
FOLLOW_UP = "Now summarise that in one sentence."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_benchmark_arguments(parser)
    parser.add_argument("--first-turn-tokens", type=int, default=512, help="length of the long first user message")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="answer length (turn 1 and the streaming run)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="times each measurement is repeated (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _long_message(tokenizer, tokens: int) -> str:
    text = FILLER
    while len(tokenizer(text, add_special_tokens=False)["input_ids"]) < tokens:
        text += FILLER
    return text + "What was new about it?"


def _events(client: EngineClient, request_id: str) -> list[tuple[float, P.Event]]:
    """(receive time, event) for one request, ending with Finished; EngineError on an Error."""
    out = []
    for event in client.iter_request(request_id, idle_timeout=600):
        out.append((time.monotonic(), event))
        if isinstance(event, P.Error):
            raise EngineError(f"{event.kind}: {event.message}")
    return out


def _first_token(client: EngineClient, messages, settings: dict, reuse: bool) -> tuple[float, P.Finished]:
    """Seconds to the first TokenChunk of an answer (the rest is cancelled), and its Finished."""
    started = time.monotonic()
    request_id = client.generate(messages, reuse_cache=reuse, **settings)
    first = None
    for received, event in _events(client, request_id):
        if isinstance(event, P.TokenChunk) and first is None:
            first = received - started
            client.cancel(request_id)
        if isinstance(event, P.Finished):
            return first, event
    raise EngineError("the answer ended without a Finished event")


def _answer(client: EngineClient, messages, settings: dict, reuse: bool = True):
    events = _events(client, client.generate(messages, reuse_cache=reuse, **settings))
    chunks = [(t, e) for t, e in events if isinstance(e, P.TokenChunk)]
    return "".join(e.text for _, e in chunks), chunks, events[-1][1]


def _intervals(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times[1:], times[2:])]  # skip the first chunk (it includes the prefill)


def run(args: argparse.Namespace) -> int:
    from core.decoding.generation import stream_generate
    from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
    from core.text.prompts import Prompt, encode_prompt

    args.threads = apply_torch_threads(args.threads)  # the same count for the engine process below
    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr, flush=True))
    target, draft = load_pair(args, need_draft=args.method != "sequential")
    tokenizer = target.tokenizer
    turn1 = [{"role": "user", "content": _long_message(tokenizer, args.first_turn_tokens)}]
    settings = dict(
        temperature=0.0,
        method=args.method,
        max_new_tokens=args.max_new_tokens,
    )
    empty_answer = [{"role": "assistant", "content": ""}, {"role": "user", "content": FOLLOW_UP}]
    estimate = len(encode_prompt(tokenizer, Prompt(messages=tuple(turn1 + empty_answer))))
    room = min(m.lm.max_context for m in (target, draft) if m is not None)
    if estimate + 2 * args.max_new_tokens > room:
        raise InvalidSettingError(
            f"the benchmark conversation ({estimate} tokens + 2 answers of {args.max_new_tokens}) does not fit "
            f"the context window of {room} tokens; lower --first-turn-tokens or --max-new-tokens"
        )
    say("Starting the engine process")
    client = EngineClient(torch_threads=args.threads)
    try:
        client.start()
        client.load(
            args.target,
            args.draft if args.method != "sequential" else None,
            budget=args.budget,
            max_depth=args.max_depth,
            expand=args.expand,
            wait=True,
            **engine_load_settings(args),
        )
        answer, _, _ = _answer(client, turn1, settings)
        turn2 = turn1 + [{"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW_UP}]
        warm, cold = [], []
        for repeat in range(args.repeats):
            say(f"Time to first token, repeat {repeat + 1}/{args.repeats}")
            _answer(client, turn1, settings)  # leaves the engine holding turn 1's prompt + answer
            warm.append(_first_token(client, turn2, settings, reuse=True))
            cold.append(_first_token(client, turn2, settings, reuse=False))

        say("Streaming through the engine and in-process")
        _, engine_chunks, _ = _answer(client, turn2, settings, reuse=False)
    finally:
        client.shutdown()

    prompt2 = encode_prompt(tokenizer, Prompt(messages=tuple(turn2)))
    decoding = DecodingSettings(
        method=args.method,
        tree=TreeSettings(args.budget, args.max_depth, args.expand),
        max_new_tokens=args.max_new_tokens,
    )
    local_times = []
    for _ in stream_generate(
        target.lm, draft.lm if draft else None, tokenizer, prompt2, SamplingParams(temperature=0), decoding
    ):
        local_times.append(time.monotonic())

    if warm[0][1].prompt_tokens != len(prompt2):
        raise EngineError("the engine trimmed the benchmark conversation; lower --first-turn-tokens")
    if min(len(engine_chunks), len(local_times)) < 3:
        raise InvalidSettingError("the streamed answer took fewer than 3 passes; raise --max-new-tokens")
    engine_interval = statistics.mean(_intervals([t for t, _ in engine_chunks]))
    local_interval = statistics.mean(_intervals(local_times))
    transit = sorted(t - e.sent_at for t, e in engine_chunks)
    warm_ttft = statistics.median(t for t, _ in warm)
    cold_ttft = statistics.median(t for t, _ in cold)
    result = {
        "target": args.target,
        "draft": args.draft if args.method != "sequential" else None,
        "method": args.method,
        "budget": args.budget,
        "turn2_prompt_tokens": warm[0][1].prompt_tokens,
        "warm_reused_tokens": warm[0][1].reused_prefix_tokens,
        "warm_ttft_s": warm_ttft,
        "cold_ttft_s": cold_ttft,
        "ttft_speedup": cold_ttft / warm_ttft,
        "engine_chunk_interval_ms": 1000 * engine_interval,
        "in_process_chunk_interval_ms": 1000 * local_interval,
        "chunk_interval_ratio": engine_interval / local_interval,
        "queue_transit_p50_ms": 1000 * transit[len(transit) // 2],
        "queue_transit_max_ms": 1000 * transit[-1],
        "chunks": len(engine_chunks),
        "in_process_chunks": len(local_times),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"chat benchmark: {result['target']} / {result['draft']}, {args.method} budget {args.budget}, "
        f"{target.lm.device} {str(target.lm.dtype).removeprefix('torch.')}"
    )
    print(
        f"turn 2 time to first token: warm {warm_ttft:.3f} s (prefilled "
        f"{result['turn2_prompt_tokens'] - result['warm_reused_tokens']} of {result['turn2_prompt_tokens']} tokens)"
        f" vs cold {cold_ttft:.3f} s (prefilled {result['turn2_prompt_tokens']}) -> {result['ttft_speedup']:.2f}x"
    )
    print(
        f"streaming: {result['engine_chunk_interval_ms']:.1f} ms per chunk through the engine vs "
        f"{result['in_process_chunk_interval_ms']:.1f} ms in-process ({result['chunk_interval_ratio']:.2f}x); "
        f"queue transit p50 {result['queue_transit_p50_ms']:.2f} ms, max {result['queue_transit_max_ms']:.2f} ms "
        f"({result['chunks']} chunks)"
    )
    return 0
