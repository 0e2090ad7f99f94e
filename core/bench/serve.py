"""`specexec bench serve`: what the OpenAI-compatible API server's HTTP layer adds to an answer.

One engine process, driven by the server's engine thread, answers the same greedy request alternately
through the gateway in this process (the baseline: everything but HTTP) and through the API server on
loopback (HTTP, JSON, server-sent events), --repeats times each; alternating keeps a machine whose load
drifts from favouring either. For each: time to the first text and to the end of the answer, medians, and
their ratios. The answers must be the same text both ways, or the benchmark fails. (The engine thread
itself adds at most its 20 ms poll interval to a request's start, in both measurements.)
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
KEY = "bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_benchmark_arguments(parser)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="answer length")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")


def _request(args: argparse.Namespace) -> dict:
    return {"model": "bench", "messages": QUESTION, "temperature": 0, "max_tokens": args.max_new_tokens,
            "method": args.method}


async def _through_gateway(gateway, args: argparse.Namespace) -> tuple[float, float, str]:
    """(seconds to the first text, seconds to Finished, text) through the gateway, without HTTP."""
    from core.server.schemas import Defaults, new_id, parse_chat_request

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


def _over_http(host: str, port: int, args: argparse.Namespace) -> tuple[float, float, str]:
    """The same through the API server: a streamed chat completion read with the standard library."""
    body = json.dumps({**_request(args), "stream": True})
    connection = http.client.HTTPConnection(host, port, timeout=600)
    started = time.monotonic()
    connection.request("POST", "/v1/chat/completions", body,
                       {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    response = connection.getresponse()
    if response.status != 200:
        raise EngineError(f"the server answered {response.status}: {response.read()[:500]!r}")
    first, pieces = None, []
    for line in response:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise EngineError(f"the stream failed: {chunk['error']['message']}")
        text = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
        if text:
            first = first if first is not None else time.monotonic() - started
            pieces.append(text)
    total = time.monotonic() - started
    connection.close()
    return first or 0.0, total, "".join(pieces)


def run(args: argparse.Namespace) -> int:
    from core.server.api import create_app
    from core.server.engine_thread import EngineThread
    from core.server.gateway import EngineGateway
    from core.server.runner import ApiServer
    from core.server.schemas import Defaults

    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr, flush=True))
    client = EngineClient(torch_threads=args.threads)
    engine = EngineThread(client)
    gateway = EngineGateway(engine)
    server = ApiServer(create_app(gateway, KEY, Defaults(method=args.method)), "127.0.0.1", 0)
    through_gateway, http = [], []
    try:
        say("Starting the engine process")
        client.start()
        ready = client.load(
            args.target, args.draft if args.method != "sequential" else None,
            budget=args.budget, max_depth=args.max_depth, expand=args.expand, wait=True, **engine_load_settings(args),
        )
        engine.start(ready.models)
        server.start()
        asyncio.run(_through_gateway(gateway, args))  # warm-up: first-call costs stay out of both measurements
        _over_http("127.0.0.1", server.port, args)
        for repeat in range(args.repeats):
            say(f"Repeat {repeat + 1}/{args.repeats}: through the gateway, then over HTTP")
            through_gateway.append(asyncio.run(_through_gateway(gateway, args)))
            http.append(_over_http("127.0.0.1", server.port, args))
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
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"serve benchmark: {result['target']} / {result['draft']}, {args.method} budget {args.budget}, "
          f"{args.max_new_tokens} tokens, median of {args.repeats}")
    print(f"time to first text: {result['http_ttft_s']:.3f} s over HTTP vs {result['gateway_ttft_s']:.3f} s through "
          f"the gateway ({result['ttft_ratio']:.2f}x)")
    print(f"whole answer: {result['http_total_s']:.3f} s over HTTP vs {result['gateway_total_s']:.3f} s "
          f"({result['total_ratio']:.2f}x, {result['http_overhead_ms']:+.1f} ms per answer); same text both ways")
    return 0
