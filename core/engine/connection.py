"""What the app's engine bridge and `specexec chat` need from an engine, wherever it runs.

Two implementations speak it: `core.engine.client.EngineClient` (the engine process on this computer) and
`core.remote.engine.RemoteEngine` (an OpenAI-compatible server elsewhere: `specexec serve` on another PC,
vLLM, Ollama, LM Studio...). Both take the same requests and report the same protocol events
(core.engine.protocol), so code that holds an `EngineConnection` does not know which one it has.

A lost engine, whether the process died or the server's connection dropped, is reported once as
Error(kind="engine_died", request_id=None), which ends every request in flight; `restart()` brings it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from core.engine import protocol as P


@runtime_checkable
class EngineConnection(Protocol):
    """Use from one thread (the app's engine worker, or the terminal chat's loop)."""

    engine_pid: int | None  # the engine process's id; None for a remote server

    @property
    def alive(self) -> bool:
        """Whether requests can be sent now."""

    def start(self, wait: bool = True, timeout: float | None = None) -> None:
        """Get ready to take requests; EngineStarted follows."""

    def load(
        self,
        target: str = "builtin",
        draft: str | None = "builtin-draft",
        *,
        wait: bool = False,
        on_progress: Callable[[P.LoadProgress], None] | None = None,
        timeout: float | None = None,
        **settings: Any,
    ) -> P.StatusReport | None:
        """Load (or, remotely, select and check) the model; with `wait`, block and return the ready report."""

    def generate(self, messages: list[dict[str, str]], *, request_id: str | None = None, **settings: Any) -> str:
        """Queue an answer (settings: Generate's fields); its events follow through `poll`."""

    def count_tokens(self, messages: list[dict[str, Any]], *, request_id: str | None = None, **settings: Any) -> str:
        """Ask how long the prompt of `messages` would be (settings: CountTokens' fields); a TokenCount or an
        Error with the returned request id follows through `poll`."""

    def cancel(self, request_id: str) -> None:
        """Stop an answer (the text so far stays) or drop a queued one."""

    def status(self) -> None:
        """Ask for a StatusReport."""

    def restart(self, reload: bool = True, wait: bool = True) -> None:
        """Start again after a loss; with `reload`, the last load too."""

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop everything; safe to call twice."""

    def poll(self, timeout: float = 0.0) -> P.Event | None:
        """The next event, waiting up to `timeout` seconds; None if there is none."""
