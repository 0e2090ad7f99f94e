"""Chatting through an OpenAI-compatible server elsewhere (no Qt, no torch).

- `core.remote.endpoint`: a server's address, checked and normalised, and its key.
- `core.remote.wire`: what servers send, read defensively (model lists, stream chunks, errors).
- `core.remote.http_client`: the HTTP client (httpx2): the model list and streamed chat answers.
- `core.remote.engine`: RemoteEngine, the server driven like the local engine (core.engine.connection).
- `core.remote.check`: the check made before an endpoint is saved (its models and one short answer).
- `core.remote.key_store`: endpoint API keys in the OS keyring (or a file only the user can read).
"""
