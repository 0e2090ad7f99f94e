"""The app starts `specexec` commands (downloads, the link measurement) as child processes: from a source tree
with `python -m core.cli.main`, and from a frozen bundle, which has no Python to run `-m` with, by starting its
own executable with `--cli` (core.system.cli_process). Both routes run here as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.system.cli_process import CLI_FLAG, cli_command

FIXTURE = Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram32-pcie4.json"


def test_a_frozen_bundle_starts_itself_with_the_cli_flag(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert cli_command("models", "download", "x") == (sys.executable, [CLI_FLAG, "models", "download", "x"])


def test_a_source_tree_runs_the_cli_module():
    assert not getattr(sys, "frozen", False)
    assert cli_command("hw", "--json") == (sys.executable, ["-m", "core.cli.main", "hw", "--json"])


def _described(program: str, arguments: list[str]) -> dict:
    env = {**os.environ, "SPECEXEC_HW_FIXTURE": str(FIXTURE), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([program, *arguments, "hw", "--json"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_desktop_entry_point_runs_a_command_line_and_exits():
    """`specexec-desktop --cli hw --json` (what a frozen bundle is started with) prints the command's JSON and
    exits instead of opening a window."""
    entry = Path(sys.executable).with_name("specexec-desktop")
    if not entry.is_file():
        pytest.fail(f"the desktop entry point is not installed beside {sys.executable}")
    described = _described(str(entry), [CLI_FLAG])
    assert described == _described(*cli_command())
    assert described["gpus"][0]["vram_total_bytes"] > 20e9
