"""Protocol events built from what happens inside the engine: an exception as an Error event with its kind
and a hint in plain words (the app and the server show both), the auto method's choice as an AutoChoice.

Exceptions are matched by class name along their MRO, so this module needs neither torch nor the classes'
modules (the engine raises them from code that imports torch lazily).
"""

from __future__ import annotations

import traceback
from typing import Any

from core.engine import protocol as P
from core.system.disk import is_disk_full

_ERROR_KINDS_BY_CLASS = {
    "ContextLengthError": ("context_length", "shorten the message or the system prompt, or start a new conversation"),
    "GrammarError": (
        "invalid_setting",
        "the JSON schema (response_format, or a forced tool's parameters) uses "
        "something structured output cannot read: simplify it",
    ),
    "InvalidSettingError": ("invalid_setting", "check the request's settings"),
    "ModelNotFoundError": ("model_not_found", "check the model path, or use 'builtin'"),
    # the most specific class first (error_event walks the exception's classes in order)
    "UnsupportedFormatError": (
        "model_format",
        "download a GPTQ, AWQ or compressed-tensors W4A16 version of the "
        "model (or its 16-bit original): the message says which",
    ),
    "DamagedModelError": ("model_format", "the model files are damaged or incomplete: download them again"),
    "ModelFormatError": (
        "model_format",
        "check that the folder holds one complete model (config.json, tokenizer files, *.safetensors)",
    ),
    "UnsupportedArchitectureError": ("unsupported_architecture", "pick a Llama, Mistral or Qwen family model"),
    "TokenizerMismatchError": ("tokenizer_mismatch", "pick a draft from the same model family as the target"),
    "InsufficientMemoryError": ("insufficient_memory", "use a smaller model or offload more layers"),
    "NumericalError": ("numerical", "download the model again, or pick another"),
    # its message says which drive and what to do; the hint adds what a person may fear
    "DiskWriteError": ("disk_write", "nothing was left half-written"),
}
_DISK_FULL_HINT = "free some space on the drive, then try again"


def error_event(request_id: str | None, error: BaseException) -> P.Error:
    """The Error event for an exception raised while serving a request."""
    for cls in type(error).__mro__:
        if cls.__name__ in _ERROR_KINDS_BY_CLASS:
            kind, hint = _ERROR_KINDS_BY_CLASS[cls.__name__]
            return P.Error(request_id, kind, str(error), hint, getattr(error, "prompt_tokens", 0))
    if is_disk_full(error):  # a write no check foresaw: still the machine's fault, not the engine's
        return P.Error(request_id, "disk_write", f"the drive is full: {error}", _DISK_FULL_HINT)
    if type(error).__name__ == "OutOfMemoryError" or isinstance(error, MemoryError):
        return P.Error(
            request_id,
            "out_of_memory",
            f"out of memory (even at the smallest tree budget): {error}",
            "use a smaller model, a shorter conversation, or offload more layers",
        )
    where = "".join(traceback.format_exception_only(type(error), error)).strip()
    return P.Error(request_id, "internal", f"the engine failed: {where}", "this is a bug; the engine carries on")


def auto_choice_event(request_id: str, choice: Any) -> P.AutoChoice:
    """The AutoChoice event for a core.decoding.autotune.chooser.Choice."""
    config = choice.config
    return P.AutoChoice(
        request_id,
        config.method,
        config.budget,
        config.expand,
        choice.reason,
        choice.tokens_per_pass,
        choice.pass_seconds,
    )


def is_user_error(error: BaseException) -> bool:
    """A SpecExecError that left the caches intact (bad input, said in plain words), not a fault of the engine
    or the model: after one the session's caches stay as they are; after a fault the engine resets them, as
    they may be half-written or hold what the fault computed."""
    is_ours = any(cls.__name__ == "SpecExecError" for cls in type(error).__mro__)
    return is_ours and getattr(error, "caches_intact", True)
