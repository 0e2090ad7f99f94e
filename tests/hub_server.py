"""Pytest fixtures for code that talks to the Hugging Face hub: a real HTTP server on loopback standing in for
it (core/bench/loopback_hub.py, shared with `specexec bench download`), and an environment that keeps the
models folder, config folder, token and hub cache inside the test's tmp_path.

Use it from a test module with `pytest_plugins = ["hub_server"]` and `from hub_server import ...`:

    def test_x(hub, hub_env):
        repo = hub.add_repo("org/model", {"config.json": b"{}", "model.safetensors": payload(4 << 20)})
        hub.add_repo("org/gated", {...}, gated=True, token="hf_right")
        hub.drop_once("model.safetensors", after_bytes=1 << 20)   # also: stall_once, corrupt, limit_rate
        ... run `specexec models download org/model --json` ...
        assert hub.bytes_served == ...
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.bench.loopback_hub import HostedRepo, LoopbackHub, git_blob_id, payload
from core.models.download_progress import DownloadListener

__all__ = [
    "MODELS_CLI",
    "HostedRepo",
    "HubEnv",
    "LoopbackHub",
    "Recorder",
    "cli_process",
    "git_blob_id",
    "hub",
    "hub_env",
    "payload",
    "read_events_until",
]

# `specexec models ...` in a subprocess, through the models dispatcher alone: the full `specexec` parser
# imports every command, and `generate`'s options import torch (8-30 s on a shared 2-core machine).
MODELS_CLI = [
    sys.executable,
    "-c",
    (
        "import argparse, sys; from core.cli import models; parser = argparse.ArgumentParser(); "
        "models.add_arguments(parser); sys.exit(models.run(parser.parse_args(sys.argv[1:])))"
    ),
]


@dataclass(frozen=True)
class HubEnv:
    models_dir: Path
    config_dir: Path
    env: dict[str, str]  # the whole environment for a subprocess (the CLI) pointed at the hub


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackHub]:
    """A fresh loopback hub; HF_ENDPOINT points at it for this test."""
    with LoopbackHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


@pytest.fixture
def hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub: LoopbackHub) -> HubEnv:
    """Models, config and hub-cache folders under tmp_path; no token from the user's real environment
    (HF_TOKEN unset, no keyring backend, huggingface_hub's own login folder empty)."""
    models, config = tmp_path / "models", tmp_path / "config"
    values = {
        "SPECEXEC_MODELS_DIR": str(models),
        "SPECEXEC_CONFIG_DIR": str(config),
        "HF_HOME": str(tmp_path / "hf-home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        "HF_HUB_DISABLE_XET": "1",
        "HF_ENDPOINT": hub.url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("SPECEXEC_DOWNLOAD_FREE_BYTES", raising=False)
    return HubEnv(models, config, dict(os.environ))


@contextlib.contextmanager
def cli_process(hub_env: HubEnv, *args: str) -> Iterator[subprocess.Popen]:
    """`specexec models ARGS` as a real process against the loopback hub (JSON lines on stdout), killed if
    still running and reaped when the block ends."""
    process = subprocess.Popen(
        [*MODELS_CLI, *args], env=hub_env.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        process.stderr.close()


def read_events_until(process: subprocess.Popen, predicate) -> list[dict]:
    """The process's JSON events up to and including the first that `predicate` accepts (all of them when
    none does and the process ends)."""
    events = []
    for line in process.stdout:
        events.append(json.loads(line))
        if predicate(events[-1]):
            break
    return events


class Recorder(DownloadListener):
    """A download's events as tuples, in order: ("plan", total, already), ("progress", done), ("verify", file,
    ok), ("check", file, ok), ("retry", file, attempt, reason)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def plan(self, folders, files, total_bytes, already_bytes):
        self.events.append(("plan", total_bytes, already_bytes))

    def progress(self, progress):
        self.events.append(("progress", progress.done_bytes))

    def verify(self, file, ok):
        self.events.append(("verify", file, ok))

    def check(self, file, ok):
        self.events.append(("check", file, ok))

    def retry(self, file, attempt, reason):
        self.events.append(("retry", file, attempt, reason))

    def of(self, kind: str) -> list[tuple]:
        return [event for event in self.events if event[0] == kind]
