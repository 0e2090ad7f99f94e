"""The check made before a remote endpoint is saved: it lists the server's models and asks one of them for a
very short answer, streamed like a chat answer, so a saved endpoint is known to work end to end. Also the
plain model list, for picking another model of a saved endpoint.

Blocking (it runs its own asyncio loop): call it from a worker thread, never from a running event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from core.errors import RemoteRejectedError
from core.remote.endpoint import Endpoint
from core.remote.http_client import CONNECT_TIMEOUT_S, OpenAICompatibleClient
from core.remote.wire import RemoteModel

CHECK_PROMPT = "Reply with one word: hello."
CHECK_MAX_TOKENS = 8
CHECK_IDLE_TIMEOUT_S = 120.0  # a big model on a busy server may take a while to say its first word


@dataclass(frozen=True)
class EndpointCheck:
    """What the check found: the models, which one answered and what it said, how long the answer took, and
    the optional request fields the server refused (left out of later requests, e.g. "seed": then a fixed
    seed does not repeat an answer on that server)."""

    models: tuple[RemoteModel, ...]
    model: str
    reply: str
    seconds: float
    refused: frozenset[str]


def check_endpoint(
    endpoint: Endpoint,
    model: str = "",
    connect_timeout: float = CONNECT_TIMEOUT_S,
    idle_timeout: float = CHECK_IDLE_TIMEOUT_S,
) -> EndpointCheck:
    """List the models and stream a short answer from `model` (empty: the first listed).

    Raises:
        RemoteError: in plain words, why the endpoint cannot be used (a subclass says which kind).
    """
    return asyncio.run(_check(endpoint, model, connect_timeout, idle_timeout))


def list_models(endpoint: Endpoint, connect_timeout: float = CONNECT_TIMEOUT_S) -> list[RemoteModel]:
    """The server's models (RemoteError when it cannot be asked). Blocking, like check_endpoint."""

    async def ask() -> list[RemoteModel]:
        client = OpenAICompatibleClient(endpoint, connect_timeout)
        try:
            return await client.list_models()
        finally:
            await client.aclose()

    return asyncio.run(ask())


async def _check(endpoint: Endpoint, model: str, connect_timeout: float, idle_timeout: float) -> EndpointCheck:
    client = OpenAICompatibleClient(endpoint, connect_timeout, idle_timeout)
    try:
        models = await client.list_models()
        if not models:
            raise RemoteRejectedError(f"{endpoint.label} offers no models", "load a model on the server first")
        ids = [m.id for m in models]
        chosen = model or ids[0]
        if chosen not in ids:
            raise RemoteRejectedError(f"{endpoint.label} has no model {chosen!r}", "pick one of the models it lists")
        started = time.monotonic()
        pieces = []
        options = {"max_tokens": CHECK_MAX_TOKENS, "temperature": 0.0, "seed": 0}
        async for piece in client.stream_chat(chosen, [{"role": "user", "content": CHECK_PROMPT}], options):
            pieces.append(piece.text)
        return EndpointCheck(
            tuple(models), chosen, "".join(pieces).strip(), time.monotonic() - started, frozenset(client.refused)
        )
    finally:
        await client.aclose()
