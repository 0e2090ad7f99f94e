"""Which engine the app talks to: this computer's engine process, or a remote OpenAI-compatible server.

Both are core.engine.connection.EngineConnection implementations, so the bridge and the chat never ask which
one they have; only this module (and the window's words for people) does.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from urllib.parse import urlsplit

from app.settings.schema import AppSettings, RemoteEndpoint
from core.engine.client import EngineClient
from core.engine.connection import EngineConnection
from core.remote.endpoint import Endpoint, checked_key
from core.remote.engine import RemoteEngine
from core.remote.key_store import stored_key


def endpoint_of(remote: RemoteEndpoint) -> Endpoint:
    """The core endpoint of a saved one, with its key from the keyring."""
    return Endpoint(remote.url, checked_key(stored_key(remote.url)), remote.name)


def connection_factory(settings: AppSettings) -> Callable[[], EngineConnection]:
    """What the bridge's worker calls (in its thread) to make the engine connection the settings ask for."""
    remote = settings.remote_endpoint()
    if remote is not None:
        return lambda: RemoteEngine(endpoint_of(remote))
    threads = settings.thread_count()
    return lambda: EngineClient(torch_threads=threads)


def connection_key(settings: AppSettings) -> tuple[str, str]:
    """What identifies the connection (not the model): a change means a new engine connection."""
    remote = settings.remote_endpoint()
    return ("remote", remote.url) if remote is not None else ("local", "")


def source_words(settings: AppSettings) -> str:
    """Where answers come from, for people: "this computer" or "alpha-7b on GPU box"."""
    remote = settings.remote_endpoint()
    return f"{remote.model or 'its model'} on {remote.name}" if remote is not None else "this computer"


def own_api_server_words(url: str, own_url: str | None) -> str | None:
    """Why `url` cannot be a connection when it is this app's own API server, which answers at `own_url` (None
    while it is off); None otherwise. Through it, answers would come from the engine that "This computer"
    already is, and using it as a connection shuts that engine down: the server goes with it."""
    if own_url is None:
        return None
    parts, own = urlsplit(url), urlsplit(own_url)
    host = (parts.hostname or "").lower()
    try:
        this_machine = host == "localhost" or ipaddress.ip_address(host).is_loopback or host in ("0.0.0.0", "::")
    except ValueError:
        this_machine = False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if not this_machine or port != own.port:
        return None
    return (
        f"That address is this app's own API server (Settings, Local API server, port {port}): it answers with "
        "the model on this computer, which “This computer” already uses. To chat with another computer's "
        "model, give that computer's address."
    )
