"""Real server processes on loopback for the remote-endpoint tests: the independent OpenAI-compatible server
(tests/other_openai_server.py) and `specexec serve`, each started as its own process and stopped by its pid.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).parent


@contextmanager
def other_server(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """tests/other_openai_server.py on a free port: (base URL, process)."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "other_openai_server.py"), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on "), (line, process.stderr.read() if process.poll() is not None else "")
        yield line.split()[-1], process
    finally:
        stop(process)


@contextmanager
def specexec_serve(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`specexec serve --port 0 ARGS` once it serves: (base URL, process). SIGTERM must end it with 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "core.cli.main", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith(("API key:", "No API key required")):
                break
        url = next((line.split()[-1] for line in lines if line.startswith("Serving the OpenAI API at ")), None)
        assert url is not None, (lines, process.stderr.read() if process.poll() is not None else "")
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            finally:
                stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def server_state(base_url: str) -> dict:
    """The independent server's own account: streams active, finished, disconnected; the last request."""
    return get_json(base_url.removesuffix("/v1") + "/_state")


def wait_until(condition, timeout: float, interval: float = 0.02) -> float:
    """Seconds until `condition()` held (AssertionError after `timeout`)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(interval)
    return time.monotonic() - started
