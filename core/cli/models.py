"""`specexec models <action>`: find, fit and fetch model pairs; each action lives in its own module."""

from __future__ import annotations

import argparse
import importlib

# action -> (module with add_arguments(parser) and run(args), help)
ACTIONS: dict[str, tuple[str, str]] = {
    "download": ("core.cli.models_download", "download a pair or a hub repo (resumable, verified)"),
    "list": ("core.cli.models_list", "installed models, unfinished downloads and the catalog's pairs"),
    "delete": ("core.cli.models_delete", "delete a model or a pair"),
    "import": ("core.cli.models_import", "add a model folder or a .gguf file you already have"),
    "login": ("core.cli.models_login", "keep a Hugging Face token for gated models"),
    "logout": ("core.cli.models_logout", "forget the stored Hugging Face token"),
    "recommend": ("core.cli.models_recommend", "which model pairs this computer can run, how fast, and which to pick"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    for name, (module, help_text) in ACTIONS.items():
        command = sub.add_parser(name, help=help_text)
        importlib.import_module(module).add_arguments(command)
        command.set_defaults(action_module=module)


def run(args: argparse.Namespace) -> int:
    return importlib.import_module(args.action_module).run(args)
