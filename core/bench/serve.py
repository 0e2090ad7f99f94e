"""`specexec bench serve`: what the OpenAI-compatible API server's HTTP layer adds to an answer, and what
the conversation cache saves a follow-up turn.

1. One engine process, driven by the server's engine thread, answers the same greedy request alternately
   through the gateway in this process (the baseline: everything but HTTP) and through the API server on
   loopback (HTTP, JSON, server-sent events), --repeats times each; alternating keeps a machine whose load
   drifts from favouring either. For each: time to the first text and to the end of the answer, medians,
   and their ratios. The answers must be the same text both ways, or the benchmark fails. (The engine thread
   itself adds at most its 20 ms poll interval to a request's start, in both measurements.)
2. A two-turn conversation over HTTP, as a chat client sends it: a first turn with a long user message
   (--first-turn-tokens), then the whole history plus a short follow-up question. Time to the first text of
   each, medians over --repeats conversations (each first message is new, so each first turn is read cold),
   and the follow-up's cached prompt tokens (usage.prompt_tokens_details.cached_tokens).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import sys
import time

from core.cli.options import add_engine_benchmark_arguments, engine_load_settings
from core.engine import protocol as P
from core.engine.client import EngineClient
from core.errors import EngineError

QUESTION = [{"role": "user", "content": "Explain in a few sentences why the sky is blue."}]
FOLLOW_UP = "Now summarise that in one sentence."
KEY = "bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_benchmark_arguments(parser)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="answer length")
    parser.add_argument(
        "--first-turn-tokens",
        type=int,
        default=1500,
        help="length of the conversation's long first message (0: skip the two-turn measurement)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="times each measurement is repeated (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _request(args: argparse.Namespace) -> dict:
    return {
        "model": "",
        "messages": QUESTION,  # no model named: the one served "temperature": 0, "max_tokens": args.max_new_tokens,
        "method": args.method,
    }


async def _through_gateway(gateway, args: argparse.Namespace) -> tuple[float, float, str]:
    """(seconds to the first text, seconds to Finished, text) through the gateway, without HTTP."""
    from core.server.replies import new_id
    from core.server.requests import Defaults, parse_chat_request

    started = time.monotonic()
    ticket = gateway.open(parse_chat_request(_request(args), Defaults()).to_generate(new_id("bench")))
    first, pieces = None, []
    while True:
        event = await ticket.next()
        if isinstance(event, P.TokenChunk) and event.text:
            first = first if first is not None else time.monotonic() - started
            pieces.append(event.text)
        elif isinstance(event, P.Error):
            raise EngineError(f"{event.kind}: {event.message}")
        elif event is None or isinstance(event, P.Finished):
            return first or 0.0, time.monotonic() - started, "".join(pieces)


def _over_http(
    host: str, port: int, args: argparse.Namespace, messages: list[dict] | None = None
) -> tuple[float, float, str, dict]:
    """The same through the API server (or `messages` instead of the question): a streamed chat completion
    read with the standard library. (seconds to the first text, seconds to the end, text, usage)."""
    request = {**_request(args), "stream": True, "stream_options": {"include_usage": True}}
    body = json.dumps({**request, "messages": messages} if messages else request)
    connection = http.client.HTTPConnection(host, port, timeout=600)
    started = time.monotonic()
    connection.request(
        "POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    )
    response = connection.getresponse()
    if response.status != 200:
        raise EngineError(f"the server answered {response.status}: {response.read()[:500]!r}")
    first, pieces, usage = None, [], {}
    for line in response:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise EngineError(f"the stream failed: {chunk['error']['message']}")
        usage = chunk.get("usage") or usage
        text = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
        if text:
            first = first if first is not None else time.monotonic() - started
            pieces.append(text)
    total = time.monotonic() - started
    connection.close()
    return first or 0.0, total, "".join(pieces), usage


def _long_message(tokens: int, repeat: int) -> str:
    """A first message of about `tokens` tokens that no earlier repeat sent (so it is read cold)."""
    from core.bench.chat import FILLER

    text = f"Conversation {repeat}. "
    while len(text.split()) * 4 // 3 < tokens:  # ~4 tokens per 3 English words
        text += FILLER
    return text + "What was new about it?"


def _two_turns(port: int, args: argparse.Namespace, repeat: int) -> dict:
    """One conversation over HTTP: the first turn's and the follow-up's time to first text, and usage."""
    first_turn = [{"role": "user", "content": _long_message(args.first_turn_tokens, repeat)}]
    first_ttft, _, answer, first_usage = _over_http("127.0.0.1", port, args, first_turn)
    history = first_turn + [{"role": "assistant", "content": answer}, {"role": "user", "content": FOLLOW_UP}]
    follow_ttft, _, _, follow_usage = _over_http("127.0.0.1", port, args, history)
    return {
        "first_ttft_s": first_ttft,
        "first_prompt_tokens": first_usage.get("prompt_tokens", 0),
        "follow_up_ttft_s": follow_ttft,
        "follow_up_prompt_tokens": follow_usage.get("prompt_tokens", 0),
        "follow_up_cached_tokens": (follow_usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
    }


def run(args: argparse.Namespace) -> int:
    from core.server.api import create_app
    from core.server.engine_thread import EngineThread
    from core.server.gateway import EngineGateway
    from core.server.runner import ApiServer
    from core.server.requests import Defaults

    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr, flush=True))
    client = EngineClient(torch_threads=args.threads)
    engine = EngineThread(client)
    gateway = EngineGateway(engine)
    server = ApiServer(create_app(gateway, KEY, Defaults(method=args.method)), "127.0.0.1", 0)
    through_gateway, http, conversations = [], [], []
    try:
        say("Starting the engine process")
        client.start()
        ready = client.load(
            args.target,
            args.draft if args.method != "sequential" else None,
            budget=args.budget,
            max_depth=args.max_depth,
            expand=args.expand,
            wait=True,
            **engine_load_settings(args),
        )
        engine.start(ready.models)
        server.start()
        asyncio.run(_through_gateway(gateway, args))  # warm-up: first-call costs stay out of both measurements
        _over_http("127.0.0.1", server.port, args)
        for repeat in range(args.repeats):
            say(f"Repeat {repeat + 1}/{args.repeats}: through the gateway, then over HTTP")
            through_gateway.append(asyncio.run(_through_gateway(gateway, args)))
            http.append(_over_http("127.0.0.1", server.port, args)[:3])
        for repeat in range(args.repeats if args.first_turn_tokens > 0 else 0):
            say(f"Conversation {repeat + 1}/{args.repeats}: a long first turn, then a follow-up")
            conversations.append(_two_turns(server.port, args, repeat))
    finally:
        server.stop()
        engine.stop()
        client.shutdown()

    texts = {text for _, _, text in through_gateway + http}
    if len(texts) != 1:
        raise EngineError("the greedy answers differ between the gateway and the API server")
    result = {
        "target": args.target,
        "draft": args.draft if args.method != "sequential" else None,
        "method": args.method,
        "budget": args.budget,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "gateway_ttft_s": statistics.median(t for t, _, _ in through_gateway),
        "http_ttft_s": statistics.median(t for t, _, _ in http),
        "gateway_total_s": statistics.median(t for _, t, _ in through_gateway),
        "http_total_s": statistics.median(t for _, t, _ in http),
    }
    result["ttft_ratio"] = result["http_ttft_s"] / result["gateway_ttft_s"]
    result["total_ratio"] = result["http_total_s"] / result["gateway_total_s"]
    result["http_overhead_ms"] = 1000 * (result["http_total_s"] - result["gateway_total_s"])
    if conversations:
        for key in conversations[0]:
            result[key] = statistics.median(c[key] for c in conversations)
        result["follow_up_speedup"] = result["first_ttft_s"] / result["follow_up_ttft_s"]
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"serve benchmark: {result['target']} / {result['draft']}, {args.method} budget {args.budget}, "
        f"{args.max_new_tokens} tokens, median of {args.repeats}"
    )
    print(
        f"time to first text: {result['http_ttft_s']:.3f} s over HTTP vs {result['gateway_ttft_s']:.3f} s through "
        f"the gateway ({result['ttft_ratio']:.2f}x)"
    )
    print(
        f"whole answer: {result['http_total_s']:.3f} s over HTTP vs {result['gateway_total_s']:.3f} s "
        f"({result['total_ratio']:.2f}x, {result['http_overhead_ms']:+.1f} ms per answer); same text both ways"
    )
    if conversations:
        print(
            f"two-turn conversation over HTTP: first turn {result['first_ttft_s']:.3f} s to first text "
            f"({result['first_prompt_tokens']:.0f} prompt tokens), follow-up {result['follow_up_ttft_s']:.3f} s "
            f"({result['follow_up_cached_tokens']:.0f} of {result['follow_up_prompt_tokens']:.0f} prompt tokens "
            f"cached) -> {result['follow_up_speedup']:.2f}x"
        )
    return 0
