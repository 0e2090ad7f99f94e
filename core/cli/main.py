"""Entry point of the `specexec` command; each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import importlib
import sys

from core.cli.bench import BENCHMARKS  # names only: core.cli.bench imports no benchmark until one runs
from core.cli.text_streams import use_utf8_streams

# command name -> module with add_arguments(parser) and run(args)
COMMANDS = {
    "generate": ("core.cli.generate", "generate text from a prompt"),
    "chat": ("core.cli.chat", "chat in the terminal (the engine runs in its own process)"),
    "bench": ("core.cli.bench", f"benchmarks: {', '.join(BENCHMARKS)}"),
    "models": ("core.cli.models", "model pairs: recommend, download, list, delete, import"),
    "hw": ("core.cli.hw", "what this computer has: CPU, RAM, NVIDIA GPUs and their PCIe links, free disk"),
    "serve": ("core.cli.serve", "a local OpenAI-compatible API server (chat and text completions)"),
    "doctor": ("core.cli.doctor", "check that this machine's NVIDIA GPU runs the engine correctly, and report"),
    "text": (
        "core.cli.text",
        "the text of a document (a text file, a PDF, a Word file), as the app adds it to a message",
    ),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """All subcommands; with `only`, just that one gets its arguments, and with only="" none does (their
    modules import torch and transformers, which takes seconds: `specexec hw --json` must answer the app's
    wizard at once, and `specexec --help` lists the commands without loading any of it)."""
    parser = argparse.ArgumentParser(prog="specexec", description="SpecExec engine, headless.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if only is None or name == only:
            importlib.import_module(module).add_arguments(command)
        command.set_defaults(module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    use_utf8_streams()
    argv = sys.argv[1:] if argv is None else argv
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    args = build_parser(first if first in COMMANDS else "").parse_args(argv)  # no command: its help, at once
    from core.errors import SpecExecError

    try:
        return importlib.import_module(args.module).run(args)
    except (SpecExecError, FileNotFoundError) as error:
        from core.text.terminal import for_stream  # the error may quote a model's files or a server's answer

        print(for_stream(f"error: {error}", sys.stderr), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
