"""Who may talk to the API server at all, checked before any route runs: web pages by their `Origin` (only the
origins the user allowed, core.server.origins), and, when the server listens on loopback only, the `Host` a request
is addressed to (a web page cannot reach the server through DNS rebinding). Refusals are OpenAI-format errors.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from core.server.api_errors import ApiError

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    """An ApiError as its HTTP response (401s say how to authenticate)."""
    headers = dict(headers or {})
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(error.body(), status_code=error.status, headers=headers or None)


def check_host(request: Request) -> None:
    """403 for a request addressed to a host name that is not this machine's loopback."""
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name.lower() not in LOOPBACK_HOSTS:
        raise ApiError(
            403,
            f"this server only answers requests addressed to localhost, not {host!r}",
            "permission_error",
            code="host_not_allowed",
        )


class OriginGate:
    """Refuses requests from web pages (an `Origin` header) whose origin the user did not allow; the allowed
    ones go on to the CORS middleware inside it."""

    def __init__(self, app: ASGIApp, allowed_origins: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = set(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = dict(scope["headers"]).get(b"origin")
            if origin is not None and "*" not in self.allowed and origin.decode("latin-1") not in self.allowed:
                error = ApiError(
                    403,
                    f"requests from web pages at {origin.decode('latin-1')!r} are not allowed: add "
                    "the origin to the server's allowed origins (--allowed-origins, or the app's "
                    "settings) to let that page use the model",
                    "permission_error",
                    code="origin_not_allowed",
                )
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
