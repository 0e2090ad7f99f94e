"""Errors answered in the OpenAI format ({"error": {"message", "type", "param", "code"}}), and the ones the
engine's Error events and the API key check turn into. Plain data, no HTTP types: the request checks, the reply
builders and the routes all raise them."""

from __future__ import annotations

from typing import Any

from core.engine import protocol as P


class ApiError(Exception):
    """An error answered in the OpenAI format: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# How engine error kinds reach API clients: (HTTP status, error type, code).
_ENGINE_ERRORS: dict[str, tuple[int, str, str | None]] = {
    "context_length": (400, "invalid_request_error", "context_length_exceeded"),
    "invalid_setting": (400, "invalid_request_error", "invalid_value"),
    "protocol": (400, "invalid_request_error", "invalid_value"),
    "not_loaded": (503, "server_error", "model_not_loaded"),
    "engine_died": (503, "server_error", "engine_unavailable"),
    "engine_start": (503, "server_error", "engine_unavailable"),
    "out_of_memory": (507, "server_error", "out_of_memory"),
    "busy": (409, "invalid_request_error", "request_id_in_use"),
    "server_stopping": (503, "server_error", "server_stopping"),
}


def engine_error(event: P.Error, max_context: int | None = None, prompt_param: str = "messages") -> ApiError:
    """The API error for an engine Error event ending a request. A prompt that does not fit starts with
    OpenAI's wording ("This model's maximum context length is N tokens"), which clients such as litellm match
    to raise their context-window error (and fall back to a model with a longer context)."""
    status, kind, code = _ENGINE_ERRORS.get(event.kind, (500, "server_error", event.kind))
    message = event.message + (f" ({event.hint})" if event.hint else "")
    if event.kind == "context_length":
        limit = f"{max_context} tokens" if max_context else "smaller than this request"
        message = f"This model's maximum context length is {limit}: {message}"
    return ApiError(status, message, kind, prompt_param if event.kind == "context_length" else None, code)


def missing_key_error() -> ApiError:
    """401 for a request without a key, in OpenAI's words."""
    return ApiError(
        401,
        "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (the key is shown "
        "by `specexec serve` and in the app's settings).",
        code="missing_api_key",
    )


def wrong_key_error(given: str) -> ApiError:
    """401 for a wrong key, in OpenAI's words (clients such as litellm match "Incorrect API key provided" to
    raise their authentication error); only the key's first and last characters are repeated."""
    shown = f"{given[:3]}***{given[-2:]}" if len(given) > 8 else "***"
    return ApiError(
        401,
        f"Incorrect API key provided: {shown}. The key is shown by `specexec serve` and in the app's settings.",
        code="invalid_api_key",
    )


class QueueFull(ApiError):
    """503: too many requests waiting; `retry_after` seconds is when one is likely to have room."""

    def __init__(self, waiting: int, retry_after: int) -> None:
        super().__init__(
            503,
            f"the server is busy: {waiting} requests are waiting for the model; try again in about {retry_after} s",
            "server_error",
            code="queue_full",
        )
        self.retry_after = retry_after
