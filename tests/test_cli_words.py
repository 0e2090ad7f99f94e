"""The command line as a new user meets it (issue 42, item 19): every `--help` answers without loading torch
or transformers, every option of every command says what it does, `models list` names the built-in pair once,
and `specexec chat` says "Loading the model…" instead of the engine's steps (unless --verbose)."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys


from core.cli.chat import LoadReport
from core.cli.main import COMMANDS, build_parser, main
from core.engine import protocol as P

# Every `--help` there is, run through main() in one fresh process (one process for all: each costs a
# second or more of start-up); it prints each command's help and, last, the heavy modules it imported.
_EVERY_HELP = """
import contextlib, io, sys
from core.cli.bench import BENCHMARKS
from core.cli.main import COMMANDS, main
from core.cli.models import ACTIONS

commands = [[]] + [[name] for name in COMMANDS]
commands += [["bench", name] for name in BENCHMARKS] + [["models", name] for name in ACTIONS]
for command in commands:
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
        main(command + ["--help"])
    print(" ".join(command), "|", "usage:" in text.getvalue())
print("heavy:", sorted(name for name in ("torch", "transformers") if name in sys.modules))
"""


def test_every_help_answers_without_importing_torch_or_transformers():
    result = subprocess.run([sys.executable, "-c", _EVERY_HELP], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    *helps, heavy = result.stdout.splitlines()
    assert heavy == "heavy: []"
    assert len(helps) > len(COMMANDS) and all(line.endswith("| True") for line in helps), helps


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{path} {name}")
        elif action.option_strings and action.dest != "help":
            yield path, action


def test_every_option_of_every_command_has_help():
    options = list(_options(build_parser(), "specexec"))
    missing = [f"{path} {action.option_strings[0]}" for path, action in options if not action.help]
    assert len(options) > 300 and not missing, missing


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


def test_models_recommend_and_the_wizard_give_a_pair_the_same_size(capsys):
    """Issue 42 item 18 ("42.4 GB in the wizard vs 45.5 GB in the CLI"): one byte rule for both."""
    from pathlib import Path

    from app.models.wizard.words import size_words
    from core.models.catalog import load_catalog

    fixture = Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"
    assert main(["models", "recommend", "--hw", str(fixture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    checked = 0
    for pair in load_catalog().pairs:
        row = next((line for line in lines if line.strip().startswith(pair.name + " ")), None)
        if pair.download_bytes and row is not None:  # the pair's own draft: its first row
            assert f" {size_words(pair.download_bytes)} " in row, (pair.id, row)
            checked += 1
    assert checked >= 3


def test_one_byte_rule_and_one_token_count_rule():
    from core.planning.sizes import format_bytes
    from core.text.counts import token_count

    assert format_bytes(45.5e9) == "42.4 GB" and format_bytes(24 * 1024**3) == "24.0 GB"
    assert (
        format_bytes(29_000_000) == "27.7 MB" and format_bytes(512) == "512 B" and format_bytes(3 * 1024**4) == "3.0 TB"
    )
    assert token_count(20036) == "20,036 tokens" and token_count(1) == "1 token" and token_count(4096) == "4,096 tokens"


def test_models_recommend_keeps_its_columns_under_their_headings_for_the_longest_pair_name(capsys):
    """'DeepSeek R1 Distill Llama 70B' is longer than the pair column once was: its draft ran into its name
    ("... 70B 4bit") and every later column stood a place to the right of its heading."""
    from pathlib import Path

    from core.models.catalog import load_catalog

    fixture = Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"
    assert main(["models", "recommend", "--hw", str(fixture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["pair", "draft"])
    rows = lines[lines.index(header) + 1 : lines.index("", lines.index(header))]
    pairs = load_catalog().pairs
    drafts = {""} | {option.id for pair in pairs for option in pair.drafts}
    assert len(rows) >= len(pairs)
    draft_at, fit_at = header.index("draft"), header.index("fit")
    for row in rows:
        assert row[draft_at - 1] == " " and row[fit_at - 1] == " ", row  # nothing runs into the next column
        assert row[fit_at:].split()[0] in ("fits", "tight", "no"), row
        name, draft = row[:draft_at].strip(), row[draft_at:fit_at].strip()
        assert draft in drafts and (not name or any(pair.name == name for pair in pairs)), row
