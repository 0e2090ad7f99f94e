"""`specexec serve`: a local OpenAI-compatible API server over the engine process.

It takes the model, method and sampling flags of `specexec chat`; the sampling flags are the defaults of
requests that leave a setting out (a request without `seed` gets a new random seed unless --seed is given; a
chat request without `max_tokens` may answer up to the end of the context unless --max-new-tokens is given).
It listens on 127.0.0.1 only unless --host names another address *and* --allow-remote is given, which also
needs an API key. An API key is required unless --no-api-key: --api-key sets it, otherwise a new one is made
and printed. No web page may call it unless its origin is in --allowed-origins. Requests are answered one at
a time (at most --max-queue wait), each starting from the engine's kept conversation that shares the longest
prefix with it; Ctrl-C or SIGTERM ends open requests with a server_stopping error, then stops the server
and the engine, and the command exits 0.

What it prints on stdout, line by line, is for people and for scripts: the URL (`Serving the OpenAI API at
URL`), then the key (`API key: KEY`) unless there is none.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from contextlib import contextmanager

from core.cli.options import add_generation_arguments, decoding_settings, engine_load_settings

DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_generation_arguments(parser)
    parser.set_defaults(seed=None, max_new_tokens=None)  # requests without max_tokens: the rest of the context
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free port)"
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host that other machines can reach (needs an API key; prints a warning)",
    )
    parser.add_argument(
        "--allowed-origins",
        default="",
        metavar="ORIGINS",
        help="comma-separated web page origins that may call the API from a browser, e.g. "
        "http://localhost:3000 (default: none; * for any page)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        default=None,
        metavar="N",
        help="requests that may wait while one is answered; more get 503 with Retry-After (default 16)",
    )
    parser.add_argument(
        "--keepalive",
        type=float,
        default=None,
        metavar="SECONDS",
        help="longest silence on a stream: a comment line says the request is queued or reading "
        "its prompt (default 5; lower it behind proxies with short idle timeouts)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--api-key", default=None, metavar="KEY", help="the key clients must send (default: a new one)")
    keys.add_argument("--no-api-key", action="store_true", help="accept requests without a key")
    parser.add_argument("--access-log", action="store_true", help="log every HTTP request on stderr")
    parser.add_argument(
        "--served-model-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a name requests may give the model (repeatable; the first is the one responses "
        "carry; default: the model's own name). Requests naming another model get 404",
    )


def request_defaults(args: argparse.Namespace):
    from core.server.requests import Defaults

    return Defaults(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
        method=args.method,
        max_tokens=args.max_new_tokens,
        stop=tuple(args.stop),
    )


@contextmanager
def _sigterm_as_interrupt():
    """While serving, SIGTERM ends like Ctrl-C (so the engine is shut down, not orphaned, and the exit is 0)."""

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from core.engine.client import EngineClient
    from core.errors import InvalidSettingError, ServerError
    from core.server.api import DEFAULT_MAX_QUEUE, KEEPALIVE_S, create_app
    from core.server.engine_thread import EngineThread
    from core.server.gateway import EngineGateway
    from core.server.keys import new_api_key
    from core.server.origins import parse_origins
    from core.server.runner import ApiServer, is_loopback

    # bad flags fail here, before anything starts (without --max-new-tokens, answers may run to the context's end)
    decoding_settings(argparse.Namespace(**{**vars(args), "max_new_tokens": args.max_new_tokens or 1}))
    load_settings = engine_load_settings(args)
    origins = parse_origins(args.allowed_origins)
    remote = not is_loopback(args.host)
    if remote and args.allow_remote and args.no_api_key:
        raise ServerError(
            "--allow-remote needs an API key: anyone on your network could use the model. Leave "
            "out --no-api-key (a key is made and printed) or give one with --api-key"
        )
    max_queue = DEFAULT_MAX_QUEUE if args.max_queue is None else args.max_queue
    if max_queue < 0:
        raise InvalidSettingError(f"--max-queue must be 0 or more, got {max_queue}")
    keepalive = KEEPALIVE_S if args.keepalive is None else args.keepalive
    if not 0 < keepalive <= 600:
        raise InvalidSettingError(f"--keepalive must be above 0 and at most 600 seconds, got {keepalive:g}")
    api_key = None if args.no_api_key else (args.api_key or new_api_key())
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    client = EngineClient(torch_threads=args.threads)
    engine = EngineThread(client)
    gateway = EngineGateway(engine)
    app = create_app(
        gateway,
        api_key,
        request_defaults(args),
        loopback_only=not remote,
        allowed_origins=origins,
        max_queue=max_queue,
        keepalive_s=keepalive,
        model_names=tuple(args.served_model_name),
    )
    # binds now: a taken port fails before the models load
    server = ApiServer(
        app, args.host, args.port, allow_remote=args.allow_remote, access_log=args.access_log, on_stopping=gateway.close
    )
    try:
        client.start()
        ready = client.load(
            args.target,
            args.draft if args.method != "sequential" else None,
            budget=args.budget,
            max_depth=args.max_depth,
            expand=args.expand,
            draft_top_p=args.draft_top_p,
            wait=True,
            on_progress=lambda event: _note(event.stage),
            **load_settings,
        )
        engine.start(ready.models)
        if remote:
            _note(f"WARNING: listening on {args.host}: other machines can reach this server (with the API key)")
        if origins:
            _note(f"web pages at {', '.join(origins)} may call this server from a browser")
        server.listen()  # before the URL is printed: a client that reads it connects at once
        print(f"Serving the OpenAI API at {server.url}", flush=True)
        print(f"API key: {api_key}" if api_key else "No API key required (--no-api-key)", flush=True)
        _note(
            f"try: curl {server.url}/models"
            + (f" -H 'Authorization: Bearer {api_key}'" if api_key else "")
            + "   (Ctrl-C stops the server)"
        )
        try:
            with _sigterm_as_interrupt():
                server.run()
        except KeyboardInterrupt:  # uvicorn shuts down cleanly on Ctrl-C / SIGTERM, then re-raises the signal
            pass
        return 0
    finally:
        server.stop()
        engine.stop()
        client.shutdown()
