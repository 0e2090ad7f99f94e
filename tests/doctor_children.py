"""Stand-ins for the doctor's child process (core.doctor.process spawns them by name).

Apart from the tests that use them, so that a spawned child imports only this module: the test module would
bring torch and transformers, seconds of every spawn."""

from __future__ import annotations

import os
import time
from multiprocessing.queues import Queue


def dies(messages: Queue, device: str, save_folder: str | None) -> None:
    """A child that crashes half-way, as a driver fault would."""
    messages.put(("progress", 1, 6, "driver and GPU"))
    messages.close()
    messages.join_thread()  # the message is out; then the process dies without any clean-up
    os._exit(3)


def hangs(messages: Queue, device: str, save_folder: str | None) -> None:
    """A child that never answers."""
    time.sleep(60)
