"""The command line as a new user meets it (issue 42, item 19): `specexec --help` answers without loading
torch, every option of the everyday commands says what it does, `models list` names the built-in pair once,
and `specexec chat` says "Loading the model…" instead of the engine's steps (unless --verbose)."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys

import pytest

from core.cli.chat import LoadReport
from core.cli.main import COMMANDS, build_parser, main
from core.engine import protocol as P

EVERYDAY = ("generate", "chat", "serve", "models", "hw", "doctor")


def test_help_lists_the_commands_without_importing_torch():
    code = (
        "import sys\nfrom core.cli.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "sys.exit(3 if 'torch' in sys.modules or 'transformers' in sys.modules else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert all(name in result.stdout for name in COMMANDS)


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif action.option_strings and action.dest != "help":
            yield path, action


@pytest.mark.parametrize("command", EVERYDAY)
def test_every_option_of_the_everyday_commands_has_help(command):
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    missing = [f"{path} {action.option_strings[0]}" for path, action in _options(sub, command) if not action.help]
    assert not missing


def test_models_list_names_the_built_in_pair_once(tmp_path, capsys):
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("builtin "))
    assert line.count("built-in") == 1, line


def test_loading_is_one_line_unless_verbose():
    stages = [
        P.LoadProgress("Reading the metadata of x.gguf", fraction=0.1),
        P.LoadProgress("Dequantising the weights of x.gguf (float32 on cpu)", fraction=0.6),
    ]
    quiet, verbose = io.StringIO(), io.StringIO()
    report = LoadReport(False, quiet)
    for event in stages:
        report(event)
    report.done()
    assert quiet.getvalue() == "Loading the model…\n"
    loud = LoadReport(True, verbose)
    for event in stages:
        loud(event)
    assert verbose.getvalue().splitlines() == [event.stage for event in stages]


def test_the_wizard_and_models_list_give_a_pair_the_same_size(tmp_path, capsys):
    from app.models.wizard.words import size_words
    from core.models.catalog import load_catalog

    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for pair in load_catalog().pairs:
        if pair.download_bytes:
            line = next(line for line in lines if line.strip().startswith(pair.id + " "))
            assert size_words(pair.download_bytes) in line, (pair.id, line)
