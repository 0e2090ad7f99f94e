"""An independent OpenAI-compatible server for tests, run as its own process (standard library only).

It is not `specexec serve`: it speaks the protocol with the differences real servers have, so the client is
tested against more than our own server's habits:

- several models in GET /v1/models: alpha-7b reports its context window as vLLM does (`max_model_len`),
  beta-13b reports none, strict-3b refuses the non-standard fields (seed, top_k, repetition_penalty,
  stream_options) with a plain-text 400 naming the field, as strict servers do;
- streams carry no `usage` (even when asked for), end without `data: [DONE]` (the connection just closes
  after the finish_reason chunk, HTTP/1.0 style), and start with an SSE comment line (`: keep-alive`);
- errors are plain text, not OpenAI JSON: 401 "Unauthorized", 404 "model ... not found", 400 for a
  conversation over CONTEXT_WORDS words ("maximum context length"), 400 for bad JSON;
- answers are made of words, one chunk per word, TOKEN_DELAY seconds apart: "You said: <the last user
  message>." then words chosen by the seed, max_tokens words at most (finish_reason "length"), else 24 of
  them (500 when the message has the word "long"); a message with the word "think" gets a thinking block
  first, written into the answer's text as servers without a reasoning parser send it (`<think>Let me
  see.</think>`, its markers cut across chunks: THINKING_PIECES);
- GET /_state (no key) tells what happened on the server's side: streams `active` now, `finished`,
  `disconnected` (the client left mid-stream: the server noticed at its next write and stopped), and the
  last request body received;
- with --llama-cpp-counts it counts prompts as llama.cpp's server does: POST /v1/chat/completions/input_tokens
  answers {"object": "response.input_tokens", "input_tokens": prompt_words(body)} (a model it does not have is
  a 404, as the chat route's), POST /tokenize without text answers {"tokens": []}, and GET /props says each
  request's window (`default_generation_settings.n_ctx`, CONTEXT_WORDS); without it those routes are 404s.

    python tests/other_openai_server.py --port 0 [--key K] [--token-delay S] [--tls-cert C --tls-key K]
        [--llama-cpp-counts]

prints `listening on http(s)://127.0.0.1:PORT/v1` on stdout once it accepts connections; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS = [
    {"id": "alpha-7b", "object": "model", "owned_by": "tests", "max_model_len": 8192},
    {"id": "beta-13b", "object": "model", "owned_by": "tests"},
    {"id": "strict-3b", "object": "model", "owned_by": "tests"},
]
STRICT_REFUSES = ("seed", "top_k", "repetition_penalty", "stream_options")
CONTEXT_WORDS = 400
THINKING_PIECES = ("<thi", "nk>\nLet me", " see.</th", "ink>\n\n")
NATURAL_LENGTH = 24
LONG_LENGTH = 500
WORDS = (
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "harbor",
    "inlet",
    "juniper",
    "kelp",
    "lagoon",
    "meadow",
    "nectar",
    "orchid",
    "prairie",
)


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.finished = 0
        self.disconnected = 0
        self.last_request: dict | None = None

    def snapshot(self) -> dict:
        with self.lock:
            return {
                "active": self.active,
                "finished": self.finished,
                "disconnected": self.disconnected,
                "last_request": self.last_request,
            }


def thinking_pieces(body: dict) -> tuple[str, ...]:
    """The chunks of thinking that come before the answer's words (none unless the message says "think")."""
    last_user = next((m.get("content", "") for m in reversed(body["messages"]) if m.get("role") == "user"), "")
    return THINKING_PIECES if "think" in str(last_user).split() else ()


def prompt_words(body: dict) -> int:
    """This server's count of a chat's prompt: every message's words, two for each message's role markers,
    and one for the generation prompt."""
    return sum(len(str(m.get("content", "")).split()) + 2 for m in body["messages"]) + 1


def answer_words(body: dict) -> tuple[list[str], str]:
    """The answer's words and its finish reason."""
    last_user = next((m.get("content", "") for m in reversed(body["messages"]) if m.get("role") == "user"), "")
    seed = body.get("seed") or 0
    words = ["You", "said:"] + str(last_user).split()[:20]
    words[-1] += "."
    natural = LONG_LENGTH if "long" in str(last_user).split() else NATURAL_LENGTH
    words += [WORDS[(seed + i * 7) % len(WORDS)] for i in range(natural)]
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if isinstance(limit, int) and limit < len(words):
        return words[:limit], "length"
    return words, "stop"


class Handler(BaseHTTPRequestHandler):
    server_version = "OtherServer/1.0"
    protocol_version = "HTTP/1.0"  # bodies end when the connection closes, like some real servers' streams

    def log_message(self, *args) -> None:  # quiet
        pass

    @property
    def state(self) -> State:
        return self.server.state  # type: ignore[attr-defined]

    def _plain(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        key = self.server.key  # type: ignore[attr-defined]
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._plain(401, "Unauthorized")
        return False

    @property
    def counts(self) -> bool:
        return self.server.llama_cpp_counts  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        if self.path == "/_state":
            self._json(200, self.state.snapshot())
        elif self.path == "/v1/models":
            if self._authorised():
                self._json(200, {"object": "list", "data": MODELS})
        elif self.path == "/props" and self.counts:
            if self._authorised():
                self._json(200, {"default_generation_settings": {"n_ctx": CONTEXT_WORDS}, "total_slots": 1})
        else:
            self._plain(404, "Not Found")

    def do_POST(self) -> None:
        counting = self.counts and self.path in ("/v1/chat/completions/input_tokens", "/tokenize")
        if self.path != "/v1/chat/completions" and not counting:
            self._plain(404, "Not Found")
            return
        if not self._authorised():
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            self._plain(400, "Bad Request: expected a JSON object")
            return
        if self.path == "/tokenize":  # llama.cpp counts text (`content`), and answers no tokens without it
            self._json(200, {"tokens": list(range(len(str(body.get("content", "")).split())))})
            return
        if not isinstance(body.get("messages"), list):
            self._plain(400, "Bad Request: expected a JSON object with messages")
            return
        with self.state.lock:
            self.state.last_request = body
        model = body.get("model")
        if model not in [m["id"] for m in MODELS]:
            self._plain(404, f"model '{model}' not found")
            return
        if self.path == "/v1/chat/completions/input_tokens":
            self._json(200, {"object": "response.input_tokens", "input_tokens": prompt_words(body)})
            return
        if model == "strict-3b":
            for name in STRICT_REFUSES:
                if name in body:
                    self._plain(400, f"unsupported parameter: {name}")
                    return
        if sum(len(str(m.get("content", "")).split()) for m in body["messages"]) > CONTEXT_WORDS:
            self._plain(400, f"This model's maximum context length is {CONTEXT_WORDS} tokens")
            return
        words, reason = answer_words(body)
        pieces = [*thinking_pieces(body), *(word if index == 0 else " " + word for index, word in enumerate(words))]
        if not body.get("stream"):
            text = "".join(pieces)
            self._json(
                200,
                {
                    "id": "cmpl-1",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(words), "total_tokens": 10 + len(words)},
                },
            )
            return
        self._stream(model, pieces, reason)

    def _stream(self, model: str, pieces: list[str], reason: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        with self.state.lock:
            self.state.active += 1
        delay = self.server.token_delay  # type: ignore[attr-defined]
        outcome = "finished"
        try:
            self.wfile.write(b": keep-alive\n\n")
            for index, piece in enumerate(pieces):
                last = index == len(pieces) - 1
                chunk = {
                    "id": "chunk-1",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": piece},
                            "finish_reason": reason if last else None,
                        }
                    ],
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(delay)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            outcome = "disconnected"
        with self.state.lock:
            self.state.active -= 1
            setattr(self.state, outcome, getattr(self.state, outcome) + 1)
        # no usage chunk and no [DONE]: the answer ends when the connection closes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key", default=None)
    parser.add_argument("--token-delay", type=float, default=0.01)
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument("--llama-cpp-counts", action="store_true")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = State()  # type: ignore[attr-defined]
    server.key = args.key  # type: ignore[attr-defined]
    server.token_delay = args.token_delay  # type: ignore[attr-defined]
    server.llama_cpp_counts = args.llama_cpp_counts  # type: ignore[attr-defined]
    scheme = "http"
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    print(f"listening on {scheme}://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
