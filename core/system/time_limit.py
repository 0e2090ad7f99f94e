"""A time limit for pure Python code that may never finish, such as a model's chat template.

A chat template is the model's own Jinja code: one with a loop over range(100000) inside another runs for
hours, in whatever thread renders it (an engine's, a server's), where neither a Stop nor a closed connection
can end it. `call_within` makes the thread raise at its next bytecode once the time is up
(PyThreadState_SetAsyncExc, CPython's way to raise in another thread; a C call in progress finishes first).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class _TimeUp(BaseException):
    """Raised inside the limited call. A BaseException, so that no `except Exception` in the code it
    interrupts (Jinja's, transformers') takes it for an error of its own and goes on."""


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Have `thread_id` raise `exception` at its next bytecode; None takes back one not yet raised."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception is not None else None
    )


def call_within(seconds: float, function: Callable[[], T]) -> T:
    """`function()`'s result, if it returns within `seconds`.

    Raises:
        TimeoutError: it ran longer (it was interrupted then, and nothing of it runs on).
    """
    thread_id = threading.get_ident()
    lock = threading.Lock()
    state = {"running": True, "fired": False}

    def interrupt() -> None:
        with lock:
            if state["running"]:
                state["fired"] = True
                _raise_in(thread_id, _TimeUp)

    timer = threading.Timer(seconds, interrupt)
    timer.daemon = True
    try:
        try:
            timer.start()
            return function()
        finally:
            # the interruption may arrive anywhere up to here; after it, none is pending or can come
            with lock:
                state["running"] = False
                if state["fired"]:
                    _raise_in(thread_id, None)  # the call ended at the limit: not raised yet, so never
            timer.cancel()
    except _TimeUp:
        raise TimeoutError(f"did not finish within {seconds:g} s") from None
