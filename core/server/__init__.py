"""The local OpenAI-compatible API server (torch-free: the desktop app hosts it in its Qt process).

- `core.server.requests`: the checks of a request's body (a `CompletionRequest`, or a 400 naming the field).
- `core.server.replies`: the answers' bodies in the OpenAI format (whole, streamed chunks, the model list).
- `core.server.api_errors`: errors in the OpenAI format, and the engine's errors as API errors.
- `core.server.gateway`: routes the server's requests to the one shared engine and its events back.
- `core.server.engine_thread`: the engine port of `specexec serve` (a thread owning an EngineClient).
- `core.server.api`: the Starlette app (routes, API key, body and queue checks).
- `core.server.event_stream`: the server-sent event streams (chunks, Responses events, keep-alive comments).
- `core.server.gate`: the origin and Host checks every request passes first.
- `core.server.tool_calls`: grammars that force a tool call (reading calls: core.text.tool_calls).
- `core.server.keys`: making and comparing API keys.
- `core.server.origins`: the web page origins allowed to call the server (CORS).
- `core.server.runner`: uvicorn on a pre-bound socket, in this thread or a background one.
"""
