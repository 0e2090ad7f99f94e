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

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.bench.loopback_hub import HostedRepo, LoopbackHub, payload

__all__ = ["HostedRepo", "HubEnv", "LoopbackHub", "hub", "hub_env", "payload"]


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
        "SPECEXEC_MODELS_DIR": str(models), "SPECEXEC_CONFIG_DIR": str(config), "HF_HOME": str(tmp_path / "hf-home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", "HF_HUB_DISABLE_XET": "1",
        "HF_ENDPOINT": hub.url, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("SPECEXEC_DOWNLOAD_FREE_BYTES", raising=False)
    return HubEnv(models, config, dict(os.environ))
