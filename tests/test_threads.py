"""CPU threads: one helper picks the default (physical cores minus one, at least one) for the CLI, the engine
process and the app; `--threads` overrides it on generate, chat and the benchmarks."""

from __future__ import annotations

import os

import pytest
import torch

from conftest import torch_threads
from core.cli.main import build_parser, main
from core.system.threads import default_thread_count
from test_cli import tiny_pair  # noqa: F401 - fixture


def test_default_leaves_one_physical_core_free():
    assert default_thread_count(physical_cores=8) == 7
    assert default_thread_count(physical_cores=2) == 1
    assert default_thread_count(physical_cores=1) == 1
    assert default_thread_count(physical_cores=None) >= 1  # unknown core count: still a usable number


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--prompt", "x"],
        ["chat"],
        ["bench", "acceptance", "--prompts", "p"],
        ["bench", "chat"],
        ["bench", "offload"],
    ],
)
def test_every_model_command_accepts_threads(command):
    args = build_parser().parse_args([*command, "--threads", "3"])
    assert args.threads == 3
    assert build_parser().parse_args(command).threads is None  # None: the default helper decides


def test_generate_runs_on_the_default_or_the_given_thread_count(tiny_pair, capsys):  # noqa: F811
    target, draft = map(str, tiny_pair)
    common = [
        "generate",
        "--target",
        target,
        "--draft",
        draft,
        "--prompt",
        "w5 w6",
        "--max-new-tokens",
        "4",
        "--budget",
        "4",
        "--json",
    ]
    with torch_threads(5):  # whatever torch had before, generate sets its own count
        assert main(common) == 0
        assert torch.get_num_threads() == default_thread_count()
        assert main([*common, "--threads", "2"]) == 0
        assert torch.get_num_threads() == min(2, os.cpu_count())
        assert main([*common, "--threads", "100000"]) == 0  # more than the machine has: a crash starting them
        assert torch.get_num_threads() == os.cpu_count()
    capsys.readouterr()


def test_threads_below_one_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--prompt", "x", "--threads", "0"])
    assert "at least 1" in capsys.readouterr().err
