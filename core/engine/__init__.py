"""The engine process and its client.

- `core.engine.protocol`: the typed, versioned messages (no torch; the Qt app imports it).
- `core.engine.client.EngineClient`: starts, talks to, watches and restarts the engine process (no torch).
- `core.engine.process`: the engine's request loop (imports torch lazily, inside the engine process);
  `core.engine.events` turns its exceptions and choices into protocol events.
- `core.engine.session`: chat turns, KV-cache reuse across turns, context trimming, out-of-memory retry.

Importing this package stays light: only the protocol and the client are imported here.
"""

from core.engine.client import EngineClient
from core.engine.protocol import PROTOCOL_VERSION

__all__ = ["EngineClient", "PROTOCOL_VERSION"]
