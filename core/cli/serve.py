"""`specexec serve`: a local OpenAI-compatible API server over the engine process.

It takes the model, method and sampling flags of `specexec chat`; the sampling flags are the defaults of
requests that leave a setting out (a request without `seed` gets a new random seed unless --seed is given).
It listens on 127.0.0.1 only unless --host names another address *and* --allow-remote is given. An API key
is required unless --no-api-key: --api-key sets it, otherwise a new one is made and printed. Requests are
answered one at a time, each from fresh KV caches; Ctrl-C or SIGTERM stops the server (open streams get
2 s) and the engine, and the command exits 0.

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
    parser.set_defaults(seed=None)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a --host that other machines can reach (prints a warning)")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--api-key", default=None, metavar="KEY", help="the key clients must send (default: a new one)")
    keys.add_argument("--no-api-key", action="store_true", help="accept requests without a key")
    parser.add_argument("--access-log", action="store_true", help="log every HTTP request on stderr")


def request_defaults(args: argparse.Namespace):
    from core.server.schemas import Defaults

    return Defaults(
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        repetition_penalty=args.repetition_penalty, seed=args.seed, method=args.method,
        max_tokens=args.max_new_tokens, stop=tuple(args.stop),
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
    from core.server.api import create_app
    from core.server.engine_thread import EngineThread
    from core.server.gateway import EngineGateway
    from core.server.keys import new_api_key
    from core.server.runner import ApiServer, is_loopback

    decoding_settings(args)  # bad flags fail here, before anything starts
    load_settings = engine_load_settings(args)
    api_key = None if args.no_api_key else (args.api_key or new_api_key())
    remote = not is_loopback(args.host)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    client = EngineClient(torch_threads=args.threads)
    engine = EngineThread(client)
    gateway = EngineGateway(engine)
    app = create_app(gateway, api_key, request_defaults(args), loopback_only=not remote)
    # binds now: a taken port fails before the models load
    server = ApiServer(app, args.host, args.port, allow_remote=args.allow_remote, access_log=args.access_log)
    try:
        client.start()
        ready = client.load(
            args.target, args.draft if args.method != "sequential" else None,
            budget=args.budget, max_depth=args.max_depth, expand=args.expand, draft_top_p=args.draft_top_p,
            wait=True, on_progress=lambda event: _note(event.stage), **load_settings,
        )
        engine.start(ready.models)
        if remote:
            _note(f"WARNING: listening on {args.host}: other machines can reach this server"
                  + ("" if api_key else " and, without an API key, use the model freely"))
        print(f"Serving the OpenAI API at {server.url}", flush=True)
        print(f"API key: {api_key}" if api_key else "No API key required (--no-api-key)", flush=True)
        _note(f"try: curl {server.url}/models" + (f" -H 'Authorization: Bearer {api_key}'" if api_key else "")
              + "   (Ctrl-C stops the server)")
        try:
            with _sigterm_as_interrupt():
                server.run()
        except KeyboardInterrupt:  # uvicorn shuts down cleanly on Ctrl-C / SIGTERM, then re-raises the signal
            pass
        gateway.close()
        return 0
    finally:
        server.stop()
        engine.stop()
        client.shutdown()
