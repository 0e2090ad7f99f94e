"""The local OpenAI-compatible API server (torch-free: the desktop app hosts it in its Qt process).

- `core.server.requests`: request checks and response bodies in the OpenAI format.
- `core.server.gateway`: routes the server's requests to the one shared engine and its events back.
- `core.server.engine_thread`: the engine port of `specexec serve` (a thread owning an EngineClient).
- `core.server.api`: the Starlette app (routes, API key, origin and body checks, streaming, keep-alives).
- `core.server.tool_calls`: grammars that force a tool call (reading calls: core.text.tool_calls).
- `core.server.keys`: making and comparing API keys.
- `core.server.origins`: the web page origins allowed to call the server (CORS).
- `core.server.runner`: uvicorn on a pre-bound socket, in this thread or a background one.
"""
